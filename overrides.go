package sluice

import (
	"fmt"
	"time"

	"github.com/sluicerate/sluice/store"
)

// Runtime overrides. A rule's Overrides are part of its policy: changing
// one means loading the policy again. Overrides (Config.Overrides) give
// one window of a rule other figures while a Limiter runs, as an operator
// raises one customer's limit or blocks an abusive key for an hour; sluice
// serve keeps them in its store, so that every instance applies them.
//
// Precedence, for each rule that applies to a request: a runtime override
// for the request's window, then the first of the rule's Overrides that
// matches, then the rule's own figures. A runtime override changes the
// figures of a rule that applies, never whether it applies (Optional,
// Unless and Match still decide that), and it replaces an unlimited file
// override too: the window is then limited by the runtime override.

// Overrides gives the windows of a Limiter's rules other figures at
// runtime (Config.Overrides).
type Overrides interface {
	// Override returns the figures of the window of rule of policy whose
	// By attributes have values (in the rule's order), and whether an
	// override applies to it: its Limit, and its Window, Burst and MinGap
	// when above 0 (an Override's Match and Unlimited are for a rule's
	// Overrides, and an Unlimited one is refused). It is called for every
	// rule that applies to every request, so it must be fast; it must be
	// safe for concurrent use and must not keep values.
	Override(policy, rule string, values []string) (Override, bool)
}

// figures are the figures of one window of a rule: its own, or a runtime
// override's.
type figures struct {
	limit, burst   int64
	window, minGap time.Duration
}

// overridden returns r's figures for a window of limit limit, after the
// runtime override o when has is set, or an error wrapping
// ErrInvalidPolicy when o cannot apply to r (a window under 1µs, a gap on
// a rule that keeps no log, more than one event per µs for GCRA, fewer
// than one unit per spread sub-window).
func (r *Rule) overridden(limit int64, o Override, has bool) (figures, error) {
	f := figures{limit: limit, window: r.Window, minGap: r.MinGap}
	switch {
	case r.concurrent():
		f.window = r.Lease // a concurrency rule's window is its lease time
	case r.Period != noPeriod:
		f.window = calendarWindow
	case r.Algorithm == Credits:
		f.window = creditsWindow
	}
	if has && r.quota() && (o.Window > 0 || o.Burst > 0 || o.MinGap > 0) {
		return figures{}, fmt.Errorf("%w: the runtime override of rule %q: a calendar quota or a credits rule takes a limit only (its period or balance has no window, burst or min gap)", ErrInvalidPolicy, r.Name)
	}
	if has {
		f.limit = o.Limit
		if o.Window > 0 {
			f.window = o.Window
		}
		if o.MinGap > 0 {
			f.minGap = o.MinGap
		}
	}
	if r.Algorithm == GCRA {
		f.burst = r.burst(f.limit)
		if has && o.Burst > 0 {
			f.burst = o.Burst
		}
	}
	if !has {
		return f, nil
	}
	invalid := func(format string, args ...any) (figures, error) {
		return figures{}, fmt.Errorf("%w: the runtime override of rule %q: %s", ErrInvalidPolicy, r.Name, fmt.Sprintf(format, args...))
	}
	switch {
	case o.Unlimited:
		return invalid("unlimited is for a rule's overrides; give a runtime override a limit")
	case f.limit < 0:
		return invalid("limit %d is negative", f.limit)
	case f.limit > MaxCost:
		return invalid("limit %d is more than 2^53, the most sluice counts", f.limit)
	case f.burst < 0 || f.burst > MaxCost:
		return invalid("burst %d; a burst is 1 to 2^53", f.burst)
	case r.concurrent() && (f.minGap > 0 || has && o.Burst > 0):
		return invalid("a concurrency rule takes no min gap or burst; its limit is the leases alive at once, its window the lease time")
	case f.window < time.Microsecond:
		return invalid("window %v is under 1µs", f.window)
	case f.minGap > 0 && r.Algorithm != Log:
		return invalid("a min gap needs the log algorithm, and the rule keeps %v", r.Algorithm)
	case r.Algorithm == GCRA && f.limit > 0 && f.window/time.Microsecond < time.Duration(f.limit):
		return invalid("%d per %v is more than one event per µs, what gcra's interval can hold", f.limit, f.window)
	case r.Algorithm == GCRA && !gcraSpans(f.limit, f.burst, f.window):
		return invalid("a burst of %d at %d per %v takes more than 2^50µs (about 35 years) to refill", f.burst, f.limit, f.window)
	case r.Spread > 1 && f.limit > 0 && (f.limit < int64(r.Spread) || r.Algorithm == GCRA && f.burst < int64(r.Spread)):
		return invalid("limit %d (burst %d) spread over %d sub-windows leaves some with none", f.limit, f.burst, r.Spread)
	}
	return f, nil
}

// cacheHit tells the OnCacheHit hook of s's request, answered from the deny
// cache with d: the request's windows, with d's statuses as their
// results.
func (l *Limiter) cacheHit(s *scratch, d *Decision) {
	res := s.req.ResultsBuffer()
	for i := range min(len(res), len(d.Limits())) {
		st := &d.Limits()[i]
		res[i] = store.Result{Fits: st.Fits, Cause: storeCauses[st.Cause], Used: st.Used, Remaining: st.Remaining,
			RetryAfter: st.RetryAfter, ResetAfter: st.ResetAfter}
	}
	l.cfg.hooks.OnCacheHit(&s.req)
}

// storeCauses maps a Decision's causes to a store's.
var storeCauses = map[Cause]store.Cause{"": store.CauseNone, CauseLimit: store.CauseLimit, CauseGap: store.CauseGap}

// Resolve returns the store request that deciding cost units of p for
// attrs makes with l: a check per rule that applies, with its values and
// its figures after l's runtime overrides (Config.Overrides) and the
// rule's own. It returns the errors AllowN returns for bad input.
func (l *Limiter) Resolve(p *Policy, attrs map[string]string, cost int64) (*store.Request, error) {
	cp, err := p.compiled()
	if err != nil {
		return nil, err
	}
	var s scratch
	if err := s.resolve(cp, attrs, cost, l.cfg.Overrides); err != nil {
		return nil, err
	}
	return &s.req, nil
}
