package storetest

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sluicerate/sluice"
)

// RunDenyCache runs the conformance suite with the Limiter's deny cache on
// (sluice.Config.DenyCache, timed on the suite's manual clock): every
// policy the cases decide caches its denials.
//
// Every answer the cache gives is held to the store's at that instant,
// asked by a peek through a Limiter without a cache: the store denies the
// request too (the cache never admits, so a difference is an
// under-admission), the cached answer lists the store's rules in the
// store's order, every rule it says does not fit does not fit at the
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
	t.Logf("deny cache: %d answers checked against the store, %d with the store's wait to the µs, %d shorter (entries added since)",
		hits, exact, hits-exact)
}

// cacheTally counts the cache's answers over a run: all of them, and those
// whose wait was the store's to the µs.
type cacheTally struct {
	hits, exact atomic.Int64
}

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
//
// The cached answer is the store's when it denied: the same rules in the
// same order, in the same shape. Since then other requests may have
// written to a rule's window, so its figures may be behind the store's;
// but every rule that did not fit then does not fit now, and waits no
// longer than the store says.
func (t *cacheTally) check(d, want sluice.Decision) string {
	t.hits.Add(1)
	var b strings.Builder
	if want.Allowed && !want.Shadowed {
		fmt.Fprintf(&b, "  the store admits it: %+v\n", want)
	}
	if d.Allowed != want.Allowed || d.Shadowed != want.Shadowed {
		fmt.Fprintf(&b, "  allowed %v shadowed %v, the store %v %v\n", d.Allowed, d.Shadowed, want.Allowed, want.Shadowed)
	}
	if d.Degraded || d.Unlimited || d.DeniedBy == "" {
		fmt.Fprintf(&b, "  not a cached denial: %+v\n", d)
	}
	if d.RetryAfter > want.RetryAfter {
		fmt.Fprintf(&b, "  waits %v, the store %v\n", d.RetryAfter, want.RetryAfter)
	}
	if len(d.Limits()) != len(want.Limits()) {
		fmt.Fprintf(&b, "  %d statuses, the store %d: %+v\n", len(d.Limits()), len(want.Limits()), d.Limits())
		return b.String()
	}
	exact := true
	denier := ""
	for i, s := range d.Limits() {
		w := want.Limits()[i]
		switch {
		case s.Rule != w.Rule || s.Limit != w.Limit || s.Window != w.Window || s.Shadow != w.Shadow:
			fmt.Fprintf(&b, "  status %d is rule %q (limit %d per %v, shadow %v), the store's %q (%d per %v, %v)\n",
				i, s.Rule, s.Limit, s.Window, s.Shadow, w.Rule, w.Limit, w.Window, w.Shadow)
		case s.Fits:
			if s.RetryAfter != 0 || s.Cause != "" {
				fmt.Fprintf(&b, "  rule %q fits with a wait %v or cause %q\n", s.Rule, s.RetryAfter, s.Cause)
			}
		case w.Fits:
			fmt.Fprintf(&b, "  rule %q fits at the store: %+v\n", s.Rule, w)
		case s.RetryAfter > w.RetryAfter:
			fmt.Fprintf(&b, "  rule %q waits %v, at the store %v\n", s.Rule, s.RetryAfter, w.RetryAfter)
		case s.RetryAfter < w.RetryAfter:
			exact = false
		}
		if !s.Fits && !s.Shadow && denier == "" {
			denier = s.Rule
		}
	}
	if d.DeniedBy != denier {
		fmt.Fprintf(&b, "  denied by %q, but the first rule that does not fit is %q\n", d.DeniedBy, denier)
	}
	if exact && b.Len() == 0 {
		t.exact.Add(1)
	}
	return b.String()
}
