// Package storetest is the conformance suite for sluice stores: Run checks
// that a sluice.Store decides exactly as the contract says, so every store
// (memory, Redis standalone, Redis Cluster) is held to the same cases with the
// same expected figures.
//
// Each case opens a fresh store over a manual clock, drives it through a
// sluice.Limiter, and asserts every field of the decisions it cares about.
package storetest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/store"
)

// Target is a store under test, opened for one case.
type Target struct {
	// Store is the store under test. It must read its time from the now
	// function given to the opener and start empty. The suite closes it.
	Store store.Store

	// TTLs, when set, returns every key the store holds with its remaining
	// time to live (a negative duration for a key without one). The suite
	// checks that every key expires within its rule's window plus gap.
	TTLs func(ctx context.Context) (map[string]time.Duration, error)
}

// Opener opens an empty store whose clock is now. It is called once per case.
type Opener func(t *testing.T, now func() time.Time) Target

// T0 is the instant every case starts at.
var T0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// env is one case's store, limiter and clock.
type env struct {
	t      *testing.T
	ctx    context.Context
	clock  *Clock
	target Target
	lim    *sluice.Limiter
	cfg    sluice.Config // lim's

	// With the deny cache on (RunDenyCache): the cache's tally, a Limiter
	// without one that tells what the store answers, and whether the case
	// frees room a concurrent request may have seen taken.
	cache *cacheTally
	raw   *sluice.Limiter
	frees bool
}

func open(t *testing.T, opener Opener, cache *cacheTally) *env {
	t.Helper()
	clock := NewClock(T0)
	target := opener(t, clock.Now)
	t.Cleanup(func() { _ = target.Store.Close() })
	// A long deadline and no breaker: the suite checks decisions, not the
	// failure policy, on machines that may be slow.
	cfg := sluice.Config{Timeout: 10 * time.Second, Breaker: sluice.Breaker{Failures: -1}, DenyCache: -1}
	e := &env{t: t, ctx: context.Background(), clock: clock, target: target, cache: cache}
	if cache != nil {
		// The cache times its entries on the Limiter's clock: the store's.
		cfg.Clock = clock
		e.raw = sluice.NewLimiter(target.Store, cfg)
		cfg.DenyCache = 0
	}
	e.lim, e.cfg = sluice.NewLimiter(target.Store, cfg), cfg
	return e
}

// overridden makes the case's Limiters decide with the runtime overrides
// ov (sluice.Config.Overrides).
func (e *env) overridden(ov sluice.Overrides) {
	cfg := e.cfg
	cfg.Overrides = ov
	e.lim, e.cfg = sluice.NewLimiter(e.target.Store, cfg), cfg
	if e.raw != nil {
		cfg.DenyCache = -1
		e.raw = sluice.NewLimiter(e.target.Store, cfg)
	}
}

// Run runs the conformance suite against the stores open returns.
func Run(t *testing.T, opener Opener) {
	t.Helper()
	run(t, opener, nil)
}

func run(t *testing.T, opener Opener, cache *cacheTally) {
	t.Helper()
	all := slices.Concat(cases, crossSlotCases, conditionalCases, algorithmCases, spreadCases, scheduleCases, propertyCases, leaseCases, extremeCases, calendarCases, creditCases, creditLeaseCases, historyCases, quotaCases)
	for _, c := range all {
		t.Run(c.name, func(t *testing.T) {
			c.run(open(t, opener, cache))
		})
	}
}

// allow decides cost units and fails the case on error.
func (e *env) allow(p *sluice.Policy, attrs map[string]string, cost int64) sluice.Decision {
	e.t.Helper()
	d, err := e.lim.AllowN(e.ctx, e.policy(p), attrs, cost)
	if err != nil {
		e.t.Fatalf("AllowN(%s, %v, %d) at %v: %v", p.Name, attrs, cost, e.elapsed(), err)
	}
	return e.store(d, "AllowN", p, attrs, cost)
}

func (e *env) peek(p *sluice.Policy, attrs map[string]string, cost int64) sluice.Decision {
	e.t.Helper()
	d, err := e.lim.Peek(e.ctx, e.policy(p), attrs, cost)
	if err != nil {
		e.t.Fatalf("Peek(%s, %v, %d) at %v: %v", p.Name, attrs, cost, e.elapsed(), err)
	}
	return e.store(d, "Peek", p, attrs, cost)
}

func (e *env) record(p *sluice.Policy, attrs map[string]string, cost int64) sluice.Decision {
	e.t.Helper()
	d, err := e.lim.Record(e.ctx, e.policy(p), attrs, cost)
	if err != nil {
		e.t.Fatalf("Record(%s, %v, %d) at %v: %v", p.Name, attrs, cost, e.elapsed(), err)
	}
	return d
}

func (e *env) elapsed() time.Duration { return e.clock.Now().Sub(T0) }

// expect checks the decision's overall fields.
func (e *env) expect(what string, d sluice.Decision, want outcome) {
	e.t.Helper()
	got := outcome{Allowed: d.Allowed, DeniedBy: d.DeniedBy, Remaining: d.Remaining, RetryAfter: d.RetryAfter}
	if want.ResetAfter != 0 {
		got.ResetAfter = d.ResetAfter
	}
	if got != want {
		e.t.Errorf("%s at T0+%v:\n got %+v\nwant %+v", what, e.elapsed(), got, want)
	}
}

// expectUsed checks each rule's Used count, in policy order.
func (e *env) expectUsed(what string, d sluice.Decision, used ...int64) {
	e.t.Helper()
	if len(d.Limits()) != len(used) {
		e.t.Fatalf("%s: got %d limit statuses, want %d", what, len(d.Limits()), len(used))
	}
	for i, u := range used {
		s := d.Limits()[i]
		if s.Used != u || s.Remaining != max(0, s.Limit-u) {
			e.t.Errorf("%s at T0+%v: rule %q used %d remaining %d, want used %d remaining %d",
				what, e.elapsed(), s.Rule, s.Used, s.Remaining, u, max(0, s.Limit-u))
		}
	}
}

// outcome is the part of a Decision most cases compare. ResetAfter is
// compared only when the wanted value is non-zero.
type outcome struct {
	Allowed    bool
	DeniedBy   string
	Remaining  int64
	RetryAfter time.Duration
	ResetAfter time.Duration
}

func allowed(remaining int64) outcome { return outcome{Allowed: true, Remaining: remaining} }

func denied(by string, remaining int64, retry time.Duration) outcome {
	return outcome{DeniedBy: by, Remaining: remaining, RetryAfter: retry}
}
