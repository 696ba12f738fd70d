package sluice

import (
	"maps"
	"slices"
	"sync/atomic"
	"unsafe"

	"github.com/sluicerate/sluice/store"
)

// Compiled policies. Validating a policy, and working out what of it does
// not depend on the request, gives the same answer on every call with the
// same policy; it is done once, at the policy's first use, and the result
// (a compiled policy) is kept in the policy itself, for every Limiter.
// From then on the policy is frozen: the compiled policy holds a deep
// copy of it as it was validated, and a change made to the policy later has
// no effect. A copy of a used policy (q := *p) is another policy: it is
// compiled at its own first use, as it stands then. A policy that fails
// validation is not frozen: it is validated again at its next use.

// compiled is a validated policy and what resolving its requests needs
// that does not depend on the request.
type compiled struct {
	policy *Policy // the policy compiled, which keeps it
	snap   Policy  // a deep copy of *policy as validated

	// shared is the number of attributes every rule goes by
	// (Policy.SharedAttributes); sharedPrefix reports that they are the
	// first of the first rule's By, in its order, so that the first
	// rule's values begin with them.
	shared       int
	sharedPrefix bool

	// concurrent reports that a rule is a concurrency rule, budgeted
	// that a rule has a Budget, credits that a rule is a credits rule.
	concurrent, budgeted, credits bool

	// plain holds, per rule, its check as resolve makes it, but for its
	// values and cost, when it does not depend on the request: a rule that
	// always applies, with no overrides, no spread and no concurrency
	// (Rule zero otherwise). Without runtime overrides, resolve copies it.
	// Its Cost is 1, Allow's: the one-check road hands it to a
	// store.CheckDecider as it is for a request of that cost.
	plain []store.Check

	// one reports a policy of one plain rule (see plain) that is not
	// Shadow, has no Budget, and does not cache denials: its requests
	// take the one-check road (one.go) unless runtime overrides apply.
	one bool
}

// compile validates p and returns its compiled form, or the error
// Validate returns.
func compile(p *Policy) (*compiled, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	c := &compiled{policy: p, snap: copyPolicy(p)}
	shared := p.SharedAttributes()
	c.shared = len(shared)
	c.sharedPrefix = slices.Equal(shared, p.Rules[0].By[:len(shared)])
	c.concurrent = slices.ContainsFunc(p.Rules, func(r Rule) bool { return r.concurrent() })
	// A store leases no slices beside a calendar quota or a credits rule:
	// such a policy's budgeted rules are decided per request.
	c.budgeted = slices.ContainsFunc(p.Rules, func(r Rule) bool { return r.Budget > 0 }) &&
		!slices.ContainsFunc(p.Rules, func(r Rule) bool { return r.quota() })
	c.plain = make([]store.Check, len(p.Rules))
	for i := range c.snap.Rules {
		r := &c.snap.Rules[i]
		if r.conditional() || r.concurrent() || r.Spread > 1 || r.Covers != "" {
			continue
		}
		f, err := r.overridden(r.Limit, Override{}, false)
		if err != nil {
			return nil, err // not reached: overridden fails only with an override
		}
		c.plain[i] = store.Check{Rule: r.Name, Limit: f.limit, Window: f.window, MinGap: f.minGap,
			Shadow: r.Shadow, Algorithm: r.Algorithm, Burst: f.burst, Budget: r.Budget, Cost: 1}
		r.setQuota(&c.plain[i], 0)
	}
	c.credits = slices.ContainsFunc(p.Rules, func(r Rule) bool { return r.Algorithm == Credits })
	c.one = len(p.Rules) == 1 && c.plain[0].Rule != "" && !c.plain[0].Shadow && c.plain[0].Budget == 0 && !p.CacheDenials
	return c, nil
}

// covered reports whether rule i of the policy is a calendar quota that a
// credits rule covers (Rule.Covers): a cost above its limit may be paid
// for by the credits.
func (c *compiled) covered(i int) bool {
	if !c.credits || c.snap.Rules[i].Period == noPeriod {
		return false
	}
	name := c.snap.Rules[i].Name
	return slices.ContainsFunc(c.snap.Rules[i+1:], func(r Rule) bool { return r.Covers == name })
}

// compiled returns p compiled, freezing it at its first use (see
// Compiled policies above), or the error Validate returns.
func (p *Policy) compiled() (*compiled, error) {
	if p == nil {
		return nil, p.Validate()
	}
	old := (*compiled)(atomic.LoadPointer(&p.frozen))
	if old != nil && old.policy == p {
		return old, nil
	}
	c, err := compile(p)
	if err != nil {
		return nil, err
	}
	// Two first uses at once compile it twice; the first to store wins,
	// so that every Limiter decides with one compiled policy.
	if !atomic.CompareAndSwapPointer(&p.frozen, unsafe.Pointer(old), unsafe.Pointer(c)) {
		if won := (*compiled)(atomic.LoadPointer(&p.frozen)); won != nil && won.policy == p {
			return won, nil
		}
	}
	return c, nil
}

// copyPolicy returns a deep copy of p: no slice or map shared with p, and
// not frozen. It reads p's fields one by one, not p.frozen, which another
// first use may be setting.
func copyPolicy(p *Policy) Policy {
	cp := Policy{Name: p.Name, Rules: p.Rules, Penalize: p.Penalize, Shadow: p.Shadow, CacheDenials: p.CacheDenials}
	cp.Rules = slices.Clone(p.Rules)
	for i := range cp.Rules {
		r := &cp.Rules[i]
		r.By, r.Unless, r.Match = slices.Clone(r.By), slices.Clone(r.Unless), maps.Clone(r.Match)
		r.Overrides = slices.Clone(r.Overrides)
		for j := range r.Overrides {
			r.Overrides[j].Match = maps.Clone(r.Overrides[j].Match)
		}
	}
	return cp
}

// same is a == b, without comparing the bytes of strings that share them:
// a compiled policy's checks share their rule names with its copy of the
// policy.
func same(a, b string) bool {
	return len(a) == len(b) && (unsafe.StringData(a) == unsafe.StringData(b) || a == b)
}
