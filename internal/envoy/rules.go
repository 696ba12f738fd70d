package envoy

// Rule is one limit of a domain, as runtime overrides (package overrides)
// name it, as a policy's windows: the policy PolicyName(domain), the rule
// the name of its window, the values the descriptor's values.
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
