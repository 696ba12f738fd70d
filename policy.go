package sluice

import (
	"fmt"
	"slices"
	"unsafe"
)

// Policy is a set of rules decided together: a request is allowed only when
// every rule that applies to it fits, and an allowed request is recorded in
// every such rule's window or in none. A global cap over a per-category cap
// is a policy of two rules.
//
// A Policy is frozen by its first use: the first call that decides with it
// validates it and keeps, in the policy, what every later call needs (its
// checks prebuilt, its modes worked out), so that no call validates it
// again. A change made to a used policy has no effect on any Limiter: to
// change the figures, build a new Policy (a copy, q := *p, made while no
// call is using p for the first time, is a new policy, frozen at its own
// first use). A policy that fails validation is not frozen, and may be
// fixed. A Policy is safe for concurrent use.
type Policy struct {
	// Name identifies the policy; it is part of every store key. Required.
	Name string

	// Rules are checked in order; the first one that does not fit is
	// reported as Decision.DeniedBy. At least one is required.
	Rules []Rule

	// Penalize records denied attempts as if they had been admitted, so a
	// client that keeps retrying while denied stays denied. Off by default:
	// a denied request consumes nothing.
	Penalize bool

	// Shadow decides and reports as usual but never denies: Decision.Allowed
	// is always true and a would-be denial is reported in Decision.Shadowed.
	// Use it to roll out a new limit and watch what it would do.
	Shadow bool

	// CacheDenials lets the Limiter answer a request from its deny cache
	// (Config.DenyCache) when the store denied the same request (the same
	// cost on the same windows) recently, without asking the store again:
	// under a flood of requests over their limit, one store call per
	// distinct request (its windows and cost) and retry period instead of
	// one per request. A cached answer
	// is Decision.Cached: the store's denial, every rule's status included,
	// its waits counted down to the instant a rule that did not fit could
	// fit; it is what the store would answer at that moment unless room was
	// freed early in the meantime (a cross-slot rollback seen by a
	// concurrent request, a Redis failover that lost admissions, windows
	// reset by hand), when it denies what the store would admit; it never
	// admits. Penalize policies, Record and Limiter.Decide do not use the
	// cache. See docs/design.md, "Deny cache". Off by default.
	CacheDenials bool

	// frozen is the policy compiled at its first use (a *compiled, see
	// compile.go), read and set atomically.
	frozen unsafe.Pointer
}

// Validate reports why p cannot be enforced: an empty name, no rules, or a
// rule that is invalid. The error wraps ErrEmptyPolicy or ErrInvalidPolicy.
func (p *Policy) Validate() error {
	if p == nil {
		return fmt.Errorf("%w: the policy is nil", ErrInvalidPolicy)
	}
	if p.Name == "" {
		return fmt.Errorf("%w: the policy has no name", ErrInvalidPolicy)
	}
	if len(p.Rules) == 0 {
		return fmt.Errorf("%w: policy %q; add at least one rule", ErrEmptyPolicy, p.Name)
	}
	for i := range p.Rules {
		r := &p.Rules[i]
		if err := r.validate(); err != nil {
			return fmt.Errorf("policy %q: %w", p.Name, err)
		}
		if err := p.validateBudget(r); err != nil {
			return err
		}
		if err := p.validateCovers(i); err != nil {
			return err
		}
		for j := range i {
			if p.Rules[j].Name == r.Name {
				return fmt.Errorf("%w: policy %q has two rules named %q", ErrInvalidPolicy, p.Name, r.Name)
			}
			if q := &p.Rules[j]; q.concurrent() && r.concurrent() && q.Lease != r.Lease {
				return fmt.Errorf("%w: policy %q: concurrency rules %q and %q have leases of %v and %v; the concurrency rules of a policy share one lease",
					ErrInvalidPolicy, p.Name, q.Name, r.Name, q.Lease, r.Lease)
			}
		}
	}
	return nil
}

// rule returns p's rule named name, or nil.
func (p *Policy) rule(name string) *Rule {
	for i := range p.Rules {
		if p.Rules[i].Name == name {
			return &p.Rules[i]
		}
	}
	return nil
}

// SharedAttributes returns the attributes named in the By list of every
// rule of p, in the order of the first rule. Stores use them to place all of
// a decision's keys together (a Redis Cluster hash tag).
func (p *Policy) SharedAttributes() []string {
	if len(p.Rules) == 0 {
		return nil
	}
	var shared []string
	for _, a := range p.Rules[0].By {
		if p.Shares(a) {
			shared = append(shared, a)
		}
	}
	return shared
}

// Shares reports whether every rule of p names attr in its By list. The
// shared attributes are those of the first rule's By that p shares.
func (p *Policy) Shares(attr string) bool {
	for i := range p.Rules {
		if !slices.Contains(p.Rules[i].By, attr) {
			return false
		}
	}
	return len(p.Rules) > 0
}
