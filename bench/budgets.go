package main

// The budgets section: what leasing slices of a budgeted rule (Rule.Budget,
// docs/budgets.md) buys against deciding every request in Redis. Three
// tables: one hot key on the bench's standalone Redis, per request and
// with a budget; the notifier's hierarchy (a global cap over a
// per-category cap) on a 3-master Cluster, with and without a budget on the
// global cap; and four Limiters, standing for four processes, whose demand
// is above the limit: what they admit per window, as a share of the limit.

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/redistest"
	"github.com/sluicerate/sluice/redisstore"
)

// hotBudget is the budget of the hot key's and the notifier's budgeted
// rows.
const hotBudget = time.Second

// budgetsTable runs the budgets section, each table's rows taking turns
// for rounds rounds.
func (b *bench) budgetsTable(rounds int) {
	b.budgetHotKey(rounds)
	b.budgetNotifier(rounds)
	b.budgetShare()
}

// budgetRow is one row's round: its outcome, the script calls and all
// Redis commands per decision.
type budgetRow struct {
	o               outcome
	calls, commands float64
}

// budgetHotKey runs one hot key (10,000,000 a minute) from the workload's
// goroutines over the bench's standalone Redis, per request and with a
// budget.
func (b *bench) budgetHotKey(rounds int) {
	policy := func(budget time.Duration) *sluice.Policy {
		return &sluice.Policy{Name: "hot", Rules: []sluice.Rule{{Name: "cap", Limit: 10_000_000, Window: time.Minute, Budget: budget}}}
	}
	rows := []struct {
		name   string
		budget time.Duration
	}{{"per request", 0}, {fmt.Sprintf("budget %v", hotBudget), hotBudget}}
	all := make([][]budgetRow, len(rows))
	for r := range rounds {
		for i, x := range rows {
			s, err := redisstore.New(redisstore.Config{Addrs: []string{b.addr}, Prefix: fmt.Sprintf("bh%d-%d", i, r)})
			if err != nil {
				fmt.Fprintln(os.Stderr, "bench: budgets:", err)
				return
			}
			_ = s.Warm(context.Background())
			lim := sluice.NewLimiter(s, benchLimiterConfig)
			p := policy(x.budget)
			calls0, cmds0 := b.scriptCalls(nil), b.commands(nil)
			o := run(b.w, func() decideFunc {
				return func(ctx context.Context, _ int) (bool, error) {
					d, err := lim.Allow(ctx, p, nil)
					return d.Allowed, err
				}
			}, progress("budgets: hot key, "+x.name))
			doneProgress()
			_ = lim.Close()
			calls1, cmds1 := b.scriptCalls(nil), b.commands(nil)
			s.Close()
			if o.errors > 0 {
				fmt.Fprintf(os.Stderr, "bench: budgets, hot key %s: %d errors, first: %v\n", x.name, o.errors, o.firstErr)
			}
			n := float64(max(1, o.ops))
			all[i] = append(all[i], budgetRow{o: o, calls: (calls1 - calls0) / n, commands: (cmds1 - cmds0) / n})
		}
	}
	fmt.Printf("### Budgets: one hot key, per request and with a budget (limit 10,000,000 a minute, %d goroutines in one process, standalone Redis; median of %d rounds of %v)\n\n",
		b.w.goroutines, rounds, b.w.duration)
	b.printBudgetRows(all, []string{rows[0].name, rows[1].name})
}

