package sluice

import (
	"errors"
	"fmt"

	"github.com/sluicerate/sluice/store"
)

// Sentinel errors for bad input. A request that fails validation changes no
// state in any store. Errors returned by the Limiter wrap these sentinels with
// the name of the offending policy, rule or attribute; test them with
// errors.Is.
var (
	// ErrInvalidCost reports a cost outside the range accepted: 1 to
	// MaxCost for a request, 0 to MaxCost for a lease's real cost.
	ErrInvalidCost = errors.New("sluice: invalid cost")

	// ErrCostExceedsLimit reports a cost larger than a rule's limit: such a
	// request can never fit, so it is an error rather than a denial.
	ErrCostExceedsLimit = errors.New("sluice: cost exceeds the rule's limit and can never fit")

	// ErrEmptyPolicy reports a policy without rules.
	ErrEmptyPolicy = errors.New("sluice: policy has no rules")

	// ErrInvalidPolicy reports a policy or rule that cannot be enforced: a
	// missing name, a negative limit, a window of zero or less, a duplicate
	// rule name, a condition that cannot hold.
	ErrInvalidPolicy = errors.New("sluice: invalid policy")

	// ErrMissingAttribute reports a request that lacks an attribute named in
	// the By list of a rule that applies to it (a rule that is not
	// Optional).
	ErrMissingAttribute = errors.New("sluice: missing attribute")

	// ErrStoreClosed reports a call on a store after Close. It is
	// store.ErrClosed, for callers that know the store only as sluice's.
	ErrStoreClosed = store.ErrClosed
)

// Sentinel errors of the scheduler. Like the others, errors returned for bad
// input wrap them with the name of the schedule or attribute, and change no
// state.
var (
	// ErrInvalidSchedule reports a schedule that cannot be used: a missing
	// name, a rate of zero, a negative MaxDelay or MaxQueue.
	ErrInvalidSchedule = errors.New("sluice: invalid schedule")

	// ErrRejected reports, from Wait, a reservation the schedule rejected
	// (its MaxDelay or MaxQueue); Reserve reports a rejection as a value.
	ErrRejected = errors.New("sluice: reservation rejected")

	// ErrDeadlineBeforeSlot reports, from Wait, that the context's deadline
	// comes before the first slot the schedule could give: nothing was
	// reserved.
	ErrDeadlineBeforeSlot = errors.New("sluice: the context's deadline is before the slot")
)

// MissingAttributeError is the error of a request that lacks an attribute
// a rule that applies to it, or a schedule, needs. It wraps
// ErrMissingAttribute; errors.As finds the attribute, so that a caller
// never reads it from the error's text.
type MissingAttributeError struct {
	// Policy and Rule name the rule that needs the attribute; both are
	// empty for a schedule's.
	Policy, Rule string

	// Schedule names the schedule that needs it; empty for a rule's.
	Schedule string

	// Attribute is the attribute the request lacks.
	Attribute string
}

// Error says what needs the attribute and how to give it.
func (e *MissingAttributeError) Error() string {
	if e.Schedule != "" {
		return fmt.Sprintf("%v: schedule %q needs attribute %q; pass it in the request's attributes", ErrMissingAttribute, e.Schedule, e.Attribute)
	}
	return fmt.Sprintf("%v: policy %q rule %q needs attribute %q; pass it in the request's attributes", ErrMissingAttribute, e.Policy, e.Rule, e.Attribute)
}

// Unwrap returns ErrMissingAttribute.
func (e *MissingAttributeError) Unwrap() error { return ErrMissingAttribute }

// ErrCircuitOpen reports that the Limiter did not call its store because
// the store failed repeatedly; the decision came from the failure policy.
var ErrCircuitOpen = errors.New("sluice: circuit open: the store failed repeatedly and is not called until the cool-down ends")
