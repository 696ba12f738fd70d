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
	"github.com/sluicerate/sluice/internal/resolve"
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
				req, err := resolve.Request(p, map[string]string{"key": names[i]}, 1)
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
	b.quotaMemory()
}

// hotKeyTable measures one tenant that takes all the traffic on a 3-master
// Redis Cluster the bench starts: its window as one key (spread 1) and
// spread over 2, 3 and 6 sub-windows, every decision an admission; on the
// shared cores, and with every master held to hotKeyShare of a core by a
// cgroup, so that the hottest master is the bound. The spreads take turns
// for rounds rounds, and each figure is its median round.
func (b *bench) hotKeyTable(rounds int) {
	c, err := redistest.StartClusterMain()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: hot key:", err)
		return
	}
	defer c.Stop()
	const instances = 32
	masters := c.Masters()
	spreads := []int{1, 2, 3, 6}
	type row struct {
		shared, capped outcome
		hottest        float64 // the hottest master's Redis CPU µs per decision, shared cores
	}
	rows := make([][]row, len(spreads))
	placement := make([][]int, len(spreads))
	capFailed := false
	for r := range rounds {
		for i, spread := range spreads {
			h := hotTenant{c: c, masters: masters, spread: spread, instances: instances, round: r}
			if placement[i], err = h.placement(); err != nil {
				fmt.Fprintln(os.Stderr, "bench: hot key:", err)
				return
			}
			var x row
			x.shared, x.hottest = h.run(b.w, "")
			if !capFailed {
				release, err := capMasters(masters, hotKeyShare)
				if err != nil {
					fmt.Fprintln(os.Stderr, "bench: hot key: capping the masters' CPU:", err)
					capFailed = true
				} else {
					x.capped, _ = h.run(b.w, "capped")
					release()
				}
			}
			rows[i] = append(rows[i], x)
		}
	}
	fmt.Printf("### One hot tenant on a 3-master Redis Cluster (%d goroutines as %d application instances, every decision admitted; median of %d rounds of %v)\n\n",
		b.w.goroutines, instances, rounds, b.w.duration)
	fmt.Println("The masters, their replicas and the benchmark share this machine's cores, so the first decisions/s")
	fmt.Println("measures them together. What bounds a tenant when every master has a core of its own is its hottest")
	fmt.Println("master: its Redis CPU per decision, the decisions/s that CPU allows (10^6 / µs per decision), and the")
	fmt.Printf("decisions/s measured with every master held to %.0f%% of a core by a cgroup CPU quota.\n\n", hotKeyShare*100)
	fmt.Printf("| spread | sub-windows per master | decisions/s (shared cores) | p99 | hottest master's Redis CPU µs/decision | its ceiling, decisions/s | ceiling ÷ spread 1 | decisions/s, masters at %.0f%% of a core | p99 | ÷ spread 1 |\n", hotKeyShare*100)
	fmt.Println("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
	var baseCeiling, baseCapped float64
	for i, spread := range spreads {
		shared := medianBy(rows[i], func(x row) float64 { return x.shared.perSecond() })
		capped := medianBy(rows[i], func(x row) float64 { return x.capped.perSecond() })
		ceiling := 1e6 / shared.hottest
		if spread == 1 {
			baseCeiling, baseCapped = ceiling, capped.capped.perSecond()
		}
		cappedCols := "– | – | –"
		if capped.capped.ops > 0 {
			cappedCols = fmt.Sprintf("%.0f | %s | %.2f×", capped.capped.perSecond(), fmtDur(capped.capped.p99), capped.capped.perSecond()/baseCapped)
		}
		fmt.Printf("| %d | %v | %.0f | %s | %.2f | %.0f | %.2f× | %s |\n", spread, placement[i], shared.shared.perSecond(), fmtDur(shared.shared.p99),
			shared.hottest, ceiling, ceiling/baseCeiling, cappedCols)
	}
	fmt.Println()
	for i, spread := range spreads {
		var sh, cp []string
		for _, x := range rows[i] {
			sh = append(sh, fmt.Sprintf("%.0f", x.shared.perSecond()))
			cp = append(cp, fmt.Sprintf("%.0f", x.capped.perSecond()))
		}
		fmt.Printf("- spread %d: shared cores %s decisions/s; masters capped %s decisions/s\n", spread, strings.Join(sh, ", "), strings.Join(cp, ", "))
	}
	fmt.Println()
}

