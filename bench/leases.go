package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/sluicerate/sluice"
)

// The leases section: a lease taken and ended (two script calls, lease.lua
// and finish.lua) beside a decision of a rate rule alone (one, decide.lua),
// on the same keys: operations/s, p99 of one operation, and Redis CPU per
// operation. A lease's operation is its acquire and its release (or
// settle).

// leasePolicy is a policy per key of the rate rule (perKeyLimit per
// window), the concurrency rule (8 at once), or both.
func leasePolicy(rate, concurrency bool) *sluice.Policy {
	p := &sluice.Policy{Name: "lease"}
	if rate {
		p.Rules = append(p.Rules, sluice.Rule{Name: "rate", By: []string{"key"}, Limit: perKeyLimit, Window: window})
	}
	if concurrency {
		p.Rules = append(p.Rules, sluice.Rule{Name: "in-flight", By: []string{"key"}, Concurrency: 8, Lease: time.Minute})
	}
	return p
}

// openLease is a contender that acquires a lease of p on each key and
// releases it at once, or settles it at 2 when settle is set.
func openLease(p *sluice.Policy, settle bool) func(addr string, names []string) (*instance, error) {
	return openSluiceOp(p, benchLimiterConfig, func(ctx context.Context, lim *sluice.Limiter, attrs map[string]string) (bool, error) {
		x, d, err := lim.Acquire(ctx, p, attrs, 1)
		if err != nil || !d.Allowed {
			return false, err
		}
		if settle {
			_, err = x.Settle(ctx, 2)
		} else {
			_, err = x.Release(ctx)
		}
		return true, err
	})
}

// leaseRows are the section's rows: a decision, then leases.
func leaseRows() []contender {
	return []contender{
		{name: "decide: a rate rule (log)", open: openSluice(leasePolicy(true, false), benchLimiterConfig)},
		{name: "acquire + release: a concurrency rule (8 at once)", open: openLease(leasePolicy(false, true), false)},
		{name: "acquire + release: rate and concurrency", open: openLease(leasePolicy(true, true), false)},
		{name: "acquire + settle: rate and concurrency", open: openLease(leasePolicy(true, true), true)},
	}
}

func (b *bench) leasesTable(rounds int) {
	w := b.w
	fmt.Printf("### Leases (sluice, Redis, %d goroutines, %d keys, %v each, median of %d rounds)\n\n", w.goroutines, w.keys, w.duration, rounds)
	fmt.Println("| operation | operations/s | p99 | Redis CPU µs/operation |")
	fmt.Println("|---|---:|---:|---:|")
	for _, c := range leaseRows() {
		var got []redisRow
		for range rounds {
			row, err := b.measure(c, w)
			if err != nil {
				fmt.Fprintln(os.Stderr, "bench:", err)
				return
			}
			if row.o.errors > 0 {
				fmt.Fprintf(os.Stderr, "bench: %s: %d errors, the first: %v\n", c.name, row.o.errors, row.o.firstErr)
			}
			got = append(got, row)
		}
		m := medianBy(got, func(r redisRow) float64 { return r.o.perSecond() })
		fmt.Printf("| %s | %.0f | %s | %.1f |\n", c.name, m.o.perSecond(), fmtDur(m.o.p99), m.redisCPU)
	}
	fmt.Println()
}
