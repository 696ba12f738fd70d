package envoy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.yaml.in/yaml/v3"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/config"
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
//	      name: NAME
//	      replaces: [{name: NAME}]
//	      unlimited: true
//	    rate_limits: [...]       # sluice: several limits, each as rate_limit
//	    shadow_mode: bool
//	    quota_mode: bool
//	    detailed_metric: bool
//	    value_to_metric: bool
//	    share_threshold: bool
//	    descriptors: [...]       # nested
var (
	rootKeys       = []string{"domain", "descriptors"}
	descriptorKeys = []string{"key", "value", "rate_limit", "rate_limits", "descriptors", "shadow_mode", "quota_mode",
		"detailed_metric", "value_to_metric", "share_threshold"}
	limitKeys = []string{"unit", "requests_per_unit", "unit_multiplier", "window", "algorithm", "name", "replaces", "unlimited"}
)

// upstreamKeys are the keys envoyproxy/ratelimit accepts anywhere in a
// file (and ignores where its structs have no such field).
var upstreamKeys = map[string]bool{"domain": true, "key": true, "value": true, "descriptors": true, "rate_limit": true,
	"unit": true, "requests_per_unit": true, "unlimited": true, "shadow_mode": true, "quota_mode": true, "name": true,
	"replaces": true, "detailed_metric": true, "value_to_metric": true, "share_threshold": true, "unit_multiplier": true}

type decoder struct {
	file string
	cfg  *Config
	opts LoadOptions
	errs ErrorList
}

func (d *decoder) where(n *yaml.Node) string {
	return fmt.Sprintf("%s:%d:%d", d.file, n.Line, n.Column)
}

func (d *decoder) errorf(n *yaml.Node, format string, args ...any) {
	e := &Error{File: d.file, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	d.errs = append(d.errs, e)
}

func (d *decoder) note(n *yaml.Node, format string, args ...any) {
	d.cfg.Notes = append(d.cfg.Notes, d.where(n)+": "+fmt.Sprintf(format, args...))
}

// deref follows aliases.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func (d *decoder) decode(data []byte) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			d.errorf(nil, "the file is empty; a configuration file has a domain and its descriptors")
			return
		}
		d.syntaxError(err)
		return
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		d.errorf(&extra, "a second YAML document; put each domain in a file of its own")
		return
	}
	root := deref(&doc)
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = deref(root.Content[0])
	}
	if root.Kind != yaml.MappingNode {
		d.errorf(root, "the file is not a mapping; start it with \"domain: NAME\" and \"descriptors:\"")
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
		d.errorf(at, "the file has no domain; add \"domain: NAME\" (the domain Envoy's rate-limit filter sends)")
		return
	}
	top := d.cfg.domains[domain]
	switch {
	case top == nil:
		top = &node{children: map[string]*node{}, where: d.where(domainNode)}
		d.cfg.domains[domain] = top
	case !d.opts.MergeDomains:
		d.errorf(domainNode, "domain %q is already configured at %s; give each domain one file, or merge them with MERGE_DOMAIN_CONFIG=true", domain, top.where)
		return
	}
	if descs != nil {
		d.descriptors(top, descs, "")
	}
}

// syntaxError reports a YAML syntax error at its line.
func (d *decoder) syntaxError(err error) {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "yaml: ")
	line := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.IndexByte(rest, ':'); i > 0 {
			if n, err := strconv.Atoi(rest[:i]); err == nil {
				line, msg = n, strings.TrimSpace(rest[i+1:])
			}
		}
	}
	d.errs = append(d.errs, &Error{File: d.file, Line: line, Column: 1, Msg: "YAML: " + msg})
}

// fields calls f for each key of the mapping n that is in valid, and
// reports the others: unknown keys are errors (with a suggestion), keys
// envoyproxy/ratelimit accepts but ignores at this place are notes.
func (d *decoder) fields(n *yaml.Node, what string, valid []string, f func(k string, v *yaml.Node)) {
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, v := deref(n.Content[i]), deref(n.Content[i+1])
		if kn.Kind != yaml.ScalarNode {
			d.errorf(kn, "a key of %s is not text", what)
			continue
		}
		k := kn.Value
		if seen[k] {
			d.errorf(kn, "%q is set twice in %s; keep one", k, what)
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
		case ok:
			f(k, v)
		case upstreamKeys[k]:
			d.note(kn, "%q has no meaning in %s and is ignored, as envoyproxy/ratelimit ignores it; %s", k, what, config.Suggest(k, valid))
		default:
			d.errorf(kn, "unknown key %q in %s; %s", k, what, config.Suggest(k, valid))
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
		d.errorf(n, "%s", notList)
		return nil, false
	}
	var out []*yaml.Node
	for _, item := range n.Content {
		if item = deref(item); item.Kind != yaml.MappingNode {
			d.errorf(item, "%s", notMapping)
			continue
		}
		out = append(out, item)
	}
	return out, true
}