// capMasters holds each master to share of a core in a cgroup of its own
// and returns the function that lets them go.
func capMasters(masters []*redistest.Server, share float64) (release func(), err error) {
	var caps []*cpuCap
	release = func() {
		for _, cc := range caps {
			cc.release()
		}
	}
	for i, m := range masters {
		cc, err := capCPU(cgroupName("master", strconv.Itoa(i)), share, m.Pid())
		if err != nil {
			release()
			return nil, err
		}
		caps = append(caps, cc)
	}
	return release, nil
}

// hotKeyShare is the share of a core each master may use in the hot-key
// section's capped runs: small enough that the hottest master, not the
// benchmark's clients on the cores left, bounds a tenant spread over 6.
const hotKeyShare = 0.1

// hotTenant is one tenant's policy on a Cluster, spread over spread
// sub-windows and decided by instances application instances.
type hotTenant struct {
	c         *redistest.Cluster
	masters   []*redistest.Server
	spread    int
	instances int
	round     int // keys of a round of their own
}

func (h hotTenant) policy() *sluice.Policy {
	p := &sluice.Policy{Name: "hot", Rules: []sluice.Rule{
		{Name: "tenant", By: []string{"tenant"}, Limit: 1 << 40, Window: time.Minute, Spread: h.spread},
	}}
	if h.spread == 1 {
		p.Rules[0].Spread = 0
	}
	return p
}

// placement counts the tenant's sub-windows on each master.
func (h hotTenant) placement() ([]int, error) {
	s, err := redisstore.New(redisstore.Config{Mode: redisstore.Cluster, Addrs: h.c.Addrs(), Prefix: "hot"})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	perMaster := make([]int, len(h.masters))
	for i := range h.spread {
		vals := []string{"acme"}
		if h.spread > 1 {
			vals = append(vals, strconv.Itoa(i))
		}
		key := s.Keys(&store.Request{Policy: "hot", Checks: []store.Check{{Rule: "tenant", Values: vals, Part: i, Parts: h.spread}}})[0]
		if m, _, err := h.c.MasterOf(key); err == nil {
			perMaster[slices.Index(h.masters, m)]++
		}
	}
	return perMaster, nil
}

// run decides the tenant for the workload's duration and returns the
// outcome and the hottest master's Redis CPU per decision in µs.
func (h hotTenant) run(w workload, label string) (outcome, float64) {
	p := h.policy()
	// Each goroutine pair is an application instance of its own: a client
	// and batchers of its own, as a fleet of services has.
	lims := make([]*sluice.Limiter, h.instances)
	for i := range lims {
		st, err := redisstore.New(redisstore.Config{Mode: redisstore.Cluster, Addrs: h.c.Addrs(), Prefix: fmt.Sprintf("hot%d-%d%s", h.spread, h.round, label)})
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: hot key:", err)
			return outcome{}, 0
		}
		defer st.Close()
		lims[i] = sluice.NewLimiter(st, benchLimiterConfig)
	}
	w.keys = 1
	cpu0 := mastersCPU(h.masters)
	next := 0
	o := run(w, func() decideFunc {
		attrs := map[string]string{"tenant": "acme"}
		lim := lims[next%h.instances]
		next++
		return func(ctx context.Context, _ int) (bool, error) {
			d, err := lim.Allow(ctx, p, attrs)
			return d.Allowed, err
		}
	}, progress(strings.TrimSpace(fmt.Sprintf("hot tenant, spread %d %s", h.spread, label))))
	doneProgress()
	cpu1 := mastersCPU(h.masters)
	if o.errors > 0 {
		fmt.Fprintf(os.Stderr, "bench: hot key, spread %d %s: %d errors, first: %v\n", h.spread, label, o.errors, o.firstErr)
	}
	hottest := 0.0
	for i := range h.masters {
		hottest = max(hottest, (cpu1[i]-cpu0[i])*1e6/float64(max(1, o.ops)))
	}
	return o, hottest
}

// mastersCPU is each master's CPU time in seconds (INFO cpu).
func mastersCPU(masters []*redistest.Server) []float64 {
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