// budgetNotifier runs the notifier's hierarchy over the workload's keys
// (categories) on a 3-master Cluster, keys by rule (SlotsPerRule), every
// master held to clusterShare of a core, with and without a budget on the
// global cap.
func (b *bench) budgetNotifier(rounds int) {
	c, err := redistest.StartClusterMain()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: budgets: cluster:", err)
		return
	}
	defer c.Stop()
	policy := func(budget time.Duration) *sluice.Policy {
		return &sluice.Policy{Name: "notify", Rules: []sluice.Rule{
			{Name: "global", Limit: 1 << 40, Window: window, Budget: budget},
			{Name: "category", Limit: perKeyLimit, Window: window, By: []string{"key"}},
		}}
	}
	rows := []struct {
		name   string
		budget time.Duration
	}{{"no budget", 0}, {fmt.Sprintf("global budget %v", hotBudget), hotBudget}}
	all := make([][]budgetRow, len(rows))
	capped := true
	for r := range rounds {
		for i, x := range rows {
			s, err := redisstore.New(redisstore.Config{Mode: redisstore.Cluster, Addrs: c.Addrs(), Slots: redisstore.SlotsPerRule,
				Prefix: fmt.Sprintf("bn%d-%d", i, r)})
			if err != nil {
				fmt.Fprintln(os.Stderr, "bench: budgets: cluster:", err)
				return
			}
			_ = s.Warm(context.Background())
			lim := sluice.NewLimiter(s, benchLimiterConfig)
			var caps []*cpuCap
			for j, m := range c.Masters() {
				cc, err := capCPU(cgroupName("budgets", fmt.Sprint(i), fmt.Sprint(j)), clusterShare, m.Pid())
				if err != nil {
					capped = false
					break
				}
				caps = append(caps, cc)
			}
			calls0, cmds0 := b.scriptCalls(c.Masters()), b.commands(c.Masters())
			o := runOutcome(b.w, lim, policy(x.budget), keyNames(b.w.keys), "budgets: notifier, "+x.name)
			_ = lim.Close()
			calls1, cmds1 := b.scriptCalls(c.Masters()), b.commands(c.Masters())
			for _, cc := range caps {
				cc.release()
			}
			s.Close()
			if o.errors > 0 {
				fmt.Fprintf(os.Stderr, "bench: budgets, notifier %s: %d errors, first: %v\n", x.name, o.errors, o.firstErr)
			}
			n := float64(max(1, o.ops))
			all[i] = append(all[i], budgetRow{o: o, calls: (calls1 - calls0) / n, commands: (cmds1 - cmds0) / n})
		}
	}
	held := fmt.Sprintf("every master held to %.0f%% of a core", clusterShare*100)
	if !capped {
		held = "the masters' CPU not capped (no cgroup)"
	}
	fmt.Printf("### Budgets: the notifier's hierarchy on a 3-master Cluster (global cap over per-category caps, keys by rule; %d goroutines in one process, %d categories, %s; median of %d rounds of %v)\n\n",
		b.w.goroutines, b.w.keys, held, rounds, b.w.duration)
	b.printBudgetRows(all, []string{rows[0].name, rows[1].name})
}

// printBudgetRows prints the rows' medians against the first row.
func (b *bench) printBudgetRows(all [][]budgetRow, names []string) {
	fmt.Println("| row | decisions/s | × the first | p50 | p99 | script calls/decision | Redis commands/decision |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|")
	var base float64
	for i, name := range names {
		m := medianBy(all[i], func(r budgetRow) float64 { return r.o.perSecond() })
		if i == 0 {
			base = m.o.perSecond()
		}
		fmt.Printf("| %s | %.0f | %.1f× | %s | %s | %.4f | %.4f |\n", name, m.o.perSecond(), m.o.perSecond()/base,
			fmtDur(m.o.p50), fmtDur(m.o.p99), m.calls, m.commands)
	}
	fmt.Println()
	for i, name := range names {
		printRounds(name, all[i], func(r budgetRow) outcome { return r.o })
	}
	fmt.Println()
}

// commands returns the commands the servers ran so far, every command
// counted (INFO commandstats, which counts those a script calls too), or
// the bench's own server's when servers is nil.
func (b *bench) commands(servers []*redistest.Server) float64 {
	n := 0.0
	for _, info := range b.infos(servers, "commandstats") {
		for _, line := range strings.Split(info, "\n") {
			_, fields, ok := strings.Cut(strings.TrimSpace(line), ":calls=")
			if !ok {
				continue
			}
			var v float64
			fmt.Sscanf(strings.Split(fields, ",")[0], "%g", &v)
			n += v
		}
	}
	return n
}

