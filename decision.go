package sluice

import "time"

// Decision is the outcome of deciding, peeking at or recording a request
// against a policy. A denial is a Decision with Allowed false, not an error.
//
// Example: a policy of global 10 and category 3 per 60s, after three
// "errors" notifications, decides a fourth "errors" notification as
// Allowed=false, DeniedBy="category", Remaining=0, RetryAfter=the time until
// the oldest "errors" entry leaves its window, and Limits holding global
// (Used 3, Remaining 7) and category (Used 3, Remaining 0).
type Decision struct {
	// Allowed reports whether the request fits every rule (always true for
	// a shadow policy).
	Allowed bool

	// Remaining is the smallest Remaining over the rules: how much more cost
	// fits right now.
	Remaining int64

	// RetryAfter is, when denied, the time until a retry of the same cost
	// could fit every rule that denied it (the largest over those rules), as
	// far as the entries present now tell; 0 when allowed.
	RetryAfter time.Duration

	// ResetAfter is the time until every window of the policy is empty.
	ResetAfter time.Duration

	// DeniedBy names the first rule, in policy order, that did not fit;
	// empty when every rule fits.
	DeniedBy string

	// Shadowed reports that the policy is in shadow mode and the request
	// would have been denied by DeniedBy.
	Shadowed bool

	// Degraded reports that the store failed and this decision was made by
	// the Limiter's failure policy instead of the store.
	Degraded bool

	// Limits holds one status per rule, in policy order.
	Limits []LimitStatus
}

// FailedClosed reports whether d is a denial made by the failure policy
// alone: the store failed and no fallback store decided, so no rule was
// checked. Serve it as "unavailable" (HTTP 503), not as a quota denial (429).
// A degraded decision from a fallback store has rule statuses and is an
// ordinary decision.
func (d *Decision) FailedClosed() bool {
	return d.Degraded && !d.Allowed && len(d.Limits) == 0
}

// LimitStatus is the state of one rule's window as seen by a decision, after
// the request was recorded if it was.
type LimitStatus struct {
	// Rule is the rule's name.
	Rule string

	// Limit and Window are the rule's.
	Limit  int64
	Window time.Duration

	// Used is the cost counted in the window.
	Used int64

	// Remaining is Limit-Used, never below zero.
	Remaining int64

	// Fits reports whether the request fit this rule (its cost and, if the
	// rule has one, its minimum gap).
	Fits bool

	// RetryAfter is, when the request did not fit, the time until a request
	// of the same cost would fit this rule; 0 when it fit.
	RetryAfter time.Duration

	// ResetAfter is the time until this rule's window is empty.
	ResetAfter time.Duration
}

// NewDecision combines per-rule statuses into a Decision: allowed when every
// rule fits, Remaining the tightest rule, RetryAfter the largest over the
// rules that do not fit, ResetAfter the largest over all rules, DeniedBy the
// first rule that does not fit. Stores build their result with it so that
// every store combines rules the same way.
func NewDecision(limits []LimitStatus) Decision {
	d := Decision{Allowed: true, Limits: limits}
	for i := range limits {
		s := &limits[i]
		if i == 0 || s.Remaining < d.Remaining {
			d.Remaining = s.Remaining
		}
		d.ResetAfter = max(d.ResetAfter, s.ResetAfter)
		if !s.Fits {
			if d.Allowed {
				d.Allowed = false
				d.DeniedBy = s.Rule
			}
			d.RetryAfter = max(d.RetryAfter, s.RetryAfter)
		}
	}
	return d
}
