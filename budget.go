package sluice

import (
	"fmt"
	"time"

	"github.com/sluicerate/sluice/store"
)

// Budgets. A budgeted rule (Rule.Budget) is answered from slices of its
// capacity that the Limiter leases from the store (store.Budgeter) and
// admits from in memory; the other rules of its policy are decided by the
// store as usual. See docs/budgets.md for the argument that a slice never
// lets a rule admit more than its limit.

// MaxBudget returns the longest Budget a rule may take with these
// figures, so that its window stays exact and what a slice strands stays
// small beside the window: a quarter of the window for the log and the
// sliding counter (a log slice counts until its end plus the window, a
// counter slice is cut at its bucket's end), a quarter of the time GCRA's
// bucket takes to fill from empty (Burst intervals) for GCRA (held tokens
// hold back its refill). 0 when the rule admits nothing.
func MaxBudget(alg Algorithm, limit, burst int64, window time.Duration) time.Duration {
	if limit <= 0 {
		return 0
	}
	if alg == GCRA {
		iv := (window.Microseconds() + limit - 1) / limit
		return time.Duration(burst*iv/4) * time.Microsecond
	}
	return window / 4
}

// validateBudget reports why r's Budget cannot apply, or nil.
func (r *Rule) validateBudget() error {
	switch {
	case r.Budget < 0:
		return fmt.Errorf("budget %v is negative; give the longest a process may hold a slice (such as 1s), or leave it out", r.Budget)
	case r.Budget < MinBudget:
		return fmt.Errorf("budget %v is shorter than %v, too short for a slice to outlive its lease call", r.Budget, MinBudget)
	case r.MinGap > 0:
		return fmt.Errorf("a min gap cannot be budgeted: the gap is between events the store sees, and slices admit events it does not; leave budget or min_gap out")
	case r.Spread != 0:
		return fmt.Errorf("a spread rule cannot be budgeted: a budget answers the hot key in memory instead of spreading it; leave spread out")
	case r.Shadow:
		return fmt.Errorf("a shadow rule cannot be budgeted: a slice admits, it cannot report a would-be denial; budget the rule once it is enforced")
	}
	if limit := r.Limit; limit > 0 {
		if m := MaxBudget(r.Algorithm, limit, r.burst(limit), r.Window); r.Budget > m {
			return fmt.Errorf("budget %v is longer than %v, %s; give at most %v", r.Budget, m, budgetBoundReason(r.Algorithm), m)
		}
	}
	return nil
}

// budgetBoundReason says why MaxBudget bounds a budget for alg.
func budgetBoundReason(alg Algorithm) string {
	switch alg {
	case GCRA:
		return "a quarter of the time gcra's burst takes to refill (tokens held in a slice hold back its refill)"
	case SlidingCounter:
		return "a quarter of the window (a slice never outlives its fixed window, and a longer one is cut there)"
	}
	return "a quarter of the window (a slice counts in the window until its end plus the window: a longer one strands more of the limit)"
}

// validateBudget reports why rule r of p cannot be budgeted in p, or nil.
func (p *Policy) validateBudget(r *Rule) error {
	if r.Budget == 0 {
		return nil
	}
	switch {
	case p.Penalize:
		return fmt.Errorf("%w: policy %q rule %q: a penalize policy records denied attempts in the store, which a slice cannot; leave budget or penalize out",
			ErrInvalidPolicy, p.Name, r.Name)
	}
	for i := range p.Rules {
		if q := &p.Rules[i]; q.Spread > 1 {
			return fmt.Errorf("%w: policy %q: rule %q is budgeted and rule %q is spread; a policy takes one answer to its hot key, leave spread or budget out",
				ErrInvalidPolicy, p.Name, r.Name, q.Name)
		}
	}
	return nil
}

// budgetable reports whether a slice of c may be leased: its figures
// (after any override) keep c.Budget within MaxBudget and leave room.
func budgetable(c *store.Check) bool {
	return c.Budget > 0 && !c.Shadow && c.MinGap == 0 && c.Parts < 2 && c.Algorithm <= store.SlidingCounter &&
		c.Budget <= MaxBudget(c.Algorithm, c.Limit, c.Burst, c.Window)
}
