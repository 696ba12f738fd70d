package storetest

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
)

// RunDenyCache runs the conformance suite with the Limiter's deny cache on
// (sluice.Config.DenyCache, timed on the suite's manual clock): every
// policy the cases decide caches its denials.
//
// Every answer the cache gives is held to the store's at that instant,
// asked by a peek through a Limiter without a cache: the store denies the
// request too (the cache never admits, so a difference is an
// under-admission), every rule the cached answer names does not fit at the
// store, and no cached wait is longer than the store's. The case then goes
// on with the store's decision, so its own assertions hold the store's
// figures. Cases that free room a concurrent request may have seen taken
// (testCase.frees: cross-slot rollbacks) may admit less than their limit
// with the cache; they log it and still fail on admitting more. The random
// sequences of the property case check each cached answer against the
// model the same way, and fail when the cache answered none of them.
func RunDenyCache(t *testing.T, opener Opener) {
	t.Helper()
	tally := new(cacheTally)
	run(t, opener, tally)
	hits, exact := tally.hits.Load(), tally.exact.Load()
	t.Logf("deny cache: %d answers checked against the store, %d with the store's wait to the µs, %d shorter (more cost than the denial, or entries added since)",
		hits, exact, hits-exact)
}

// cacheTally counts the cache's answers over a run: all of them, and those
// whose wait was the store's to the µs.
type cacheTally struct {
	hits, exact atomic.Int64
}

// limiterClock is the Limiter's clock in a case with the deny cache: the
// case's manual clock, with real timers for Wait, as the default clock has.
type limiterClock struct{ *Clock }

func (limiterClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// policy returns p as the case's Limiter decides it: caching its denials
// when the deny cache is on.
func (e *env) policy(p *sluice.Policy) *sluice.Policy {
	if e.cache == nil || p == nil {
		return p
	}
	q := *p
	q.CacheDenials = true
	return &q
}

// store returns d, or, when the deny cache answered it, checks it against
// the store's decision at this instant and returns the store's.
func (e *env) store(d sluice.Decision, op string, p *sluice.Policy, attrs map[string]string, cost int64) sluice.Decision {
	e.t.Helper()
	if !d.Cached {
		return d
	}
	want, err := e.raw.Peek(e.ctx, p, attrs, cost)
	if err != nil {
		e.t.Fatalf("Peek(%s, %v, %d) without the cache at T0+%v: %v", p.Name, attrs, cost, e.elapsed(), err)
	}
	if msg := e.cache.check(d, want); msg != "" {
		e.t.Errorf("%s(%s, %v, %d) at T0+%v answered from the deny cache:\n%s", op, p.Name, attrs, cost, e.elapsed(), msg)
	}
	return want
}

// check describes how a cached answer d disagrees with want, the store's
// (or the model's) decision of the same request at the same instant, or
// returns "". It counts the answer.
func (t *cacheTally) check(d, want sluice.Decision) string {
	t.hits.Add(1)
	var b strings.Builder
	if want.Allowed && !want.Shadowed {
		fmt.Fprintf(&b, "  the store admits it: %+v\n", want)
	}
	if d.Allowed != want.Allowed || d.Shadowed != want.Shadowed {
		fmt.Fprintf(&b, "  allowed %v shadowed %v, the store %v %v\n", d.Allowed, d.Shadowed, want.Allowed, want.Shadowed)
	}
	if len(d.Limits) == 0 || d.DeniedBy != d.Limits[0].Rule || d.Degraded {
		fmt.Fprintf(&b, "  not a cached denial: %+v\n", d)
	}
	if d.RetryAfter > want.RetryAfter {
		fmt.Fprintf(&b, "  waits %v, the store %v\n", d.RetryAfter, want.RetryAfter)
	}
	exact := true
	for _, s := range d.Limits {
		i := 0
		for i < len(want.Limits) && want.Limits[i].Rule != s.Rule {
			i++
		}
		switch {
		case i == len(want.Limits):
			fmt.Fprintf(&b, "  rule %q does not apply at the store\n", s.Rule)
		case want.Limits[i].Fits:
			fmt.Fprintf(&b, "  rule %q fits at the store: %+v\n", s.Rule, want.Limits[i])
		case s.RetryAfter > want.Limits[i].RetryAfter:
			fmt.Fprintf(&b, "  rule %q waits %v, at the store %v\n", s.Rule, s.RetryAfter, want.Limits[i].RetryAfter)
		case s.RetryAfter < want.Limits[i].RetryAfter:
			exact = false
		}
	}
	if exact && b.Len() == 0 {
		t.exact.Add(1)
	}
	return b.String()
}
