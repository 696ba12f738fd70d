package envoy

import (
	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/store"
)

// Rule is one limit of a domain, as runtime overrides (package overrides)
// name it, as a policy's windows: the policy PolicyName(domain), the rule
// the plan's name of its window, the values the descriptor's values.
type Rule struct {
	Domain    string
	Name      string   // the window's rule: the descriptor path, "#2" for a second limit
	Keys      []string // the descriptor's keys, in order: what the values are of
	Values    []string // the descriptor's value of each key: "" any, one ending in '*' a prefix
	Limit     Limit
	Shadow    bool // shadow_mode: reported, not enforced
	Unlimited bool // rate_limit: {unlimited: true}, Limit zero: only from Descriptors
}

// Rules returns every limit of c's domains, by domain then file order;
// Descriptors adds the unlimited descriptors, a Rule each.
func (c *Config) Rules() []Rule       { return c.descriptors(false) }
func (c *Config) Descriptors() []Rule { return c.descriptors(true) }

func (c *Config) descriptors(unlimited bool) []Rule {
	var out []Rule
	var walk func(domain string, keys, values []string, n *node)
	walk = func(domain string, keys, values []string, n *node) {
		for _, k := range n.order {
			ch := n.children[k]
			r := Rule{Domain: domain, Name: ch.path, Keys: append(keys[:len(keys):len(keys)], ch.key), Values: append(values[:len(values):len(values)], ch.value), Shadow: ch.shadow, Unlimited: ch.unlimited}
			if ch.limited && ch.unlimited && unlimited {
				out = append(out, r)
			}
			for j, name := range ch.rules() {
				if r.Name, r.Limit = name, ch.limits[j]; ch.limited && !ch.unlimited {
					out = append(out, r)
				}
			}
			walk(domain, r.Keys, r.Values, ch)
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
		if c.Algorithm == store.Periodic {
			continue // a calendar period takes a limit only
		}
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
	if l.Period != store.NoPeriod {
		o.Unit, o.Multiplier, o.Window, o.Period, o.Algorithm = l.Unit, l.Multiplier, l.Window, l.Period, l.Algorithm
	}
	return o
}
