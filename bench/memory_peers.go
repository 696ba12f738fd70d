package main

import (
	"context"
	"hash/maphash"
	"sync"
	"testing"
	"time"

	golimiter "github.com/sethvargo/go-limiter/memorystore"
	"github.com/throttled/throttled/v2"
	thmem "github.com/throttled/throttled/v2/store/memstore"
	"github.com/ulule/limiter/v3"
	ulmem "github.com/ulule/limiter/v3/drivers/store/memory"
	"golang.org/x/time/rate"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/resolve"
	"github.com/sluicerate/sluice/memstore"
)

// memContender is an in-process limiter: newWorker returns the decider of
// one goroutine.
type memContender struct {
	name      string
	note      string
	newWorker func(names []string) func() decideFunc
}

func memContenders() []memContender {
	return []memContender{
		{"sluice memstore (Store.Decide)", "exact sliding log; one store request, resolved once, reused", func(names []string) func() decideFunc {
			s := memstore.New(memstore.Config{})
			p := onePolicy()
			return func() decideFunc {
				req, err := resolve.Request(p, map[string]string{"key": ""}, 1)
				if err != nil {
					panic(err)
				}
				return func(ctx context.Context, i int) (bool, error) {
					req.Checks[0].Values[0] = names[i]
					err := s.Decide(ctx, req)
					return err == nil && req.Results[0].Fits, err
				}
			}
		}},
		{"sluice memstore (Limiter.Allow)", "the same through the Limiter: a policy compiled at its first use, a Request, the status held in the Decision", func(names []string) func() decideFunc {
			lim := sluice.NewLimiter(memstore.New(memstore.Config{}), benchLimiterConfig)
			p := onePolicy()
			return func() decideFunc {
				attrs := map[string]string{"key": ""}
				return func(ctx context.Context, i int) (bool, error) {
					attrs["key"] = names[i]
					d, err := lim.Allow(ctx, p, attrs)
					return d.Allowed, err
				}
			}
		}},
		{"sethvargo/go-limiter memorystore", "token bucket", func(names []string) func() decideFunc {
			s, err := golimiter.New(&golimiter.Config{Tokens: perKeyLimit, Interval: window})
			if err != nil {
				panic(err)
			}
			return func() decideFunc {
				return func(ctx context.Context, i int) (bool, error) {
					_, _, _, ok, err := s.Take(ctx, names[i])
					return ok, err
				}
			}
		}},
		{"throttled/throttled v2 memstore", "GCRA", func(names []string) func() decideFunc {
			st, err := thmem.NewCtx(0)
			if err != nil {
				panic(err)
			}
			lim, err := throttled.NewGCRARateLimiterCtx(st, throttled.RateQuota{MaxRate: throttled.PerMin(perKeyLimit), MaxBurst: perKeyLimit - 1})
			if err != nil {
				panic(err)
			}
			return func() decideFunc {
				return func(ctx context.Context, i int) (bool, error) {
					limited, _, err := lim.RateLimitCtx(ctx, names[i], 1)
					return !limited, err
				}
			}
		}},
		{"ulule/limiter v3 memory", "fixed window", func(names []string) func() decideFunc {
			lim := limiter.New(ulmem.NewStore(), limiter.Rate{Period: window, Limit: perKeyLimit})
			return func() decideFunc {
				return func(ctx context.Context, i int) (bool, error) {
					res, err := lim.Get(ctx, names[i])
					return !res.Reached, err
				}
			}
		}},
		{"x/time/rate (keyed map)", "token bucket per key in a sharded map", func(names []string) func() decideFunc {
			m := newRateMap()
			return func() decideFunc {
				return func(ctx context.Context, i int) (bool, error) {
					return m.get(names[i]).Allow(), nil
				}
			}
		}},
	}
}

// rateMap is the usual way to key golang.org/x/time/rate: a map of
// limiters, here split over 256 locked shards.
type rateMap struct {
	seed   maphash.Seed
	shards [256]struct {
		mu sync.Mutex
		m  map[string]*rate.Limiter
	}
}

func newRateMap() *rateMap {
	m := &rateMap{seed: maphash.MakeSeed()}
	for i := range m.shards {
		m.shards[i].m = map[string]*rate.Limiter{}
	}
	return m
}

func (m *rateMap) get(key string) *rate.Limiter {
	sh := &m.shards[maphash.String(m.seed, key)&255]
	sh.mu.Lock()
	l := sh.m[key]
	if l == nil {
		l = rate.NewLimiter(rate.Every(window/perKeyLimit), perKeyLimit)
		sh.m[key] = l
	}
	sh.mu.Unlock()
	return l
}

// memResult is one in-process contender's figures.
type memResult struct {
	serialNs, parallelNs float64
	allocs, bytes        int64
}

// benchMem measures c serially and from GOMAXPROCS goroutines over keys
// keys, every key warmed first.
func benchMem(c memContender, keys int) memResult {
	names := keyNames(keys)
	ctx := context.Background()
	var r memResult
	newWorker := c.newWorker(names)
	warm := newWorker()
	for i := range names {
		if _, err := warm(ctx, i); err != nil {
			panic(err)
		}
	}
	serial := testing.Benchmark(func(b *testing.B) {
		f := newWorker()
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			_, _ = f(ctx, i)
			if i++; i == keys {
				i = 0
			}
		}
	})
	r.serialNs = float64(serial.T.Nanoseconds()) / float64(serial.N)
	r.allocs, r.bytes = serial.AllocsPerOp(), serial.AllocedBytesPerOp()
	parallel := testing.Benchmark(func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			f := newWorker()
			i := int(time.Now().UnixNano() % int64(keys))
			for pb.Next() {
				_, _ = f(ctx, i)
				if i++; i == keys {
					i = 0
				}
			}
		})
	})
	r.parallelNs = float64(parallel.T.Nanoseconds()) / float64(parallel.N)
	return r
}
