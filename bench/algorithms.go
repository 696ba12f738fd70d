package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/ulule/limiter/v3"
	ulredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/redistest"
	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/store"
)

// The algorithms section: each of sluice's algorithms at limits of 10 to
// 10,000 per key per hour, beside redis_rate's GCRA and ulule's fixed
// window, every key full: its Redis memory, and decisions/s against full
// keys (every decision a denial, what a flood of refused requests costs).

// algorithmContender is one way of keeping a limit per key in the table.
type algorithmContender struct {
	name string
	// open fills keys names to limit per hour and returns their deciders
	// and the Redis key of key i.
	open func(b *bench, names []string, limit int) (worker func() decideFunc, redisKey func(int) string, close func(), err error)
}

func algorithmContenders() []algorithmContender {
	sluiceAlgorithm := func(a sluice.Algorithm) func(b *bench, names []string, limit int) (func() decideFunc, func(int) string, func(), error) {
		return func(b *bench, names []string, limit int) (func() decideFunc, func(int) string, func(), error) {
			// Short names: a key's name is most of a small key's memory.
			p := &sluice.Policy{Name: "a", Rules: []sluice.Rule{
				{Name: "r", Limit: int64(limit), Window: time.Hour, By: []string{"key"}, Algorithm: a},
			}}
			s, err := redisstore.New(redisstore.Config{Addrs: []string{b.addr}, Prefix: "s"})
			if err != nil {
				return nil, nil, nil, err
			}
			lim := sluice.NewLimiter(s, benchLimiterConfig)
			if err := fill(lim, p, names, limit, fmt.Sprintf("%v: filling %d keys to %d", a, len(names), limit)); err != nil {
				s.Close()
				return nil, nil, nil, err
			}
			worker := func() decideFunc {
				attrs := map[string]string{"key": ""}
				return func(ctx context.Context, i int) (bool, error) {
					attrs["key"] = names[i]
					d, err := lim.Allow(ctx, p, attrs)
					return d.Allowed, err
				}
			}
			key := func(i int) string {
				req, err := sluice.Resolve(p, map[string]string{"key": names[i]}, 1)
				if err != nil {
					return ""
				}
				return s.Keys(req)[0]
			}
			return worker, key, func() { s.Close() }, nil
		}
	}
	return []algorithmContender{
		{"sluice log", sluiceAlgorithm(sluice.Log)},
		{"sluice gcra", sluiceAlgorithm(sluice.GCRA)},
		{"sluice sliding-counter", sluiceAlgorithm(sluice.SlidingCounter)},
		{"go-redis/redis_rate (GCRA)", func(b *bench, names []string, limit int) (func() decideFunc, func(int) string, func(), error) {
			c := newGoRedis(b.addr)
			lim := redis_rate.NewLimiter(c)
			l := redis_rate.PerHour(limit)
			for _, n := range names {
				if _, err := lim.AllowN(bgCtx, n, l, limit); err != nil {
					c.Close()
					return nil, nil, nil, err
				}
			}
			worker := func() decideFunc {
				return func(ctx context.Context, i int) (bool, error) {
					res, err := lim.Allow(ctx, names[i], l)
					return err == nil && res.Allowed > 0, err
				}
			}
			return worker, func(i int) string { return "rate:" + names[i] }, func() { c.Close() }, nil
		}},
		{"ulule/limiter (fixed window)", func(b *bench, names []string, limit int) (func() decideFunc, func(int) string, func(), error) {
			c := newGoRedis(b.addr)
			store, err := ulredis.NewStoreWithOptions(c, limiter.StoreOptions{Prefix: "ulule"})
			if err != nil {
				c.Close()
				return nil, nil, nil, err
			}
			lim := limiter.New(store, limiter.Rate{Period: time.Hour, Limit: int64(limit)})
			for _, n := range names {
				if _, err := lim.Increment(bgCtx, n, int64(limit)); err != nil {
					c.Close()
					return nil, nil, nil, err
				}
			}
			worker := func() decideFunc {
				return func(ctx context.Context, i int) (bool, error) {
					res, err := lim.Get(ctx, names[i])
					return err == nil && !res.Reached, err
				}
			}
			return worker, func(i int) string { return "ulule:" + names[i] }, func() { c.Close() }, nil
		}},
	}
}

func (b *bench) algorithmsTable() {
	fmt.Println("### Algorithms: memory of a full key, and decisions/s against full keys (Redis, one rule per key, a limit per hour)")
	fmt.Println()
	fmt.Println("Redis B/key is MEMORY USAGE, which counts the key's name: the first key's name is shown. B/event is")
	fmt.Println("B/key divided by the events the key stands for (the limit).")
	fmt.Println()
	fmt.Println("| limit | contender | keys | first key | Redis B/key | B/event | decisions/s (denials) | p99 |")
	fmt.Println("|---:|---|---:|---|---:|---:|---:|---:|")
	for _, limit := range []int{10, 100, 1000, 10000} {
		keys := min(1000, 200_000/limit)
		names := keyNames(keys)
		for _, c := range algorithmContenders() {
			b.adm.flush()
			worker, key, closeFn, err := c.open(b, names, limit)
			if err != nil {
				fmt.Fprintf(os.Stderr, "bench: %s: %v\n", c.name, err)
				continue
			}
			perKey, _ := b.adm.perKey(&instance{redisKey: key}, keys, 100)
			w := b.w
			w.keys = keys
			w.duration = max(b.w.duration/2, time.Second)
			o := run(w, worker, progress(fmt.Sprintf("%s, limit %d", c.name, limit)))
			doneProgress()
			closeFn()
			if o.errors > 0 {
				fmt.Fprintf(os.Stderr, "bench: %s, limit %d: %d errors, first: %v\n", c.name, limit, o.errors, o.firstErr)
			}
			fmt.Printf("| %d | %s | %d | `%s` | %.0f | %.2f | %.0f | %s |\n", limit, c.name, keys, key(0), perKey, perKey/float64(limit), o.perSecond(), fmtDur(o.p99))
		}
	}
	fmt.Println()
}

