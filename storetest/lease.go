package storetest

import (
	"encoding/base64"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/resolve"
	"github.com/sluicerate/sluice/store"
)

// Lease cases: concurrency rules and costs settled after the fact
// (store.Leaser), on stores that keep leases; the others skip them. Every
// figure is exact on the manual clock.

// leased wraps a lease case: it skips stores that keep no leases.
func leased(run func(e *env)) func(e *env) {
	return func(e *env) {
		if _, ok := e.target.Store.(store.Leaser); !ok {
			e.t.Skipf("store %T keeps no leases", e.target.Store)
		}
		run(e)
	}
}

// acquire takes a lease of cost units and fails the case on error; the
// lease is nil when the decision is a denial.
func (e *env) acquire(p *sluice.Policy, attrs map[string]string, cost int64) (*sluice.Lease, sluice.Decision) {
	e.t.Helper()
	x, d, err := e.lim.Acquire(e.ctx, e.policy(p), attrs, cost)
	if err != nil {
		e.t.Fatalf("Acquire(%s, %v, %d) at T0+%v: %v", p.Name, attrs, cost, e.elapsed(), err)
	}
	if d.Allowed != (x != nil) {
		e.t.Fatalf("Acquire(%s, %v, %d) at T0+%v: allowed %v with lease %v", p.Name, attrs, cost, e.elapsed(), d.Allowed, x)
	}
	return x, d
}

// end releases x (settles it at cost, when cost >= 0) and checks whether
// it was held.
func (e *env) end(what string, x *sluice.Lease, cost int64, held bool) {
	e.t.Helper()
	var got bool
	var err error
	if cost >= 0 {
		got, err = x.Settle(e.ctx, cost)
	} else {
		got, err = x.Release(e.ctx)
	}
	if err != nil {
		e.t.Fatalf("%s at T0+%v: %v", what, e.elapsed(), err)
	}
	if got != held {
		e.t.Errorf("%s at T0+%v: held %v, want %v", what, e.elapsed(), got, held)
	}
}

// release is end without a settle.
const release = -1

// inFlight is a policy of at most n leases per user, each living lease.
func inFlight(name string, n int64, lease time.Duration) *sluice.Policy {
	return &sluice.Policy{Name: name, Rules: []sluice.Rule{
		{Name: "in-flight", By: []string{"user"}, Concurrency: n, Lease: lease},
	}}
}

// settled is a policy of the rate rule rate, per user, beside a
// concurrency rule, for the settle cases.
func settled(name string, rate sluice.Rule) *sluice.Policy {
	rate.Name, rate.By = "rate", []string{"user"}
	return &sluice.Policy{Name: name, Rules: []sluice.Rule{
		rate,
		{Name: "in-flight", By: []string{"user"}, Concurrency: 4, Lease: 10 * time.Minute},
	}}
}

// rateOnly is a policy of the rate rule rate alone, per user: its leases
// hold no slot and live as long as its window, for settling.
func rateOnly(name string, rate sluice.Rule) *sluice.Policy {
	rate.Name, rate.By = "rate", []string{"user"}
	return &sluice.Policy{Name: name, Rules: []sluice.Rule{rate}}
}

// expectReset checks each rule's ResetAfter, in policy order.
func (e *env) expectReset(what string, d sluice.Decision, reset ...time.Duration) {
	e.t.Helper()
	if len(d.Limits()) != len(reset) {
		e.t.Fatalf("%s: got %d limit statuses, want %d", what, len(d.Limits()), len(reset))
	}
	for i, r := range reset {
		if got := d.Limits()[i].ResetAfter; got != r {
			e.t.Errorf("%s at T0+%v: rule %q resets after %v, want %v", what, e.elapsed(), d.Limits()[i].Rule, got, r)
		}
	}
}

