package overrides

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/envoy"
)

// Target is a rule an override may apply to: a rule of a sluice policy,
// or a limit of an Envoy domain.
type Target struct {
	// Policy is the policy, or Domain the Envoy domain.
	Policy string `json:"policy,omitempty"`
	Domain string `json:"domain,omitempty"`

	// Rule is the rule as the Limiter names it, with its figures: Name,
	// Limit, Window, MinGap, Algorithm, Burst and Spread are checked.
	Rule sluice.Rule `json:"-"`

	// By names the values of a window, in order: the rule's attributes,
	// or the keys of the domain's descriptor.
	By []string `json:"by"`
}

// targetJSON is a Target as the admin API lists it.
type targetJSON struct {
	Policy    string   `json:"policy,omitempty"`
	Domain    string   `json:"domain,omitempty"`
	Rule      string   `json:"rule"`
	By        []string `json:"by"`
	Limit     int64    `json:"limit"`
	Window    Duration `json:"window"`
	Algorithm string   `json:"algorithm"`
}

func (t *Target) json() targetJSON {
	by := t.By
	if by == nil {
		by = []string{}
	}
	return targetJSON{Policy: t.Policy, Domain: t.Domain, Rule: t.Rule.Name, By: by, Limit: t.Rule.Limit,
		Window: Duration(t.Rule.Window), Algorithm: t.Rule.Algorithm.String()}
}

// policyName is the Limiter's name of t's policy.
func (t *Target) policyName() string {
	if t.Domain != "" {
		return "envoy/" + t.Domain
	}
	return t.Policy
}

// PolicyTargets returns the targets of the policies: every rule of each.
func PolicyTargets(policies []sluice.Policy) []Target {
	var ts []Target
	for i := range policies {
		p := &policies[i]
		for j := range p.Rules {
			ts = append(ts, Target{Policy: p.Name, Rule: p.Rules[j], By: p.Rules[j].By})
		}
	}
	return ts
}

// ruleKey names a rule of a policy, as the Limiter does.
type ruleKey struct{ policy, rule string }

// catalog is the targets by rule.
type catalog map[ruleKey]*Target

func newCatalog(ts []Target) catalog {
	c := make(catalog, len(ts))
	for i := range ts {
		t := &ts[i]
		c[ruleKey{t.policyName(), t.Rule.Name}] = t
	}
	return c
}

// check reports why o cannot apply to the rules of c, or "" when it can.
func (c catalog) check(o *Override) string {
	t := c[ruleKey{o.PolicyOf(), o.Rule}]
	if t == nil {
		var rules []string
		for k := range c {
			if k.policy == o.PolicyOf() {
				rules = append(rules, k.rule)
			}
		}
		if len(rules) == 0 {
			return fmt.Sprintf("%s is not configured", o.target())
		}
		slices.Sort(rules)
		return fmt.Sprintf("%s has no rule %q; its rules are %s", o.target(), o.Rule, strings.Join(rules, ", "))
	}
	if len(o.Values) != len(t.By) {
		return fmt.Sprintf("rule %q goes by %d values %q; give one value per attribute, in that order, not %d",
			o.Rule, len(t.By), t.By, len(o.Values))
	}
	r := t.Rule
	r.Limit = *o.Limit
	if o.Window > 0 {
		r.Window = time.Duration(o.Window)
	}
	if o.MinGap > 0 {
		r.MinGap = time.Duration(o.MinGap)
	}
	switch {
	case o.Burst > 0 && r.Algorithm != sluice.GCRA:
		return fmt.Sprintf("rule %q keeps the %v, which takes no burst", o.Rule, r.Algorithm)
	case o.Burst > 0:
		r.Burst = o.Burst
	}
	p := sluice.Policy{Name: o.PolicyOf(), Rules: []sluice.Rule{r}}
	if err := p.Validate(); err != nil {
		return err.Error()
	}
	return ""
}

// EnvoyTargets returns the targets of an Envoy configuration: every limit
// of each domain (none for nil).
func EnvoyTargets(c *envoy.Config) []Target {
	if c == nil {
		return nil
	}
	var ts []Target
	for _, r := range c.Rules() {
		rule := sluice.Rule{Name: r.Name, Limit: int64(r.Limit.Requests), Window: r.Limit.Window, Algorithm: r.Limit.Algorithm}
		if rule.Limit == 0 {
			rule.Algorithm = sluice.Log
		}
		ts = append(ts, Target{Domain: r.Domain, Rule: rule, By: r.Keys})
	}
	return ts
}