// hotKeyTable measures one tenant that takes all the traffic on a 3-master
// Redis Cluster the bench starts: its window as one key (spread 1) and
// spread over 6 sub-windows, every decision an admission.
func (b *bench) hotKeyTable() {
	c, err := redistest.StartClusterMain()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: hot key:", err)
		return
	}
	defer c.Stop()
	const instances = 32
	fmt.Printf("### One hot tenant on a 3-master Redis Cluster (%d goroutines as %d application instances, every decision admitted)\n\n", b.w.goroutines, instances)
	fmt.Println("The masters, their replicas and the benchmark share this machine's cores, so decisions/s measures")
	fmt.Println("them together. What bounds a tenant when every master has a core of its own is its hottest master:")
	fmt.Println("its Redis CPU per decision, and the decisions/s that CPU allows (10^6 / µs per decision).")
	fmt.Println()
	fmt.Println("| spread | decisions/s (this machine) | p99 | sub-windows per master | hottest master's Redis CPU µs/decision | its ceiling, decisions/s | ceiling ÷ spread 1 |")
	fmt.Println("|---:|---:|---:|---|---:|---:|---:|")
	masters := c.Masters()
	cpuOf := func() []float64 {
		out := make([]float64, len(masters))
		for i, m := range masters {
			info, err := m.Do("INFO", "cpu")
			if err != nil {
				continue
			}
			for _, line := range strings.Split(info, "\n") {
				k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
				if k == "used_cpu_sys" || k == "used_cpu_user" {
					f, _ := strconv.ParseFloat(v, 64)
					out[i] += f
				}
			}
		}
		return out
	}
	var baseCeiling float64
	for _, spread := range []int{1, 2, 3, 6} {
		p := &sluice.Policy{Name: "hot", Rules: []sluice.Rule{
			{Name: "tenant", By: []string{"tenant"}, Limit: 1 << 40, Window: time.Minute, Spread: spread},
		}}
		if spread == 1 {
			p.Rules[0].Spread = 0
		}
		// Each goroutine pair is an application instance of its own: a
		// client and batchers of its own, as a fleet of services has.
		stores := make([]*redisstore.Store, instances)
		lims := make([]*sluice.Limiter, instances)
		for i := range stores {
			st, err := redisstore.New(redisstore.Config{Mode: redisstore.Cluster, Addrs: c.Addrs(), Prefix: "hot" + strconv.Itoa(spread)})
			if err != nil {
				fmt.Fprintln(os.Stderr, "bench: hot key:", err)
				return
			}
			stores[i], lims[i] = st, sluice.NewLimiter(st, benchLimiterConfig)
		}
		s := stores[0]
		perMaster := make([]int, len(masters))
		for i := range max(1, spread) {
			vals := []string{"acme"}
			if spread > 1 {
				vals = append(vals, strconv.Itoa(i))
			}
			key := s.Keys(&store.Request{Policy: p.Name, Checks: []store.Check{{Rule: "tenant", Values: vals, Part: i, Parts: spread}}})[0]
			if m, _, err := c.MasterOf(key); err == nil {
				perMaster[slices.Index(masters, m)]++
			}
		}
		w := b.w
		w.keys = 1
		cpu0 := cpuOf()
		next := 0
		o := run(w, func() decideFunc {
			attrs := map[string]string{"tenant": "acme"}
			lim := lims[next%instances]
			next++
			return func(ctx context.Context, _ int) (bool, error) {
				d, err := lim.Allow(ctx, p, attrs)
				return d.Allowed, err
			}
		}, progress(fmt.Sprintf("hot tenant, spread %d", spread)))
		doneProgress()
		cpu1 := cpuOf()
		for _, st := range stores {
			st.Close()
		}
		if o.errors > 0 {
			fmt.Fprintf(os.Stderr, "bench: hot key, spread %d: %d errors, first: %v\n", spread, o.errors, o.firstErr)
		}
		hottest := 0.0
		for i := range masters {
			hottest = max(hottest, (cpu1[i]-cpu0[i])*1e6/float64(max(1, o.ops)))
		}
		ceiling := 1e6 / hottest
		if spread == 1 {
			baseCeiling = ceiling
		}
		fmt.Printf("| %d | %.0f | %s | %v | %.2f | %.0f | %.2f× |\n", spread, o.perSecond(), fmtDur(o.p99), perMaster, hottest, ceiling, ceiling/baseCeiling)
	}
	fmt.Println()
}