// descriptor loads one descriptor into parent.
func (d *decoder) descriptor(parent *node, n *yaml.Node, prefix string) {
	ch := &node{children: map[string]*node{}, where: d.where(n)}
	var keyNode, valueNode, rl, rls, descs, shareNode *yaml.Node
	d.fields(n, "a descriptor", descriptorKeys, func(k string, v *yaml.Node) {
		switch k {
		case "key":
			keyNode = v
		case "value":
			valueNode = v
		case "rate_limit":
			rl = v
		case "rate_limits":
			rls = v
		case "descriptors":
			descs = v
		case "shadow_mode":
			ch.shadow = d.boolean(v, k)
		case "quota_mode":
			ch.quota = d.boolean(v, k)
		case "detailed_metric":
			ch.detailed = d.boolean(v, k)
		case "value_to_metric":
			ch.toMetric = d.boolean(v, k)
		case "share_threshold":
			ch.share, shareNode = d.boolean(v, k), v
		}
	})
	if keyNode != nil {
		ch.key = d.str(keyNode, "key")
	}
	if ch.key == "" {
		at := n
		if keyNode != nil {
			at = keyNode
		}
		d.errorf(at, "a descriptor has no key; every descriptor needs \"key: NAME\"")
		return
	}
	if valueNode != nil {
		ch.value = d.str(valueNode, "value")
	}
	final := ch.key
	if ch.value != "" {
		final += "_" + ch.value
	}
	ch.path = prefix + final
	if old := parent.children[final]; old != nil {
		d.errorf(keyNode, "descriptor %q is already defined at %s; each key and value appears once per level", ch.path, old.where)
		return
	}
	if ch.share && !strings.HasSuffix(final, "*") {
		d.errorf(shareNode, "share_threshold needs a wildcard value (ending in '*'), but descriptor %q has none", ch.path)
	}
	if rl != nil {
		ch.limited = true
		d.limit(ch, rl)
	}
	if rls != nil {
		if rls.Kind != yaml.SequenceNode {
			d.errorf(rls, "rate_limits is not a list; write each limit as \"- {unit: minute, requests_per_unit: 10}\"")
		} else {
			for _, item := range rls.Content {
				ch.limited = true
				d.limit(ch, deref(item))
			}
		}
	}
	if ch.unlimited && len(ch.limits) > 0 {
		d.errorf(n, "descriptor %q is unlimited and has limits; keep one", ch.path)
	}
	if ch.quota {
		d.note(n, "quota_mode on %q: an over-limit answer is reported as OK, as shadow_mode is (the windows still count); dynamic metadata is not sent", ch.path)
	}
	if ch.toMetric {
		d.note(n, "value_to_metric on %q is honoured in the ratelimit_service_* metrics' key labels only", ch.path)
	}
	if strings.HasSuffix(final, "*") {
		parent.wildcards = append(parent.wildcards, final)
	}
	parent.children[final] = ch
	parent.order = append(parent.order, final)
	if descs != nil {
		d.descriptors(ch, descs, ch.path+".")
	}
}

