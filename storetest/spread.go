package storetest

import (
	"time"

	"github.com/sluicerate/sluice"
)

// Hot-key cases: a spread rule's window is several sub-windows, each with
// its share of the limit; a request falls over from a full one to the next.

var spreadCases = []testCase{
	{"SpreadFallsOver", func(e *env) {
		// 6 a minute over 3 sub-windows of 2. One client's requests start
		// at the sub-window its id hashes to, whichever that is: 2 at T0
		// fill it, 4 at 10s fill the other two, each after a denial by the
		// full ones before it, which records nothing.
		p := &sluice.Policy{Name: "hot", Rules: []sluice.Rule{
			{Name: "tenant", By: []string{"tenant"}, Limit: 6, Window: time.Minute, Spread: 3, SpreadBy: "client"},
		}}
		a := map[string]string{"tenant": "acme", "client": "c1"}
		for i := range 2 {
			d := e.allow(p, a, 1)
			e.expect("T0", d, allowed(int64(1-i)))
			if d.Limits()[0].Limit != 2 {
				e.t.Errorf("sub-window limit %d, want the share 2", d.Limits()[0].Limit)
			}
		}
		e.clock.Advance(10 * time.Second)
		for i := range 4 {
			e.expect("10s", e.allow(p, a, 1), allowed(int64(1-i%2)))
		}
		// Full: the soonest sub-window to have room is the one filled at T0.
		e.expect("seventh", e.allow(p, a, 1), denied("tenant", 0, 50*time.Second))
		e.expect("peek", e.peek(p, a, 1), denied("tenant", 0, 50*time.Second))
		// Another client of the tenant is denied alike: the tenant is full.
		e.expect("other client", e.allow(p, map[string]string{"tenant": "acme", "client": "c2"}, 1), denied("tenant", 0, 50*time.Second))
		// Another tenant has windows of its own.
		e.expect("other tenant", e.allow(p, map[string]string{"tenant": "globex", "client": "c1"}, 1), allowed(1))
		// At 60s the first sub-window's two leave: two fit, then the others'
		// leave at 70s.
		e.clock.Set(T0.Add(time.Minute))
		e.expect("60s", e.allow(p, a, 1), allowed(1))
		e.expect("60s", e.allow(p, a, 1), allowed(0))
		e.expect("60s full", e.allow(p, a, 1), denied("tenant", 0, 10*time.Second))
	}},

	{"SpreadWithoutSpreadBy", func(e *env) {
		// Without spread_by each request starts at a random sub-window; the
		// whole limit is admitted whatever the order, and no more.
		p := &sluice.Policy{Name: "hot-random", Rules: []sluice.Rule{
			{Name: "tenant", By: []string{"tenant"}, Limit: 10, Window: time.Minute, Spread: 4},
			{Name: "global", Limit: 1000, Window: time.Minute},
		}}
		a := map[string]string{"tenant": "acme"}
		for i := range 10 {
			if d := e.allow(p, a, 1); !d.Allowed {
				e.t.Fatalf("request %d of 10 denied: %+v", i+1, d)
			}
		}
		d := e.allow(p, a, 1)
		e.expect("eleventh", d, denied("tenant", 0, time.Minute))
		// A denial records nothing in any rule: the global cap counts 10.
		if d.Limits()[1].Used != 10 {
			e.t.Errorf("global used %d after 10 admissions and a denial, want 10", d.Limits()[1].Used)
		}
		// The sub-windows' shares are 3, 3, 2, 2; a cost of 3 does not fit
		// the smallest, and is refused before any store call.
		if _, err := e.lim.AllowN(e.ctx, p, a, 3); err == nil {
			e.t.Error("cost 3 over shares of 2: no error")
		}
	}},

	{"SpreadGCRA", func(e *env) {
		// GCRA spread over 2: each sub-window refills at 5 a second with a
		// burst of 2 (the whole: 10 a second, burst 4).
		p := &sluice.Policy{Name: "hot-gcra", Rules: []sluice.Rule{
			{Name: "tenant", Limit: 10, Window: time.Second, Algorithm: sluice.GCRA, Burst: 4, Spread: 2, SpreadBy: "client"},
		}}
		a := map[string]string{"client": "c1"}
		for i := range 4 {
			if d := e.allow(p, a, 1); !d.Allowed {
				e.t.Fatalf("request %d of the burst of 4 denied: %+v", i+1, d)
			}
		}
		// Each sub-window's bucket frees a unit every 200ms.
		e.expect("fifth", e.allow(p, a, 1), denied("tenant", 0, 200*time.Millisecond))
	}},
}
