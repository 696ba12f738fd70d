package envoy

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/sluicerate/sluice/internal/yamlfile"
)

// The file's schema. envoyproxy/ratelimit's keys, with sluice's own
// (window, algorithm, rate_limits) beside them:
//
//	domain: NAME
//	descriptors:
//	  - key: KEY                 # required
//	    value: VALUE             # optional; "prefix*" matches by prefix
//	    rate_limit:              # optional
//	      unit: second|minute|hour|day|week|month|year
//	      requests_per_unit: N
//	      unit_multiplier: M     # the window is M units
//	      window: 90s            # sluice: any length, instead of unit
//	      algorithm: log         # sluice: log (default), gcra, sliding-counter
//	      budget: 2s             # sluice: lease slices of the window (docs/budgets.md)
//	      name: NAME
//	      replaces: [{name: NAME}]
//	      unlimited: true
//	    rate_limits: [...]       # sluice: several limits, each as rate_limit
//	    shadow_mode: bool
//	    quota_mode: bool
//	    detailed_metric: bool
//	    value_to_metric: bool
//	    share_threshold: bool
//	    metadata: {...}          # any mapping: RESPONSE_DYNAMIC_METADATA's
//	    descriptors: [...]       # nested
var (
	rootKeys       = []string{"domain", "descriptors"}
	descriptorKeys = []string{"key", "value", "rate_limit", "rate_limits", "descriptors", "shadow_mode", "quota_mode",
		"detailed_metric", "value_to_metric", "share_threshold", "metadata"}
	limitKeys = []string{"unit", "requests_per_unit", "unit_multiplier", "window", "algorithm", "budget", "name", "replaces", "unlimited"}
)

// upstreamKeys are the keys envoyproxy/ratelimit accepts anywhere in a
// file (and ignores where its structs have no such field).
var upstreamKeys = map[string]bool{"domain": true, "key": true, "value": true, "descriptors": true, "rate_limit": true,
	"unit": true, "requests_per_unit": true, "unlimited": true, "shadow_mode": true, "quota_mode": true, "name": true,
	"replaces": true, "detailed_metric": true, "value_to_metric": true, "share_threshold": true, "unit_multiplier": true, "metadata": true}

// decoder reads one file into the Config, collecting every problem found.
type decoder struct {
	yamlfile.File
	cfg  *Config
	opts LoadOptions
}

func (d *decoder) where(n *yaml.Node) string {
	return fmt.Sprintf("%s:%d:%d", d.Name, n.Line, n.Column)
}

func (d *decoder) note(n *yaml.Node, format string, args ...any) {
	d.cfg.Notes = append(d.cfg.Notes, d.where(n)+": "+fmt.Sprintf(format, args...))
}

func (d *decoder) decode(data []byte) {
	root := d.Resolve(d.Document(data, "the file is empty; a configuration file has a domain and its descriptors",
		"a second YAML document; put each domain in a file of its own"))
	if root == nil {
		return
	}
	if root.Kind != yaml.MappingNode {
		d.Errorf(root, "the file is not a mapping; start it with \"domain: NAME\" and \"descriptors:\"")
		return
	}
	var domainNode, descs *yaml.Node
	d.fields(root, "the file", rootKeys, func(k string, v *yaml.Node) {
		switch k {
		case "domain":
			domainNode = v
		case "descriptors":
			descs = v
		}
	})
	domain := ""
	if domainNode != nil {
		domain = d.str(domainNode, "domain")
	}
	if domain == "" {
		at := root
		if domainNode != nil {
			at = domainNode
		}
		d.Errorf(at, "the file has no domain; add \"domain: NAME\" (the domain Envoy's rate-limit filter sends)")
		return
	}
	top := d.cfg.domains[domain]
	switch {
	case top == nil:
		top = &node{children: map[string]*node{}, where: d.where(domainNode)}
		d.cfg.domains[domain] = top
	case !d.opts.MergeDomains:
		d.Errorf(domainNode, "domain %q is already configured at %s; give each domain one file, or merge them with MERGE_DOMAIN_CONFIG=true", domain, top.where)
		return
	}
	if descs != nil {
		d.descriptors(top, descs, "")
	}
}

// fields calls f for each key of the mapping n that is in valid and not
// null (a null value is the key's absence), and reports the others:
// unknown keys are errors (with a suggestion), keys envoyproxy/ratelimit
// accepts but ignores at this place are notes.
func (d *decoder) fields(n *yaml.Node, what string, valid []string, f func(k string, v *yaml.Node)) {
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, v := d.Resolve(n.Content[i]), d.Resolve(n.Content[i+1])
		if kn == nil || v == nil {
			return
		}
		if kn.Kind != yaml.ScalarNode {
			d.Errorf(kn, "a key of %s is not text", what)
			continue
		}
		k := kn.Value
		if seen[k] {
			d.Errorf(kn, "%q is set twice in %s; keep one", k, what)
			continue
		}
		seen[k] = true
		ok := false
		for _, name := range valid {
			if name == k {
				ok = true
			}
		}
		switch {
		case ok && v.Kind == yaml.ScalarNode && v.Tag == "!!null":
			// "rate_limit: null", as Envoy Gateway writes a descriptor
			// without one: absent, as envoyproxy/ratelimit reads it.
		case ok:
			f(k, v)
		case upstreamKeys[k]:
			d.note(kn, "%q has no meaning in %s and is ignored, as envoyproxy/ratelimit ignores it; %s", k, what, yamlfile.Suggest(k, valid))
		default:
			d.Errorf(kn, "unknown key %q in %s; %s", k, what, yamlfile.Suggest(k, valid))
		}
	}
}