// limit loads one rate_limit block into n.
func (d *decoder) limit(n *node, v *yaml.Node) {
	if v.Kind != yaml.MappingNode {
		d.errorf(v, "rate_limit is not a mapping; write \"rate_limit: {unit: minute, requests_per_unit: 10}\"")
		return
	}
	var (
		l                                                    = Limit{Multiplier: 1}
		unitNode, reqNode, multNode, windowNode, unlimitNode *yaml.Node
		unlimited                                            bool
	)
	d.fields(v, "a rate_limit", limitKeys, func(k string, x *yaml.Node) {
		switch k {
		case "unit":
			unitNode = x
		case "requests_per_unit":
			reqNode = x
			l.Requests = uint32(d.integer(x, k, math.MaxUint32))
		case "unit_multiplier":
			multNode = x
			l.Multiplier = uint32(d.integer(x, k, math.MaxUint32))
			if l.Multiplier == 0 {
				d.errorf(x, "unit_multiplier is 0; use 1 or more (the window is that many units)")
			}
		case "window":
			windowNode = x
			w, err := parseDuration(d.str(x, k))
			if err != nil {
				d.errorf(x, "window: %v", err)
			}
			l.Window = w
		case "algorithm":
			a, err := sluice.ParseAlgorithm(d.str(x, k))
			if err != nil {
				d.errorf(x, "unknown algorithm %q; use log (the default), gcra or sliding-counter", x.Value)
			}
			l.Algorithm = a
		case "name":
			l.Name = d.str(x, k)
		case "unlimited":
			unlimitNode = x
			unlimited = d.boolean(x, k)
		case "replaces":
			items, ok := d.mappings(x, "replaces is not a list; write \"replaces: [{name: NAME}]\"",
				"a replaces entry is not a mapping; write \"- name: NAME\"")
			if !ok {
				return
			}
			for _, item := range items {
				name := ""
				d.fields(item, "a replaces entry", []string{"name"}, func(_ string, nv *yaml.Node) { name = d.str(nv, "name") })
				switch {
				case name == "":
					d.errorf(item, "a replaces entry has no name; name the rate_limit it replaces")
				default:
					l.Replaces = append(l.Replaces, name)
				}
			}
		}
	})
	for _, r := range l.Replaces {
		if r == l.Name && r != "" {
			d.errorf(v, "rate_limit %q replaces itself; replaces names other limits", r)
		}
	}
	unit := rlsv3.RateLimitResponse_RateLimit_UNKNOWN
	if unitNode != nil {
		u, ok := rlsv3.RateLimitResponse_RateLimit_Unit_value[strings.ToUpper(d.str(unitNode, "unit"))]
		if !ok || u == 0 {
			d.errorf(unitNode, "invalid rate limit unit %q; use second, minute, hour, day, week, month or year (or window: for any length)", unitNode.Value)
			return
		}
		unit = rlsv3.RateLimitResponse_RateLimit_Unit(u)
	}
	if unlimited {
		if unitNode != nil || windowNode != nil || reqNode != nil {
			d.errorf(unlimitNode, "an unlimited rate_limit has no unit, window or requests_per_unit; remove them or unlimited")
		}
		n.unlimited = true
		return
	}
	switch {
	case unitNode != nil && windowNode != nil:
		d.errorf(windowNode, "a rate_limit has a unit and a window; keep one (unit with unit_multiplier, or window)")
		return
	case windowNode != nil:
		if multNode != nil {
			d.errorf(multNode, "unit_multiplier goes with unit, not window; write the whole length in window")
		}
		if l.Window < time.Microsecond {
			return
		}
		l.Unit, l.Multiplier = unitOf(l.Window)
	case unitNode != nil:
		l.Unit = unit
		l.Window = unitLengths[unit] * time.Duration(max(l.Multiplier, 1))
	default:
		d.errorf(v, "a rate_limit has no unit; add \"unit: second\" (or minute, hour, day), or window: for any length")
		return
	}
	if l.Algorithm == sluice.GCRA && l.Requests > 0 && l.Window/time.Microsecond < time.Duration(l.Requests) {
		d.errorf(v, "%d per %v is more than one request per µs, which gcra cannot hold; use the log", l.Requests, l.Window)
		return
	}
	n.limits = append(n.limits, l)
}

func (d *decoder) str(n *yaml.Node, what string) string {
	if n.Kind != yaml.ScalarNode {
		d.errorf(n, "%s is not text", what)
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
		d.errorf(n, "%s is %q; use true or false", what, n.Value)
	}
	return b
}

func (d *decoder) integer(n *yaml.Node, what string, most uint64) uint64 {
	var v uint64
	if n.Kind != yaml.ScalarNode || n.Decode(&v) != nil || v > most {
		d.errorf(n, "%s is %q; use a whole number from 0 to %d", what, n.Value, most)
		return 0
	}
	return v
}

// parseDuration reads a Go duration with a unit, or whole days ("1d",
// "2d12h"), from 1µs to a year.
func parseDuration(s string) (time.Duration, error) {
	days := time.Duration(0)
	rest := s
	if i := strings.IndexByte(s, 'd'); i > 0 {
		n, err := strconv.Atoi(s[:i])
		if err == nil {
			days, rest = time.Duration(n)*24*time.Hour, s[i+1:]
		}
	}
	var w time.Duration
	if rest != "" {
		var err error
		if w, err = time.ParseDuration(rest); err != nil {
			return 0, fmt.Errorf("%q is not a duration; write one with a unit, such as 90s, 15m, 1h30m or 1d", s)
		}
	}
	w += days
	if w < time.Microsecond || w > 366*24*time.Hour {
		return 0, fmt.Errorf("%q is out of range; a window is from 1µs to a year", s)
	}
	return w, nil
}