var leaseCases = []testCase{
	{"LeaseConcurrency", leased(func(e *env) {
		p := inFlight("leases", 2, 10*time.Second)
		a, d := e.acquire(p, user("ann"), 1)
		e.expect("first", d, outcome{Allowed: true, Remaining: 1, ResetAfter: 10 * time.Second})
		if a.ID() == "" || !a.Expires().Equal(T0.Add(10*time.Second)) {
			e.t.Errorf("first: id %q expires %v, want an id and T0+10s", a.ID(), a.Expires())
		}
		e.clock.Advance(time.Second)
		b, d := e.acquire(p, user("ann"), 5) // a lease takes one slot, whatever its cost
		e.expect("second", d, allowed(0))
		if a.ID() == b.ID() {
			e.t.Errorf("two leases share id %q", a.ID())
		}
		e.clock.Advance(time.Second)
		// Full: the earliest lease expires at 10s, 8s from now.
		_, d = e.acquire(p, user("ann"), 1)
		e.expect("third", d, denied("in-flight", 0, 8*time.Second))
		if d.Cause != sluice.CauseConcurrency || d.Limits()[0].Used != 2 {
			e.t.Errorf("third: cause %q used %d, want %q and 2", d.Cause, d.Limits()[0].Used, sluice.CauseConcurrency)
		}
		e.expect("peek", e.peek(p, user("ann"), 1), denied("in-flight", 0, 8*time.Second))
		_, d = e.acquire(p, user("bob"), 1)
		e.expect("another user", d, allowed(1))
		// A released slot is free at once; a second release changes nothing.
		e.end("release", a, release, true)
		e.end("release again", a, release, false)
		e.end("settle after release", a, 3, false)
		c, d := e.acquire(p, user("ann"), 1)
		e.expect("after release", d, allowed(0))
		_, d = e.acquire(p, user("ann"), 1)
		e.expect("full again", d, denied("in-flight", 0, 9*time.Second))
		e.end("release b", b, release, true)
		e.end("release c", c, release, true)
		e.expect("empty", e.peek(p, user("ann"), 1), allowed(1))
		// At the earliest lease's expiry exactly, its slot is free while
		// the other's is held.
		e.acquire(p, user("ann"), 1)
		e.clock.Advance(time.Second)
		e.acquire(p, user("ann"), 1)
		e.clock.Set(T0.Add(12*time.Second - time.Microsecond))
		_, d = e.acquire(p, user("ann"), 1)
		e.expect("1µs before the first expiry", d, denied("in-flight", 0, time.Microsecond))
		e.clock.Set(T0.Add(12 * time.Second))
		_, d = e.acquire(p, user("ann"), 1)
		e.expect("at the first expiry", d, allowed(0))
		// AllowN and Record cannot take a slot.
		if _, err := e.lim.AllowN(e.ctx, p, user("ann"), 1); !errors.Is(err, sluice.ErrInvalidPolicy) {
			e.t.Errorf("AllowN on a concurrency rule: %v, want ErrInvalidPolicy", err)
		}
		if _, err := e.lim.Record(e.ctx, p, user("ann"), 1); !errors.Is(err, sluice.ErrInvalidPolicy) {
			e.t.Errorf("Record on a concurrency rule: %v, want ErrInvalidPolicy", err)
		}
		req, err := resolve.Request(p, user("ann"), 1)
		if err != nil {
			e.t.Fatal(err)
		}
		if err := e.target.Store.Decide(e.ctx, req); !errors.Is(err, store.ErrLeaseOnly) {
			e.t.Errorf("the store's Decide of a concurrency rule: %v, want ErrLeaseOnly", err)
		}
	})},

	{"LeaseExpiry", leased(func(e *env) {
		// A lease not released frees its slot at exactly its expiry, and
		// is then not held: releasing or settling it changes nothing.
		p := inFlight("lease-expiry", 1, time.Second)
		a, _ := e.acquire(p, user("ann"), 1)
		e.clock.Set(T0.Add(time.Second - time.Microsecond))
		_, d := e.acquire(p, user("ann"), 1)
		e.expect("1µs before expiry", d, denied("in-flight", 0, time.Microsecond))
		e.clock.Set(T0.Add(time.Second))
		b, d := e.acquire(p, user("ann"), 1)
		e.expect("at expiry", d, allowed(0))
		e.end("release expired", a, release, false)
		e.end("settle expired", a, 1, false)
		if held, err := a.Extend(e.ctx); err != nil || held {
			e.t.Errorf("extend expired: held %v, err %v; want false, nil", held, err)
		}
		// Extending moves the expiry to a lease time from now.
		e.clock.Advance(500 * time.Millisecond)
		if held, err := b.Extend(e.ctx); err != nil || !held || !b.Expires().Equal(T0.Add(2500*time.Millisecond)) {
			e.t.Errorf("extend: held %v, err %v, expires %v; want true, nil, T0+2.5s", held, err, b.Expires())
		}
		e.clock.Set(T0.Add(2 * time.Second)) // b's first expiry
		_, d = e.acquire(p, user("ann"), 1)
		e.expect("extended", d, denied("in-flight", 0, 500*time.Millisecond))
		e.clock.Set(T0.Add(2500 * time.Millisecond))
		c, d := e.acquire(p, user("ann"), 1)
		e.expect("after the extension", d, allowed(0))
		e.end("release extended after its expiry", b, release, false)
		e.end("release", c, release, true)
	})},

	{"LeaseSettleLog", leased(func(e *env) {
		// The lease's own entry takes the real cost, at its time.
		p := settled("settle-log", sluice.Rule{Limit: 100, Window: time.Minute})
		a, d := e.acquire(p, user("ann"), 10)
		e.expectUsed("estimate", d, 10, 1)
		e.clock.Advance(30 * time.Second)
		b, _ := e.acquire(p, user("ann"), 50)
		e.end("settle up", a, 25, true)
		e.expectUsed("after settling up", e.peek(p, user("ann"), 1), 25+50+1, 1+1)
		e.end("settle down", b, 5, true)
		e.expectUsed("after settling down", e.peek(p, user("ann"), 1), 25+5+1, 0+1)
		e.end("settle again", b, 40, false)
		e.expectUsed("unchanged", e.peek(p, user("ann"), 1), 25+5+1, 1)
		// Each settled entry leaves the window at its own time.
		e.clock.Set(T0.Add(time.Minute))
		e.expectUsed("a's entry left", e.peek(p, user("ann"), 1), 5+1, 1)
		c, _ := e.acquire(p, user("ann"), 95)
		_, d = e.acquire(p, user("ann"), 1)
		e.expect("full", d, denied("rate", 0, 30*time.Second))
		// Settling to 0 refunds it all: the room is there at once.
		e.end("settle to 0", c, 0, true)
		_, d = e.acquire(p, user("ann"), 95)
		e.expect("refunded", d, allowed(0))
		if d.Limits()[0].Used != 100 {
			e.t.Errorf("refunded: used %d, want 100", d.Limits()[0].Used)
		}
	})},

	{"LeaseSettleZeroGap", leased(func(e *env) {
		// A log entry settled to 0 stays, counting nothing: its request
		// happened at its time, so the minimum gap counts from it, and the
		// window holds it until it leaves.
		p := rateOnly("settle-zero-gap", sluice.Rule{Limit: 10, Window: time.Minute, MinGap: 10 * time.Second})
		a, _ := e.acquire(p, user("ann"), 3)
		e.clock.Advance(time.Second)
		e.end("settle to 0", a, 0, true)
		d := e.peek(p, user("ann"), 1)
		e.expect("within the gap", d, denied("rate", 10, 9*time.Second))
		e.expectUsed("within the gap", d, 0)
		e.expectReset("within the gap", d, 59*time.Second)
		e.clock.Set(T0.Add(10*time.Second - time.Microsecond))
		_, d = e.acquire(p, user("ann"), 1)
		e.expect("1µs before the gap passed", d, denied("rate", 10, time.Microsecond))
		e.clock.Set(T0.Add(10 * time.Second))
		b, d := e.acquire(p, user("ann"), 1)
		e.expect("the gap passed", d, allowed(9))
		// Settled to 0 at its own instant, then recorded into: the entry
		// takes the new cost, and the gap counts from it still.
		e.end("settle to 0 at once", b, 0, true)
		e.expectUsed("recorded into", e.record(p, user("ann"), 2), 2)
		e.clock.Advance(5 * time.Second)
		d = e.peek(p, user("ann"), 1)
		e.expect("within the second gap", d, denied("rate", 8, 5*time.Second))
		e.expectReset("within the second gap", d, 55*time.Second)
	})},

	{"LeaseSettleZeroLongGap", leased(func(e *env) {
		// A gap longer than the window: the entry settled to 0 has left
		// the window (nothing to reset) while its gap still holds.
		p := rateOnly("settle-zero-long-gap", sluice.Rule{Limit: 10, Window: 10 * time.Second, MinGap: time.Minute})
		a, _ := e.acquire(p, user("ann"), 3)
		e.end("settle to 0", a, 0, true)
		e.clock.Set(T0.Add(20 * time.Second))
		d := e.peek(p, user("ann"), 1)
		e.expect("past the window, within the gap", d, denied("rate", 10, 40*time.Second))
		e.expectUsed("past the window, within the gap", d, 0)
		e.expectReset("past the window, within the gap", d, 0)
		e.clock.Set(T0.Add(time.Minute))
		d = e.peek(p, user("ann"), 1)
		e.expect("the gap passed", d, allowed(9))
		e.expectReset("the gap passed", d, 10*time.Second)
	})},

	{"LeaseSettleZeroNeighbours", leased(func(e *env) {
		// Entries settled to 0 with entries written after them: they
		// count nothing and free nothing when they leave; the others keep
		// their costs and times.
		p := rateOnly("settle-zero-neighbours", sluice.Rule{Limit: 10, Window: time.Minute})
		a, _ := e.acquire(p, user("ann"), 3)
		e.clock.Set(T0.Add(10 * time.Second))
		b, _ := e.acquire(p, user("ann"), 2)
		e.clock.Set(T0.Add(20 * time.Second))
		e.allow(p, user("ann"), 1)
		e.clock.Set(T0.Add(30 * time.Second))
		e.end("settle the oldest to 0", a, 0, true)
		e.expectUsed("the oldest settled", e.peek(p, user("ann"), 1), 2+1+1)
		e.end("settle the next to 0", b, 0, true)
		e.expectUsed("both settled", e.peek(p, user("ann"), 1), 1+1)
		e.expectUsed("filled", e.allow(p, user("ann"), 9), 10)
		// The first unit to leave is the one of 20s: a's and b's entries
		// free nothing.
		_, d := e.acquire(p, user("ann"), 1)
		e.expect("full", d, denied("rate", 0, 50*time.Second))
		e.clock.Set(T0.Add(70 * time.Second))
		e.expect("a and b left", e.peek(p, user("ann"), 1), denied("rate", 0, 10*time.Second))
		e.clock.Set(T0.Add(80 * time.Second))
		d = e.peek(p, user("ann"), 1)
		e.expect("the 20s entry left", d, allowed(0))
		e.expectReset("the 20s entry left", d, time.Minute)
	})},

	{"LeaseSettleZeroNewest", leased(func(e *env) {
		// The newest entry settled to 0 after the oldest counted one: the
		// wait for room is the oldest counted entry's, not the newest's.
		p := rateOnly("settle-zero-newest", sluice.Rule{Limit: 10, Window: time.Minute})
		e.allow(p, user("ann"), 1)
		e.clock.Set(T0.Add(20 * time.Second))
		e.allow(p, user("ann"), 5)
		e.clock.Set(T0.Add(30 * time.Second))
		x, _ := e.acquire(p, user("ann"), 3)
		e.end("settle the newest to 0", x, 0, true)
		e.clock.Set(T0.Add(65 * time.Second)) // the first entry left
		d := e.peek(p, user("ann"), 6)
		e.expect("room at the 20s entry's leaving", d, denied("rate", 5, 15*time.Second))
		e.expectReset("the newest entry's", d, 25*time.Second)
		e.clock.Set(T0.Add(80 * time.Second))
		e.expect("the 20s entry left", e.peek(p, user("ann"), 10), allowed(0))
	})},

	{"LeaseSettleZeroGCRAAndCounter", leased(func(e *env) {
		// GCRA: 10 a second, an interval of 100ms; the arrival time moves
		// back by the estimate, never before now.
		g := rateOnly("settle-zero-gcra", sluice.Rule{Limit: 10, Window: time.Second, Algorithm: sluice.GCRA})
		a, _ := e.acquire(g, user("ann"), 4)
		e.allow(g, user("ann"), 2) // TAT 600ms
		e.clock.Advance(100 * time.Millisecond)
		e.end("gcra to 0", a, 0, true) // TAT 200ms
		d := e.peek(g, user("ann"), 1)
		e.expectUsed("gcra refunded", d, 2)
		e.expectReset("gcra refunded", d, 200*time.Millisecond)
		b, _ := e.acquire(g, user("ann"), 1) // TAT 300ms
		e.clock.Advance(150 * time.Millisecond)
		e.end("gcra to 0 past now", b, 0, true) // 200ms, before now: now
		d = e.peek(g, user("ann"), 1)
		e.expectUsed("full bucket", d, 1)
		e.expectReset("full bucket", d, 100*time.Millisecond)
		// The sliding counter: the estimate's bucket gives it back, and
		// the count is what the others recorded.
		c := rateOnly("settle-zero-counter", sluice.Rule{Limit: 10, Window: time.Minute, Algorithm: sluice.SlidingCounter})
		x, _ := e.acquire(c, user("ann"), 4)
		e.allow(c, user("ann"), 3)
		e.end("counter to 0", x, 0, true)
		e.expectUsed("counter refunded", e.allow(c, user("ann"), 7), 10)
		_, d = e.acquire(c, user("ann"), 1)
		// Room 1µs into the next bucket, where the 10 weigh under 10.
		e.expect("counter full", d, denied("rate", 0, time.Minute-250*time.Millisecond+time.Microsecond))
	})},

	{"LeaseSettleGCRA", leased(func(e *env) {
		// 10 a second, a burst of 10: an interval of 100ms. The arrival
		// time moves by the difference, never before now.
		p := settled("settle-gcra", sluice.Rule{Limit: 10, Window: time.Second, Algorithm: sluice.GCRA})
		a, d := e.acquire(p, user("ann"), 5)
		e.expectUsed("estimate", d, 5, 1)
		e.end("settle down", a, 2, true)
		e.expectUsed("after settling down", e.peek(p, user("ann"), 1), 2+1, 1)
		b, _ := e.acquire(p, user("ann"), 1)
		e.end("settle up", b, 6, true)
		e.expectUsed("after settling up", e.peek(p, user("ann"), 1), 8+1, 1)
		// Past the burst: recorded anyway, the work happened.
		c, _ := e.acquire(p, user("ann"), 1)
		e.end("settle over", c, 12, true)
		_, d = e.acquire(p, user("ann"), 1)
		e.expect("over the burst", d, denied("rate", 0, 1100*time.Millisecond))
		// A refund after the bucket drained past now changes nothing.
		e.clock.Advance(2 * time.Second)
		x, _ := e.acquire(p, user("ann"), 3)
		e.clock.Advance(time.Second)
		e.end("refund of a drained bucket", x, 0, true)
		e.expectUsed("full bucket", e.peek(p, user("ann"), 1), 1, 1)
	})},

	{"LeaseSettleSlidingCounter", leased(func(e *env) {
		// Buckets of a minute from T0: the estimate's bucket takes the
		// difference, current or previous.
		p := settled("settle-counter", sluice.Rule{Limit: 100, Window: time.Minute, Algorithm: sluice.SlidingCounter})
		a, d := e.acquire(p, user("ann"), 10)
		e.expectUsed("estimate", d, 10, 1)
		b, _ := e.acquire(p, user("ann"), 20)
		e.end("settle up in the current bucket", a, 30, true)
		e.expectUsed("current up", e.peek(p, user("ann"), 1), 50+1, 1+1)
		// 90s: the previous bucket (50) weighs half.
		e.clock.Set(T0.Add(90 * time.Second))
		e.expectUsed("next bucket", e.peek(p, user("ann"), 1), 25+1, 1+1)
		e.end("settle down in the previous bucket", b, 0, true)
		e.expectUsed("previous down", e.peek(p, user("ann"), 1), 15+1, 0+1)
		c, _ := e.acquire(p, user("ann"), 4)
		// 2m30s: c's bucket is the previous one, a's is gone.
		e.clock.Set(T0.Add(150 * time.Second))
		e.end("settle up in the previous bucket", c, 44, true)
		e.expectUsed("previous up", e.peek(p, user("ann"), 1), 22+1, 0+1)
	})},

	{"LeaseMixedAllOrNothing", leased(func(e *env) {
		// Rate and concurrency decided together: a denial by either
		// writes to neither.
		p := &sluice.Policy{Name: "mixed", Rules: []sluice.Rule{
			{Name: "rate", By: []string{"user"}, Limit: 3, Window: time.Minute},
			{Name: "in-flight", By: []string{"user"}, Concurrency: 2, Lease: time.Minute},
		}}
		for i := range 3 {
			x, d := e.acquire(p, user("ann"), 1)
			e.expect("within the rate", d, allowed(min(int64(2-i), 1)))
			e.end("release", x, release, true)
		}
		_, d := e.acquire(p, user("ann"), 1)
		e.expect("rate denies", d, denied("rate", 0, time.Minute))
		e.expectUsed("no slot taken", e.peek(p, user("ann"), 1), 3, 0)
		var held []*sluice.Lease
		for range 2 {
			x, _ := e.acquire(p, user("bob"), 1)
			held = append(held, x)
		}
		_, d = e.acquire(p, user("bob"), 1)
		e.expect("concurrency denies", d, denied("in-flight", 0, time.Minute))
		if d.Cause != sluice.CauseConcurrency {
			e.t.Errorf("concurrency denies: cause %q", d.Cause)
		}
		e.expectUsed("nothing recorded", d, 2, 2)
		for _, x := range held {
			e.end("release", x, release, true)
		}
		e.expectUsed("released", e.peek(p, user("bob"), 1), 3, 1)
	})},

	{"LeaseResume", leased(func(e *env) {
		// An id ends the lease from another Limiter; an id altered to name
		// another key names no lease.
		p := inFlight("lease-resume", 1, time.Minute)
		a, _ := e.acquire(p, user("ann"), 1)
		if name, err := sluice.LeasePolicy(a.ID()); err != nil || name != p.Name {
			e.t.Errorf("LeasePolicy: %q, %v", name, err)
		}
		if _, err := e.lim.ResumeLease(inFlight("other", 1, time.Minute), a.ID()); !errors.Is(err, sluice.ErrInvalidLease) {
			e.t.Errorf("resume with another policy: %v, want ErrInvalidLease", err)
		}
		for _, bad := range []string{"", "x", a.ID()[:len(a.ID())-2], a.ID() + "AA"} {
			if _, err := e.lim.ResumeLease(p, bad); !errors.Is(err, sluice.ErrInvalidLease) {
				e.t.Errorf("resume %q: %v, want ErrInvalidLease", bad, err)
			}
		}
		b, _ := e.acquire(p, user("bob"), 1)
		forged := forgeLease(e, a.ID(), b.ID())
		x, err := e.lim.ResumeLease(p, forged)
		if err != nil {
			e.t.Fatalf("resume forged: %v", err)
		}
		e.end("forged", x, release, false)
		e.expect("ann still held", e.peek(p, user("ann"), 1), denied("in-flight", 0, time.Minute))
		x, err = e.lim.ResumeLease(p, a.ID())
		if err != nil {
			e.t.Fatalf("resume: %v", err)
		}
		e.end("resumed", x, release, true)
		e.end("original", a, release, false)
		e.expect("ann free", e.peek(p, user("ann"), 1), allowed(0))
		e.end("bob", b, release, true)
	})},

	{"LeaseOverrides", leased(func(e *env) {
		// Runtime overrides move a lease's windows as they move decisions,
		// for a lease Acquire returned and one resumed from its id: its
		// lease time, and the window a settle finds its estimate in.
		ov := &overrideMap{}
		e.overridden(ov)
		held := &sluice.Policy{Name: "lease-overrides", Rules: []sluice.Rule{
			{Name: "in-flight", By: []string{"user"}, Concurrency: 1, Lease: 10 * time.Second},
		}}
		ov.set("lease-overrides|in-flight|ann", sluice.Override{Limit: 1, Window: time.Hour})
		a, d := e.acquire(held, user("ann"), 1)
		e.expect("leased", d, outcome{Allowed: true, ResetAfter: time.Hour})
		if a.TTL() != time.Hour || !a.Expires().Equal(T0.Add(time.Hour)) {
			e.t.Errorf("lease time %v, expiry T0+%v; want the override's, 1h and T0+1h", a.TTL(), a.Expires().Sub(T0))
		}
		e.clock.Set(T0.Add(time.Minute)) // past the rule's own lease time
		x := e.resume(held, a.ID())
		if ok, err := x.Extend(e.ctx); err != nil || !ok || !x.Expires().Equal(T0.Add(time.Hour+time.Minute)) {
			e.t.Errorf("extend: held %v, err %v, expiry T0+%v; want held, T0+1h1m", ok, err, x.Expires().Sub(T0))
		}
		_, d = e.acquire(held, user("ann"), 1)
		e.expect("extended", d, denied("in-flight", 0, time.Hour))
		// An override changed while the lease is held: the next extension
		// lasts the new lease time, and TTL says so.
		ov.set("lease-overrides|in-flight|ann", sluice.Override{Limit: 1, Window: 2 * time.Hour})
		if ok, err := x.Extend(e.ctx); err != nil || !ok || x.TTL() != 2*time.Hour || !x.Expires().Equal(T0.Add(2*time.Hour+time.Minute)) {
			e.t.Errorf("extend after the override changed: held %v, err %v, lease time %v, expiry T0+%v; want held, 2h, T0+2h1m",
				ok, err, x.TTL(), x.Expires().Sub(T0))
		}
		e.end("release", a, release, true)
		_, d = e.acquire(held, user("ann"), 1)
		e.expect("released", d, allowed(0))

		// Settled from its id half an hour on, past the rules' own windows
		// of a minute and within the overrides' hour (buckets of an hour
		// for the counter, from T0); GCRA's interval is the override's,
		// 10ms, whatever the rule's own (100ms).
		e.clock.Set(T0.Add(time.Minute))
		p := &sluice.Policy{Name: "settle-overrides", Rules: []sluice.Rule{
			{Name: "log", By: []string{"user"}, Limit: 100, Window: time.Minute},
			{Name: "counter", By: []string{"user"}, Limit: 100, Window: time.Minute, Algorithm: sluice.SlidingCounter},
			{Name: "gcra", By: []string{"user"}, Limit: 10, Window: time.Second, Algorithm: sluice.GCRA},
			{Name: "in-flight", By: []string{"user"}, Concurrency: 4, Lease: 2 * time.Hour},
		}}
		ov.set("settle-overrides|log|ann", sluice.Override{Limit: 100, Window: time.Hour})
		ov.set("settle-overrides|counter|ann", sluice.Override{Limit: 100, Window: time.Hour})
		ov.set("settle-overrides|gcra|ann", sluice.Override{Limit: 100, Window: time.Second})
		b, _ := e.acquire(p, user("ann"), 10)
		e.clock.Set(T0.Add(31 * time.Minute))
		e.end("settle resumed", e.resume(p, b.ID()), 30, true)
		// GCRA: 20 more intervals of 10ms from now, then the peek's 1.
		e.expectUsed("settled", e.peek(p, user("ann"), 1), 30+1, 30+1, 21, 1)

		// An override set while a lease is held: the settle finds the
		// log's entry in the window decisions count now. The counter's
		// buckets restarted with its new window (the estimate went with
		// them): the bucket its time falls in takes the difference.
		q := &sluice.Policy{Name: "settle-overrides-later", Rules: []sluice.Rule{
			{Name: "log", By: []string{"user"}, Limit: 100, Window: time.Minute},
			{Name: "counter", By: []string{"user"}, Limit: 100, Window: time.Minute, Algorithm: sluice.SlidingCounter},
			{Name: "in-flight", By: []string{"user"}, Concurrency: 4, Lease: 2 * time.Hour},
		}}
		c, _ := e.acquire(q, user("bob"), 10)
		ov.set("settle-overrides-later|log|bob", sluice.Override{Limit: 100, Window: time.Hour})
		ov.set("settle-overrides-later|counter|bob", sluice.Override{Limit: 100, Window: time.Hour})
		e.clock.Advance(30 * time.Second)
		y, _ := e.acquire(q, user("bob"), 1)
		e.end("release", y, release, true)
		e.clock.Set(T0.Add(41 * time.Minute))
		e.end("settle acquired", c, 30, true)
		e.expectUsed("settled after the override", e.peek(q, user("bob"), 1), 30+1+1, 20+1+1, 1)
	})},

	{"LeaseAbandon", leased(func(e *env) {
		// An abandon of a lease alive ends it as a settle to 0 does: its
		// slot freed, its estimate refunded.
		p := settled("lease-abandon", sluice.Rule{Limit: 100, Window: time.Minute})
		lr := e.target.Store.(store.Leaser)
		a, _ := e.acquire(p, user("ann"), 10)
		e.clock.Advance(time.Second)
		e.abandon("abandon alive", p, "ann", a.ID(), true)
		e.expectUsed("abandoned", e.peek(p, user("ann"), 1), 0+1, 0+1)
		e.end("release abandoned", a, release, false)
		e.abandon("abandon again", p, "ann", a.ID(), false)

		// An abandon that comes first: the Acquire of its id that arrives
		// after it takes nothing, and is denied by every check, until the
		// abandon's lease time (10 minutes) has passed.
		lost := func(when string, want bool) {
			e.t.Helper()
			req, err := resolve.Request(p, user("ann"), 10)
			if err != nil {
				e.t.Fatal(err)
			}
			grant := store.LeaseGrant{ID: "abandoned-" + p.Name, TTL: 10 * time.Minute}
			if err := lr.Acquire(e.ctx, req, &grant); err != nil {
				e.t.Fatalf("%s: Acquire: %v", when, err)
			}
			if granted := !grant.Expires.IsZero(); granted != want {
				e.t.Fatalf("%s at T0+%v: granted %v (expires %v), want %v", when, e.elapsed(), granted, grant.Expires, want)
			}
			if want {
				return
			}
			wantRes := []store.Result{{Cause: store.CauseLimit}, {Cause: store.CauseConcurrency}}
			if !slices.Equal(req.Results, wantRes) {
				e.t.Errorf("%s at T0+%v: results %+v, want %+v", when, e.elapsed(), req.Results, wantRes)
			}
			e.expectUsed(when+": nothing taken", e.peek(p, user("ann"), 1), 0+1, 0+1)
		}
		e.abandon("abandon first", p, "ann", "abandoned-"+p.Name, false)
		lost("acquire after its abandon", false)
		e.clock.Set(T0.Add(time.Second + 10*time.Minute - time.Microsecond))
		lost("1µs before the abandon's lease time", false)
		e.clock.Set(T0.Add(time.Second + 10*time.Minute))
		lost("at the abandon's lease time", true)
		e.expectUsed("taken", e.peek(p, user("ann"), 1), 10+1, 1+1)
	})},

	{"LeaseNeverOverN", leased(func(e *env) {
		// Random acquires, releases, settles and clock steps on one key,
		// against a model of the leases alive: a lease is granted exactly
		// when fewer than N are alive, so never more than N are. (The lease
		// is long in real time: a store on the suite's clock may expire its
		// keys on its own, as Redis does, after the lease time.)
		const n = 3
		p := &sluice.Policy{Name: "lease-model", Rules: []sluice.Rule{
			{Name: "rate", Limit: 1000, Window: time.Minute},
			{Name: "in-flight", Concurrency: n, Lease: 10 * time.Second},
		}}
		rng := rand.New(rand.NewPCG(29, 8))
		type held struct {
			x       *sluice.Lease
			expires time.Time
		}
		var live []held
		alive := func() []held {
			now := e.clock.Now()
			return slices.DeleteFunc(live, func(h held) bool { return !now.Before(h.expires) })
		}
		for step := range 400 {
			live = alive()
			switch r := rng.IntN(10); {
			case r < 5:
				x, d := e.acquire(p, nil, 1)
				if d.Allowed != (len(live) < n) {
					e.t.Fatalf("step %d at T0+%v: allowed %v with %d alive of %d", step, e.elapsed(), d.Allowed, len(live), n)
				}
				if d.Allowed {
					live = append(live, held{x, e.clock.Now().Add(10 * time.Second)})
				} else if first := slices.MinFunc(live, func(a, b held) int { return a.expires.Compare(b.expires) }); d.RetryAfter != first.expires.Sub(e.clock.Now()) {
					e.t.Fatalf("step %d: retry after %v, want %v", step, d.RetryAfter, first.expires.Sub(e.clock.Now()))
				}
			case r < 7 && len(live) > 0:
				i := rng.IntN(len(live))
				e.end("release", live[i].x, int64(rng.IntN(3))-1, true)
				live = slices.Delete(live, i, i+1)
			default:
				e.clock.Advance(time.Duration(rng.IntN(3_000_000)) * time.Microsecond)
			}
		}
	})},
}