// The share table's figures: four Limiters with shareGoroutines
// goroutines each, on a log of shareLimit per shareWindow leased for
// shareBudget, for shareWindows windows.
const (
	shareLimiters   = 4
	shareGoroutines = 8
	shareLimit      = 4_000
	shareWindow     = time.Second
	shareBudget     = 100 * time.Millisecond
	shareWindows    = 6
)

// budgetShare runs four Limiters, standing for four processes, on one
// budgeted log over the bench's standalone Redis, each asking without
// pause (demand far above the limit), and counts what they admit in each
// window of the run, as a share of the limit; the first window, while the
// slices' sizes settle, is reported apart.
func (b *bench) budgetShare() {
	p := &sluice.Policy{Name: "share", Rules: []sluice.Rule{{Name: "cap", Limit: shareLimit, Window: shareWindow, Budget: shareBudget}}}
	var lims []*sluice.Limiter
	for range shareLimiters {
		s, err := redisstore.New(redisstore.Config{Addrs: []string{b.addr}, Prefix: "bs"})
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: budgets:", err)
			return
		}
		defer s.Close()
		_ = s.Warm(context.Background())
		lims = append(lims, sluice.NewLimiter(s, benchLimiterConfig))
	}
	var admitted [shareWindows]atomic.Int64
	var decisions, errs atomic.Int64
	start := time.Now()
	end := start.Add(shareWindows * shareWindow)
	var wg sync.WaitGroup
	for _, lim := range lims {
		for range shareGoroutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					d, err := lim.Allow(context.Background(), p, nil)
					at := time.Since(start)
					if at >= end.Sub(start) {
						return
					}
					decisions.Add(1)
					if err != nil {
						errs.Add(1)
						continue
					}
					if d.Allowed {
						admitted[int(at/shareWindow)].Add(1)
					}
				}
			}()
		}
	}
	wg.Wait()
	for _, lim := range lims {
		_ = lim.Close()
	}
	if n := errs.Load(); n > 0 {
		fmt.Fprintf(os.Stderr, "bench: budgets, share: %d errors\n", n)
	}
	var shares []float64
	for w := 1; w < shareWindows; w++ {
		shares = append(shares, float64(admitted[w].Load())/shareLimit)
	}
	sorted := append([]float64(nil), shares...)
	sort.Float64s(sorted)
	fmt.Printf("### Budgets: %d Limiters (standing for %d processes, %d goroutines each) on one log of %d per %v, budget %v, demand above the limit (%d decisions in %d windows: %.1f× the limit)\n\n",
		shareLimiters, shareLimiters, shareGoroutines, shareLimit, shareWindow, shareBudget, decisions.Load(), shareWindows,
		float64(decisions.Load())/(shareWindows*shareLimit))
	fmt.Println("| figure | admitted per window ÷ limit |")
	fmt.Println("|---|---:|")
	fmt.Printf("| first window (slices settling) | %.1f%% |\n", 100*float64(admitted[0].Load())/shareLimit)
	fmt.Printf("| lowest of windows 2–%d | %.1f%% |\n", shareWindows, 100*sorted[0])
	fmt.Printf("| median of windows 2–%d | %.1f%% |\n", shareWindows, 100*sorted[len(sorted)/2])
	fmt.Printf("| highest of windows 2–%d | %.1f%% |\n", shareWindows, 100*sorted[len(sorted)-1])
	fmt.Println()
	var each []string
	for _, s := range shares {
		each = append(each, fmt.Sprintf("%.1f%%", 100*s))
	}
	fmt.Printf("Windows 2–%d in turn: %s.\n\n", shareWindows, strings.Join(each, ", "))
}
