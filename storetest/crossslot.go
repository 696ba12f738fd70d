package storetest

import (
	"fmt"
	"sync"
	"time"

	"github.com/sluicerate/sluice"
)

// Cross-slot cases: policies whose rules go by different attributes, so that
// a Redis Cluster store keeps their windows in different slots and decides
// them group by group (reserve, then roll back when a later group denies).
// Every store must decide them exactly as one atomic decision would.

// globalPerUser is a global cap over a per-user cap.
func globalPerUser(global, perUser int64) *sluice.Policy {
	return &sluice.Policy{Name: "api", Rules: []sluice.Rule{
		{Name: "global", Limit: global, Window: time.Minute},
		{Name: "per-user", Limit: perUser, Window: time.Minute, By: []string{"user"}},
	}}
}

func user(u string) map[string]string { return map[string]string{"user": u} }

var crossSlotCases = []testCase{
	{"CrossSlotDenialRollsBack", func(e *env) {
		// Global 5 over per-user 2: a user's third request is denied by its
		// own cap; the fifth admitted fills the global cap, and the next
		// request, which fits its user's cap, is denied by global and leaves
		// no trace in its user's window.
		p := globalPerUser(5, 2)
		e.expect("a#1", e.allow(p, user("a"), 1), allowed(1))
		e.expect("a#2", e.allow(p, user("a"), 1), allowed(0))
		d := e.allow(p, user("a"), 1)
		e.expect("a#3", d, denied("per-user", 0, time.Minute))
		e.expectUsed("a#3", d, 2, 2)
		e.clock.Advance(time.Second)
		e.expect("b#1", e.allow(p, user("b"), 1), allowed(1))
		e.expect("b#2", e.allow(p, user("b"), 1), allowed(0))
		e.clock.Advance(time.Second)
		e.expect("c#1", e.allow(p, user("c"), 1), allowed(0))
		d = e.allow(p, user("c"), 1)
		e.expect("c#2", d, denied("global", 0, 58*time.Second))
		e.expectUsed("c#2", d, 5, 1)
		if s := d.Limits()[1]; !s.Fits || s.ResetAfter != time.Minute {
			e.t.Errorf("c#2 per-user status %+v, want fitting with ResetAfter 1m (its entry's)", s)
		}
		e.expectUsed("peek c", e.peek(p, user("c"), 1), 5, 1)
		e.expectUsed("peek d", e.peek(p, user("d"), 1), 5, 0)
		// The first two entries leave at T0+1m: two more fit.
		e.clock.Set(T0.Add(time.Minute))
		e.expect("c#3", e.allow(p, user("c"), 1), allowed(0))
		e.expectUsed("d#1", e.allow(p, user("d"), 1), 5, 1)
	}},

	{"CrossSlotBothDeny", func(e *env) {
		// A request over its user's cap and the global cap reports both,
		// the first in policy order as DeniedBy.
		p := globalPerUser(2, 2)
		e.allow(p, user("a"), 1)
		e.allow(p, user("a"), 1)
		d := e.allow(p, user("a"), 1)
		e.expect("a#3", d, denied("global", 0, time.Minute))
		if d.Limits()[1].Fits {
			e.t.Errorf("per-user status %+v, want not fitting", d.Limits()[1])
		}
	}},

	{"CrossSlotRollbackRestoresGap", func(e *env) {
		// A per-user minimum gap over a global cap: a request denied by
		// global must not start its user's gap.
		p := &sluice.Policy{Name: "push", Rules: []sluice.Rule{
			{Name: "global", Limit: 1, Window: time.Minute},
			{Name: "per-user", Limit: 10, Window: time.Minute, MinGap: time.Second, By: []string{"user"}},
		}}
		e.expect("a", e.allow(p, user("a"), 1), allowed(0))
		e.clock.Advance(2 * time.Second)
		e.expect("b", e.allow(p, user("b"), 1), denied("global", 0, 58*time.Second))
		e.clock.Set(T0.Add(time.Minute))
		e.expect("b after the window", e.allow(p, user("b"), 1), allowed(0))
	}},

	{"CrossSlotThreeGroups", func(e *env) {
		// Global, per-tenant and per-user (tenant, user): three groups.
		p := &sluice.Policy{Name: "tiers", Rules: []sluice.Rule{
			{Name: "global", Limit: 4, Window: time.Minute},
			{Name: "tenant", Limit: 3, Window: time.Minute, By: []string{"tenant"}},
			{Name: "user", Limit: 2, Window: time.Minute, By: []string{"tenant", "user"}},
		}}
		at := func(t, u string) map[string]string { return map[string]string{"tenant": t, "user": u} }
		e.expect("t1/u1#1", e.allow(p, at("t1", "u1"), 1), allowed(1))
		e.expect("t1/u1#2", e.allow(p, at("t1", "u1"), 1), allowed(0))
		e.expect("t1/u1#3", e.allow(p, at("t1", "u1"), 1), denied("user", 0, time.Minute))
		e.expect("t1/u2#1", e.allow(p, at("t1", "u2"), 1), allowed(0))
		d := e.allow(p, at("t1", "u2"), 1)
		e.expect("t1/u2#2", d, denied("tenant", 0, time.Minute))
		e.expectUsed("t1/u2#2", d, 3, 3, 1)
		e.expect("t2/u1#1", e.allow(p, at("t2", "u1"), 1), allowed(0))
		d = e.allow(p, at("t2", "u1"), 1)
		e.expect("t2/u1#2", d, denied("global", 0, time.Minute))
		e.expectUsed("t2/u1#2", d, 4, 1, 1)
	}},

	{"CrossSlotPeekAndRecord", func(e *env) {
		p := globalPerUser(3, 2)
		e.expectUsed("peek", e.peek(p, user("a"), 1), 1, 1) // the peeked request alone
		d := e.record(p, user("a"), 2)
		e.expectUsed("record 2", d, 2, 2)
		d = e.record(p, user("a"), 2)
		if d.Allowed {
			e.t.Error("record over both limits reported as fitting")
		}
		e.expectUsed("record 2 more", d, 4, 4)
		e.expectUsed("peek b", e.peek(p, user("b"), 1), 4, 0)
	}},

	{"CrossSlotConcurrentExact", freesRoom(func(e *env) {
		// 16 goroutines over 40 users: exactly the global cap is admitted,
		// and no user gets more than its own.
		p := e.policy(globalPerUser(50, 3))
		var (
			mu      sync.Mutex
			wg      sync.WaitGroup
			perUser = map[string]int{}
			total   int
		)
		for g := range 16 {
			wg.Go(func() {
				for i := range 20 {
					u := fmt.Sprintf("u%d", (g*20+i)%40)
					d, err := e.lim.Allow(e.ctx, p, user(u))
					if err != nil {
						e.t.Error(err)
						return
					}
					if d.Allowed {
						mu.Lock()
						perUser[u]++
						total++
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		e.expectAdmitted("under the global cap", total, 50)
		for u, n := range perUser {
			if n > 3 {
				e.t.Errorf("user %s admitted %d, limit 3", u, n)
			}
		}
	})},
}
