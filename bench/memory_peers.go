package main

import (
	"context"
	"hash/maphash"
	"runtime"
	"sync"
	"syscall"
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

// memContenders returns the in-process contenders: sluice's two first, then
// x/time/rate, the one memoryTable takes ratios to, so that it runs next to
// them.
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
		{allowRow, "the same through the Limiter: a policy compiled at its first use, its check handed to the store (store.CheckDecider), the status held in the Decision", func(names []string) func() decideFunc {
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
		{"x/time/rate (keyed map)", "token bucket per key in a sharded map", func(names []string) func() decideFunc {
			m := newRateMap()
			return func() decideFunc {
				return func(ctx context.Context, i int) (bool, error) {
					return m.get(names[i]).Allow(), nil
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

// memResult is one in-process contender's figures in one round.
type memResult struct {
	serialNs, parallelNs float64
	allocs, bytes        float64 // per decision, serial
	heapPerKey           float64 // bytes of live heap per warm key
}

// memDecisionsPerKey is how many decisions a round makes per key, serially
// and then again in parallel: every contender, in every round, makes the
// same decisions on the same keys, so a log fills as much for one sluice
// contender as for the other, and every key stays below its limit (a
// warm-up decision and twice this are under perKeyLimit).
const memDecisionsPerKey = 10

// benchMem measures c once over names, fresh: it warms every key (one
// decision each), settles the heap (the garbage of the contender before
// and of the warm-up collected, so no collection runs in the timed loops),
// then times len(names)*memDecisionsPerKey decisions made serially, the
// keys in turn (the CPU time of the thread that makes them), and as many
// again from GOMAXPROCS goroutines (wall time: their throughput).
func benchMem(c memContender, names []string) memResult {
	ctx := context.Background()
	keys := len(names)
	heap0 := settledHeap()
	newWorker := c.newWorker(names)
	warm := newWorker()
	for i := range names {
		if _, err := warm(ctx, i); err != nil {
			panic(err)
		}
	}
	n := keys * memDecisionsPerKey
	var r memResult
	r.heapPerKey = (float64(settledHeap()) - float64(heap0)) / float64(keys)

	f := newWorker()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	// The serial loop's goroutine keeps its thread, whose CPU time it
	// counts: on a shared machine the time the thread waits for a core is
	// not the contender's.
	runtime.LockOSThread()
	start := threadCPU()
	i := 0
	for range n {
		_, _ = f(ctx, i)
		if i++; i == keys {
			i = 0
		}
	}
	elapsed := threadCPU() - start
	runtime.UnlockOSThread()
	runtime.ReadMemStats(&after)
	r.serialNs = float64(elapsed.Nanoseconds()) / float64(n)
	r.allocs = float64(after.Mallocs-before.Mallocs) / float64(n)
	r.bytes = float64(after.TotalAlloc-before.TotalAlloc) / float64(n)

	procs := runtime.GOMAXPROCS(0)
	workers := make([]decideFunc, procs)
	for g := range workers {
		workers[g] = newWorker()
	}
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for g := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, i := workers[g], g*keys/procs // each goroutine from its own part of the keys
			<-gate
			for range n / procs {
				_, _ = f(ctx, i)
				if i++; i == keys {
					i = 0
				}
			}
		}()
	}
	runtime.GC()
	wall := time.Now()
	close(gate)
	wg.Wait()
	r.parallelNs = float64(time.Since(wall).Nanoseconds()) / float64(n/procs*procs)
	return r
}

// settledHeap returns the live heap once collections stop freeing it: a
// contender that stops its own goroutines from a finalizer (as some
// stores' cleaners do) is freed a collection or two after its last use,
// which would otherwise count against the next contender's keys.
func settledHeap() uint64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	for range 10 {
		before := m.HeapAlloc
		runtime.Gosched() // the finalizers' goroutine
		runtime.GC()
		runtime.ReadMemStats(&m)
		if m.HeapAlloc+m.HeapAlloc/100 >= before {
			break
		}
	}
	return m.HeapAlloc
}

// threadCPU returns the CPU time the calling thread has used, user and
// system (getrusage RUSAGE_THREAD).
func threadCPU() time.Duration {
	const rusageThread = 1 // RUSAGE_THREAD, which package syscall does not name
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
