package envoy

import (
	"slices"

	"github.com/sluicerate/sluice"
)

// Runtime overrides (package overrides) apply to a domain's windows as to
// a policy's: the policy is PolicyName(domain), the rule a limit's name
// as the plan names its window (its descriptor path, "#2" after it for a
// second limit), the values the descriptor's values.

// Rule is one limit of a domain, as runtime overrides name it.
type Rule struct {
	Domain string
	Name   string   // the window's rule: the descriptor path, "#2" for a second limit
	Keys   []string // the descriptor's keys, in order: what the values are of
	Values []string // the descriptor's value of each key: "" any, one ending in '*' a prefix
	Limit  Limit
	Shadow bool // shadow_mode: reported, not enforced

	// Unlimited is rate_limit: {unlimited: true}: the descriptor has no
	// limit, and Limit is zero. Only Descriptors returns such a Rule.
	Unlimited bool
}

// Rules returns every limit of c's domains, by domain then file order.
func (c *Config) Rules() []Rule {
	return slices.DeleteFunc(c.Descriptors(), func(r Rule) bool { return r.Unlimited })
}

// Descriptors returns every descriptor of c's domains that has a rate_limit
// block, by domain then file order: a Rule per limit, or one Unlimited.
func (c *Config) Descriptors() []Rule {
	var out []Rule
	var walk func(domain string, keys, values []string, n *node)
	walk = func(domain string, keys, values []string, n *node) {
		for _, k := range n.order {
			ch := n.children[k]
			ks, vs := append(keys[:len(keys):len(keys)], ch.key), append(values[:len(values):len(values)], ch.value)
			switch {
			case ch.limited && ch.unlimited:
				out = append(out, Rule{Domain: domain, Name: ch.path, Keys: ks, Values: vs, Shadow: ch.shadow, Unlimited: true})
			case ch.limited:
				for j, name := range ch.rules() {
					out = append(out, Rule{Domain: domain, Name: name, Keys: ks, Values: vs, Limit: ch.limits[j], Shadow: ch.shadow})
				}
			}
			walk(domain, ks, vs, ch)
		}
	}
	for _, d := range c.Domains() {
		walk(d, nil, nil, c.domains[d])
	}
	return out
}

// applyOverrides gives each window of p the figures of its runtime
// override, when ov has one: before the windows are sorted into requests,
// so that a window whose override its hits cannot fit is impossible as
// any other.
func (p *plan) applyOverrides(ov sluice.Overrides) {
	if ov == nil {
		return
	}
	policy := PolicyName(p.domain)
	for k := range p.windows {
		c := &p.windows[k].check
		o, ok := ov.Override(policy, c.Rule, c.Values)
		if !ok {
			continue
		}
		p.windows[k].overridden = true
		c.Limit = o.Limit
		if o.Window > 0 {
			c.Window = o.Window
		}
		if o.MinGap > 0 && c.Algorithm == sluice.Log {
			c.MinGap = o.MinGap
		}
		switch {
		case c.Limit == 0:
			c.Algorithm, c.Burst = sluice.Log, 0 // a limit of 0 blocks; GCRA has no empty bucket
		case c.Algorithm == sluice.GCRA && o.Burst > 0:
			c.Burst = o.Burst
		case c.Algorithm == sluice.GCRA:
			c.Burst = c.Limit
		}
	}
}

// reported is l as a response reports the window w: l itself, or with a
// runtime override's limit and window.
func (w *pending) reported(l Limit) Limit {
	if !w.overridden {
		return l
	}
	o := RuleLimit(&sluice.LimitStatus{Limit: w.check.Limit, Window: w.check.Window})
	o.Name, o.Algorithm, o.Replaces = l.Name, w.check.Algorithm, l.Replaces
	return o
}