// descriptors loads a list of descriptors below parent.
func (d *decoder) descriptors(parent *node, n *yaml.Node, prefix string) {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return
	}
	items, _ := d.mappings(n, "descriptors is not a list; write each descriptor as \"- key: NAME\"",
		"a descriptor is not a mapping; write \"- key: NAME\" with an optional value and rate_limit")
	for _, item := range items {
		d.descriptor(parent, item, prefix)
	}
}

// mappings returns the mappings the list n holds, reporting n with notList
// when it is not a list (and false), and each item that is not a mapping
// with notMapping.
func (d *decoder) mappings(n *yaml.Node, notList, notMapping string) ([]*yaml.Node, bool) {
	if n.Kind != yaml.SequenceNode {
		d.Errorf(n, "%s", notList)
		return nil, false
	}
	var out []*yaml.Node
	for _, item := range n.Content {
		if item = d.Resolve(item); item == nil {
			return nil, false
		}
		if item.Kind != yaml.MappingNode {
			d.Errorf(item, "%s", notMapping)
			continue
		}
		out = append(out, item)
	}
	return out, true
}

// descriptor loads one descriptor into parent.
func (d *decoder) descriptor(parent *node, n *yaml.Node, prefix string) {
	ch := &node{children: map[string]*node{}, where: d.where(n)}
	f := d.descriptorFields(n, ch)
	keyNode := f.key
	if keyNode != nil {
		ch.key = d.str(keyNode, "key")
	}
	if ch.key == "" {
		at := n
		if keyNode != nil {
			at = keyNode
		}
		d.Errorf(at, "a descriptor has no key; every descriptor needs \"key: NAME\"")
		return
	}
	if f.value != nil {
		ch.value = d.str(f.value, "value")
	}
	final := ch.key
	if ch.value != "" {
		final += "_" + ch.value
	}
	ch.path = prefix + final
	if old := parent.children[final]; old != nil {
		d.Errorf(keyNode, "descriptor %q is already defined at %s; each key and value appears once per level", ch.path, old.where)
		return
	}
	if ch.share && !strings.HasSuffix(final, "*") {
		d.Errorf(f.share, "share_threshold needs a wildcard value (ending in '*'), but descriptor %q has none", ch.path)
	}
	if f.limit != nil {
		ch.limited = true
		d.limit(ch, f.limit)
	}
	if rls := f.limits; rls != nil {
		if rls.Kind != yaml.SequenceNode {
			d.Errorf(rls, "rate_limits is not a list; write each limit as \"- {unit: minute, requests_per_unit: 10}\"")
		} else {
			for _, item := range rls.Content {
				if item = d.Resolve(item); item == nil {
					return
				}
				ch.limited = true
				d.limit(ch, item)
			}
		}
	}
	if ch.unlimited && len(ch.limits) > 0 {
		d.Errorf(n, "descriptor %q is unlimited and has limits; keep one", ch.path)
	}
	if ch.toMetric {
		d.note(n, "value_to_metric on %q is honoured in the ratelimit_service_* metrics' key labels only", ch.path)
	}
	if strings.HasSuffix(final, "*") {
		parent.wildcards = append(parent.wildcards, final)
	}
	parent.children[final] = ch
	parent.order = append(parent.order, final)
	if f.descriptors != nil {
		d.descriptors(ch, f.descriptors, ch.path+".")
	}
}

// descriptorNodes are the keys of a descriptor that hold more than a flag,
// as written; nil when absent.
type descriptorNodes struct {
	key, value, limit, limits, descriptors, share *yaml.Node
}

// descriptorFields reads the keys of the descriptor n, its flags into ch.
func (d *decoder) descriptorFields(n *yaml.Node, ch *node) descriptorNodes {
	var f descriptorNodes
	d.fields(n, "a descriptor", descriptorKeys, func(k string, v *yaml.Node) {
		switch k {
		case "key":
			f.key = v
		case "value":
			f.value = v
		case "rate_limit":
			f.limit = v
		case "rate_limits":
			f.limits = v
		case "descriptors":
			f.descriptors = v
		case "shadow_mode":
			ch.shadow = d.boolean(v, k)
		case "quota_mode":
			ch.quota = d.boolean(v, k)
		case "detailed_metric":
			ch.detailed = d.boolean(v, k)
		case "value_to_metric":
			ch.toMetric = d.boolean(v, k)
		case "share_threshold":
			ch.share, f.share = d.boolean(v, k), v
		case "metadata":
			ch.metadata = d.metadata(v)
		}
	})
	return f
}

func (d *decoder) str(n *yaml.Node, what string) string {
	if n.Kind != yaml.ScalarNode {
		d.Errorf(n, "%s is not text", what)
		return ""
	}
	if n.Tag == "!!null" {
		return ""
	}
	return n.Value
}

func (d *decoder) boolean(n *yaml.Node, what string) bool {
	var b bool
	if n.Kind != yaml.ScalarNode || n.Decode(&b) != nil {
		d.Errorf(n, "%s is %q; use true or false", what, n.Value)
	}
	return b
}

func (d *decoder) integer(n *yaml.Node, what string, most uint64) uint64 {
	var v uint64
	if n.Kind != yaml.ScalarNode || n.Decode(&v) != nil || v > most {
		d.Errorf(n, "%s is %q; use a whole number from 0 to %d", what, n.Value, most)
		return 0
	}
	return v
}
