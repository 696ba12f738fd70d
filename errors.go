package sluice

import "errors"

// Sentinel errors for bad input. A request that fails validation changes no
// state in any store. Errors returned by the Limiter wrap these sentinels with
// the name of the offending policy, rule or attribute; test them with
// errors.Is.
var (
	// ErrInvalidCost reports a cost of zero or less.
	ErrInvalidCost = errors.New("sluice: cost must be at least 1")

	// ErrCostExceedsLimit reports a cost larger than a rule's limit: such a
	// request can never fit, so it is an error rather than a denial.
	ErrCostExceedsLimit = errors.New("sluice: cost exceeds the rule's limit and can never fit")

	// ErrEmptyPolicy reports a policy without rules.
	ErrEmptyPolicy = errors.New("sluice: policy has no rules")

	// ErrInvalidPolicy reports a policy or rule that cannot be enforced: a
	// missing name, a limit or window of zero or less, a duplicate rule name.
	ErrInvalidPolicy = errors.New("sluice: invalid policy")

	// ErrMissingAttribute reports a request that lacks an attribute named in
	// a rule's By list.
	ErrMissingAttribute = errors.New("sluice: missing attribute")

	// ErrUnknownPolicy reports a policy name that is not configured.
	ErrUnknownPolicy = errors.New("sluice: unknown policy")

	// ErrStoreClosed reports a call on a store after Close.
	ErrStoreClosed = errors.New("sluice: store is closed")
)
