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
// same policy; a Limiter does it once per policy and keeps the result, a
// compiled policy, in a small cache keyed by the policy's address.
//
// A compiled policy holds a deep copy of the policy as it was validated,
// and each use compares the policy with it (field by field, which costs a
// fraction of validating it): a policy changed between two calls is
// validated and compiled again, so a Limiter never decides with figures
// other than the policy's own, nor with a policy that is no longer valid.
// A policy built anew for each call is compiled for each call, as it was
// validated for each call before; the cache holds at most policyCacheSize
// policies, so it does not grow with them.

// compiled is a validated policy and what resolving its requests needs
// that does not depend on the request.
type compiled struct {
	policy *Policy // the policy compiled: the cache's key
	snap   Policy  // a deep copy of *policy as validated

	// shared is the number of attributes every rule goes by
	// (Policy.SharedAttributes); sharedPrefix reports that they are the
	// first of the first rule's By, in its order, so that the first
	// rule's values begin with them.
	shared       int
	sharedPrefix bool

	// concurrent reports that a rule is a concurrency rule, budgeted
	// that a rule has a Budget.
	concurrent, budgeted bool

	// plain holds, per rule, its check as resolve makes it, but for its
	// values and cost, when it does not depend on the request: a rule that
	// always applies, with no overrides, no spread and no concurrency
	// (Rule zero otherwise). Without runtime overrides, resolve copies it.
	plain []store.Check
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
	c.budgeted = slices.ContainsFunc(p.Rules, func(r Rule) bool { return r.Budget > 0 })
	c.plain = make([]store.Check, len(p.Rules))
	for i := range c.snap.Rules {
		r := &c.snap.Rules[i]
		if r.conditional() || r.concurrent() || r.Spread > 1 {
			continue
		}
		f, err := r.overridden(r.Limit, RuntimeOverride{}, false)
		if err != nil {
			return nil, err // not reached: overridden fails only with an override
		}
		c.plain[i] = store.Check{Rule: r.Name, Limit: f.limit, Window: f.window, MinGap: f.minGap,
			Shadow: r.Shadow, Algorithm: r.Algorithm, Burst: f.burst, Budget: r.Budget}
	}
	return c, nil
}

// current reports whether p still equals the policy c compiled.
func (c *compiled) current(p *Policy) bool {
	return c.policy == p && samePolicy(&c.snap, p)
}

// policyCacheSize is the number of compiled policies a Limiter keeps.
const policyCacheSize = 256

// policyCache is a Limiter's compiled policies: a table indexed by a hash
// of a policy's address, where a policy takes one of two slots. It is safe
// for concurrent use.
type policyCache struct {
	slots [policyCacheSize]atomic.Pointer[compiled]
}

// get returns p compiled, from the cache when it holds p unchanged.
func (pc *policyCache) get(p *Policy) (*compiled, error) {
	h := uint64(uintptr(unsafe.Pointer(p))) * 0x9e3779b97f4a7c15 >> 56
	a, b := &pc.slots[h], &pc.slots[h^1]
	if c := a.Load(); c != nil && c.current(p) {
		return c, nil
	}
	if c := b.Load(); c != nil && c.current(p) {
		return c, nil
	}
	c, err := compile(p)
	if err != nil {
		return nil, err
	}
	// The slot p had, else an empty one, else the first.
	switch old := b.Load(); {
	case old != nil && old.policy == p, old == nil && a.Load() != nil:
		b.Store(c)
	default:
		a.Store(c)
	}
	return c, nil
}

// copyPolicy returns a deep copy of p: no slice or map shared with p.
func copyPolicy(p *Policy) Policy {
	cp := *p
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

// samePolicy reports whether a and b hold the same figures: every field,
// and every field of every rule and override.
func samePolicy(a, b *Policy) bool {
	if !same(a.Name, b.Name) || a.Penalize != b.Penalize || a.Shadow != b.Shadow || a.CacheDenials != b.CacheDenials ||
		len(a.Rules) != len(b.Rules) {
		return false
	}
	for i := range a.Rules {
		if !sameRule(&a.Rules[i], &b.Rules[i]) {
			return false
		}
	}
	return true
}

// sameRule reports whether a and b hold the same figures.
func sameRule(a, b *Rule) bool {
	if a.Limit != b.Limit || a.Window != b.Window || a.MinGap != b.MinGap ||
		a.Algorithm != b.Algorithm || a.Burst != b.Burst || a.Optional != b.Optional || a.Shadow != b.Shadow ||
		a.Spread != b.Spread || a.Budget != b.Budget || a.Concurrency != b.Concurrency || a.Lease != b.Lease ||
		!same(a.Name, b.Name) || !same(a.SpreadBy, b.SpreadBy) ||
		!sameStrings(a.By, b.By) || !sameStrings(a.Unless, b.Unless) || !sameMatch(a.Match, b.Match) ||
		len(a.Overrides) != len(b.Overrides) {
		return false
	}
	for i := range a.Overrides {
		x, y := &a.Overrides[i], &b.Overrides[i]
		if x.Limit != y.Limit || x.Unlimited != y.Unlimited || !sameMatch(x.Match, y.Match) {
			return false
		}
	}
	return true
}

// sameMatch is maps.Equal without its iterator's set-up for empty maps,
// which most rules' are: it was a third of the check of a one-rule policy.
func sameMatch(a, b map[string]string) bool {
	return len(a) == len(b) && (len(a) == 0 || maps.Equal(a, b))
}

// same is a == b, without comparing the bytes of strings that share them:
// a compiled policy's copy shares its strings with the policy, unless the
// policy was given new ones since, and its checks' rule names are its own.
func same(a, b string) bool {
	return len(a) == len(b) && (unsafe.StringData(a) == unsafe.StringData(b) || a == b)
}

// sameStrings is slices.Equal by same.
func sameStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !same(a[i], b[i]) {
			return false
		}
	}
	return true
}