// abandon sends the store an abandon of the lease id of p's windows for
// user, of p's lease time, and checks whether it was held.
func (e *env) abandon(what string, p *sluice.Policy, u, id string, held bool) {
	e.t.Helper()
	req, err := resolve.Request(p, user(u), 1)
	if err != nil {
		e.t.Fatal(err)
	}
	var ttl time.Duration
	for _, r := range p.Rules {
		ttl = max(ttl, r.Lease)
	}
	st, err := e.target.Store.(store.Leaser).Finish(e.ctx, &store.FinishRequest{
		Policy: req.Policy, Shared: req.Shared, Checks: req.Checks, ID: id, Op: store.LeaseAbandon, TTL: ttl})
	if err != nil {
		e.t.Fatalf("%s at T0+%v: %v", what, e.elapsed(), err)
	}
	if st.Held != held {
		e.t.Errorf("%s at T0+%v: held %v, want %v", what, e.elapsed(), st.Held, held)
	}
}

// resume resumes the lease id of p, failing the case on error.
func (e *env) resume(p *sluice.Policy, id string) *sluice.Lease {
	e.t.Helper()
	x, err := e.lim.ResumeLease(e.policy(p), id)
	if err != nil {
		e.t.Fatalf("ResumeLease(%s) at T0+%v: %v", p.Name, e.elapsed(), err)
	}
	return x
}

// overrideMap is a sluice.Overrides of fixed windows, keyed
// "policy|rule|values" (the values joined by "|").
type overrideMap struct {
	mu sync.Mutex
	m  map[string]sluice.Override
}

func (o *overrideMap) Override(policy, rule string, values []string) (sluice.Override, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	v, ok := o.m[policy+"|"+rule+"|"+strings.Join(values, "|")]
	return v, ok
}

func (o *overrideMap) set(key string, v sluice.Override) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[string]sluice.Override{}
	}
	o.m[key] = v
}

// forgeLease returns the id of lease a altered to name the windows of
// lease b: what a client that edited its id would send.
func forgeLease(e *env, a, b string) string {
	e.t.Helper()
	ra, err := base64.RawURLEncoding.DecodeString(a)
	if err != nil {
		e.t.Fatalf("lease id %q: %v", a, err)
	}
	rb, err := base64.RawURLEncoding.DecodeString(b)
	if err != nil {
		e.t.Fatalf("lease id %q: %v", b, err)
	}
	const head = 1 + 16 // the version and the random part
	return base64.RawURLEncoding.EncodeToString(append(ra[:head:head], rb[head:]...))
}
