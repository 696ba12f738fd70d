package config

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicerate/sluice"
)

// maxNodes bounds the YAML nodes a file may expand to, aliases included, so
// that a file of nested aliases cannot make loading explode.
const maxNodes = 200_000

// maxRules bounds the rules of one policy and maxAttrs the attributes of
// one by or attributes list: every decision checks them all.
const (
	maxRules = 32
	maxAttrs = 32
)

// maxLimit is the largest limit a rule may have: scores and counts stay
// exact in a Redis double up to 2^53.
const maxLimit = 1 << 53

// nameRE is what policy, rule, schedule and attribute names may look like:
// they appear in store keys, metric labels and URLs.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

const nameRule = "names are 1 to 64 letters, digits, '-', '_' or '.', starting with a letter or digit"

// decoder walks a parsed YAML tree into a Config, collecting every problem
// with its position.
type decoder struct {
	file  string
	errs  ErrorList
	nodes int
}

// field is one known key of a mapping.
type field struct {
	name     string
	required string // when set, the key is required and this is how to add it
	set      func(v *yaml.Node)
}

func (d *decoder) errorf(n *yaml.Node, format string, args ...any) {
	e := &Error{File: d.file, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	d.errs = append(d.errs, e)
}

// yamlLineRE finds the line in the YAML library's syntax errors.
var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntaxError records a YAML syntax error.
func (d *decoder) syntaxError(err error) {
	for _, line := range strings.Split(err.Error(), "\n") {
		line = strings.TrimSpace(line)
		if m := yamlLineRE.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			d.errs = append(d.errs, &Error{File: d.file, Line: n, Msg: "YAML syntax: " + m[2]})
			continue
		}
		if line != "" && line != "yaml: unmarshal errors:" {
			d.errs = append(d.errs, &Error{File: d.file, Msg: "YAML syntax: " + strings.TrimPrefix(line, "yaml: ")})
		}
	}
}

func (d *decoder) decode(data []byte) *Config {
	dec := yaml.NewDecoder(strings.NewReader(string(data)))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			d.errorf(nil, "the file is empty; add a policies: list (see docs/config.md)")
		} else {
			d.syntaxError(err)
		}
		return nil
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			d.syntaxError(err)
		} else {
			d.errorf(&extra, "the file holds a second YAML document; keep one document (remove the '---' separator)")
		}
		return nil
	}
	c := &Config{File: d.file}
	root := d.resolve(&doc)
	if root == nil {
		return nil
	}
	if root.Kind == yaml.DocumentNode {
		if len(root.Content) == 0 {
			d.errorf(nil, "the file is empty; add a policies: list (see docs/config.md)")
			return nil
		}
		root = d.resolve(root.Content[0])
	}
	var policiesNode, schedulesNode *yaml.Node
	d.mapping(root, "the file", []field{
		{name: "store", set: func(v *yaml.Node) { c.Store = d.store(v) }},
		{name: "policies", set: func(v *yaml.Node) { policiesNode = v; c.Policies = d.policies(v) }},
		{name: "schedules", set: func(v *yaml.Node) { schedulesNode = v; c.Schedules = d.schedules(v) }},
		{name: "forward_auth", set: func(v *yaml.Node) { c.ForwardAuth = d.forwardAuth(v) }},
	})
	if len(d.errs) == 0 && len(c.Policies) == 0 && len(c.Schedules) == 0 {
		n := root
		if policiesNode != nil {
			n = policiesNode
		} else if schedulesNode != nil {
			n = schedulesNode
		}
		d.errorf(n, "the file defines no policies or schedules; add a policies: list with at least one policy")
	}
	if c.Store != nil && c.Store.Redis != nil && c.Store.Redis.TLS != nil {
		resolveTLSPaths(c.Store.Redis.TLS, filepath.Dir(d.file))
	}
	return c
}

// resolve follows aliases and counts nodes against maxNodes; nil when the
// budget is spent.
func (d *decoder) resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	d.nodes++
	if d.nodes > maxNodes {
		if d.nodes == maxNodes+1 {
			d.errorf(n, "the file expands to more than %d YAML nodes (nested aliases?); write it out plainly", maxNodes)
		}
		return nil
	}
	return n
}

// mapping decodes the mapping n, described as what, calling each field's set
// for the keys present and reporting unknown, repeated and missing keys.
func (d *decoder) mapping(n *yaml.Node, what string, fields []field) bool {
	n = d.resolve(n)
	if n == nil {
		return false
	}
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.name
	}
	if n.Kind != yaml.MappingNode {
		d.errorf(n, "%s must be a mapping with the fields %s", what, strings.Join(names, ", "))
		return false
	}
	seen := make(map[string]int, len(fields))
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := d.resolve(n.Content[i]), n.Content[i+1]
		if k == nil {
			return false
		}
		if k.Kind != yaml.ScalarNode {
			d.errorf(k, "%s has a key that is not a plain name; keys are field names such as %s", what, names[0])
			continue
		}
		if k.Value == "<<" {
			d.errorf(k, "merge keys (<<) are not supported in %s; write the fields out", what)
			continue
		}
		idx := -1
		for j, f := range fields {
			if f.name == k.Value {
				idx = j
				break
			}
		}
		if idx < 0 {
			d.errorf(k, "unknown field %q in %s; %s", k.Value, what, suggest(k.Value, names))
			continue
		}
		if line, dup := seen[k.Value]; dup {
			d.errorf(k, "field %q is set twice in %s (first on line %d); keep one", k.Value, what, line)
			continue
		}
		seen[k.Value] = k.Line
		fields[idx].set(v)
	}
	for _, f := range fields {
		if _, ok := seen[f.name]; !ok && f.required != "" {
			d.errorf(n, "%s has no %s; add %s", what, f.name, f.required)
		}
	}
	return true
}

// scalar returns n resolved when it is a non-null scalar, reporting
// otherwise.
func (d *decoder) scalar(n *yaml.Node, what, example string) (*yaml.Node, bool) {
	n = d.resolve(n)
	if n == nil {
		return nil, false
	}
	if n.Kind != yaml.ScalarNode {
		d.errorf(n, "%s must be a single value such as %s", what, example)
		return nil, false
	}
	if n.Tag == "!!null" {
		d.errorf(n, "%s is empty; give it a value such as %s", what, example)
		return nil, false
	}
	return n, true
}

func (d *decoder) str(n *yaml.Node, what, example string) (string, bool) {
	s, ok := d.scalar(n, what, example)
	if !ok {
		return "", false
	}
	return s.Value, true
}

// name decodes a policy, rule, schedule or attribute name.
func (d *decoder) name(n *yaml.Node, what string) (string, bool) {
	s, ok := d.scalar(n, what, "checkout")
	if !ok {
		return "", false
	}
	if !nameRE.MatchString(s.Value) {
		d.errorf(s, "%s %q is not a valid name; %s", what, s.Value, nameRule)
		return "", false
	}
	return s.Value, true
}

func (d *decoder) integer(n *yaml.Node, what, example string) (int64, bool) {
	s, ok := d.scalar(n, what, example)
	if !ok {
		return 0, false
	}
	switch s.Tag {
	case "!!int":
		var v int64
		if err := s.Decode(&v); err != nil {
			d.errorf(s, "%s %s is not a whole number that fits in 64 bits", what, s.Value)
			return 0, false
		}
		return v, true
	case "!!float":
		d.errorf(s, "%s must be a whole number, not %s", what, s.Value)
	case "!!str":
		if _, err := strconv.ParseInt(s.Value, 10, 64); err == nil {
			d.errorf(s, "%s must be a number, not the string %q; remove the quotes", what, s.Value)
		} else {
			d.errorf(s, "%s must be a whole number such as %s, not %q", what, example, s.Value)
		}
	default:
		d.errorf(s, "%s must be a whole number such as %s, not %s", what, example, s.Value)
	}
	return 0, false
}

func (d *decoder) boolean(n *yaml.Node, what string) (bool, bool) {
	s, ok := d.scalar(n, what, "true")
	if !ok {
		return false, false
	}
	if s.Tag != "!!bool" {
		d.errorf(s, "%s must be true or false, not %q", what, s.Value)
		return false, false
	}
	var v bool
	if err := s.Decode(&v); err != nil {
		d.errorf(s, "%s must be true or false, not %q", what, s.Value)
		return false, false
	}
	return v, true
}

// duration decodes a duration; positive requires it to be more than zero.
func (d *decoder) duration(n *yaml.Node, what string, positive bool) (time.Duration, bool) {
	s, ok := d.scalar(n, what, "30m")
	if !ok {
		return 0, false
	}
	v, err := parseDuration(s.Value)
	if err != nil {
		d.errorf(s, "%s: %v", what, err)
		return 0, false
	}
	if positive && v == 0 {
		d.errorf(s, "%s is zero; it must be longer than zero, such as 1s or 30m", what)
		return 0, false
	}
	return v, true
}

// list decodes a sequence, calling item for each element.
func (d *decoder) list(n *yaml.Node, what, example string, item func(i int, v *yaml.Node)) {
	n = d.resolve(n)
	if n == nil {
		return
	}
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, "%s must be a list, such as %s", what, example)
		return
	}
	for i, v := range n.Content {
		item(i, v)
	}
}

// attrList decodes a list of attribute names with their nodes, rejecting
// repeats.
func (d *decoder) attrList(n *yaml.Node, what string) ([]string, []*yaml.Node) {
	var names []string
	var nodes []*yaml.Node
	d.list(n, what, "[user] or [tenant, user]", func(i int, v *yaml.Node) {
		if i == maxAttrs {
			d.errorf(d.resolve(v), "%s lists more than %d attributes; key rules by fewer", what, maxAttrs)
		}
		if i >= maxAttrs {
			return
		}
		a, ok := d.name(v, "attribute name")
		if !ok {
			return
		}
		for j, b := range names {
			if a == b {
				d.errorf(v, "%s names %q twice (also item %d); keep one", what, a, j+1)
				return
			}
		}
		names = append(names, a)
		nodes = append(nodes, v)
	})
	return names, nodes
}

// policies decodes the policies list.
func (d *decoder) policies(n *yaml.Node) []sluice.Policy {
	return decodeNamed(d, n, "policies", "- {name: api, limits: [{name: per-user, by: [user], limit: 100, window: 1m}]}",
		d.policy, func(p sluice.Policy) string { return p.Name }, "policy %q is defined twice (first on line %d); rename one or merge their limits")
}

// decodeNamed decodes a list of named items with one, rejecting a name
// given twice with dupMsg (formatted with the name and the first line).
func decodeNamed[T any](d *decoder, n *yaml.Node, section, example string, one func(*yaml.Node, int) (T, bool), name func(T) string, dupMsg string) []T {
	var out []T
	first := map[string]int{}
	d.list(n, section, example, func(i int, v *yaml.Node) {
		item, ok := one(v, i)
		if !ok {
			return
		}
		if line, dup := first[name(item)]; dup {
			d.errorf(d.resolve(v), dupMsg, name(item), line)
			return
		}
		first[name(item)] = d.resolve(v).Line
		out = append(out, item)
	})
	return out
}

func (d *decoder) policy(n *yaml.Node, i int) (sluice.Policy, bool) {
	var p sluice.Policy
	what := describe(n, "policy", i)
	var limitsNode *yaml.Node
	var attrs []string
	attrsSet := false
	var byNodes [][]*yaml.Node
	nerr := len(d.errs)
	ok := d.mapping(n, what, []field{
		{name: "name", required: "name: followed by a name such as notify", set: func(v *yaml.Node) {
			p.Name, _ = d.name(v, "policy name")
		}},
		{name: "limits", required: "limits: a list of rules such as [{name: global, limit: 100, window: 30m}]", set: func(v *yaml.Node) { limitsNode = v }},
		{name: "penalize", set: func(v *yaml.Node) { p.Penalize, _ = d.boolean(v, "penalize") }},
		{name: "shadow", set: func(v *yaml.Node) { p.Shadow, _ = d.boolean(v, "shadow") }},
		{name: "attributes", set: func(v *yaml.Node) {
			attrsSet = true
			attrs, _ = d.attrList(v, "attributes")
		}},
	})
	if !ok {
		return p, false
	}
	if limitsNode != nil {
		rules := map[string]int{}
		d.list(limitsNode, what+" limits", "[{name: global, limit: 100, window: 30m}]", func(j int, v *yaml.Node) {
			if j == maxRules {
				d.errorf(d.resolve(v), "%s has more than %d limits; split it into several policies", what, maxRules)
			}
			if j >= maxRules {
				return
			}
			r, nodes, ok := d.rule(v, j, what)
			if !ok {
				return
			}
			if line, dup := rules[r.Name]; dup {
				d.errorf(d.resolve(v), "%s has two rules named %q (first on line %d); rule names must differ within a policy", what, r.Name, line)
				return
			}
			rules[r.Name] = d.resolve(v).Line
			p.Rules = append(p.Rules, r)
			byNodes = append(byNodes, nodes)
		})
		if len(p.Rules) == 0 && len(d.errs) == nerr {
			d.errorf(d.resolve(limitsNode), "%s has no limits; add at least one, such as {name: global, limit: 100, window: 30m}", what)
		}
	}
	if attrsSet && len(d.errs) == nerr {
		for j, r := range p.Rules {
			for k, a := range r.By {
				if !contains(attrs, a) {
					d.errorf(byNodes[j][k], "rule %q of %s is keyed by attribute %q, which the policy never receives (its attributes: %s); %s",
						r.Name, what, a, strings.Join(attrs, ", "), fixAttr(a, attrs))
				}
			}
		}
	}
	if len(d.errs) != nerr {
		return p, false
	}
	if err := p.Validate(); err != nil {
		d.errorf(d.resolve(n), "%s: %v", what, err)
		return p, false
	}
	return p, true
}

// fixAttr says how to fix a by attribute missing from a declared list.
func fixAttr(a string, attrs []string) string {
	if s := suggest(a, attrs); strings.HasPrefix(s, "did you mean") {
		return s
	}
	return fmt.Sprintf("add %q to the policy's attributes or fix the rule's by", a)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// describe names the i-th list item n of kind in messages: by its name
// field when it has a plain one (`policy "notify"`), else by its position
// (`policy 2`). It does not count against the node budget.
func describe(n *yaml.Node, kind string, i int) string {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n != nil && n.Kind == yaml.MappingNode {
		for j := 0; j+1 < len(n.Content); j += 2 {
			k, v := n.Content[j], n.Content[j+1]
			if k.Kind == yaml.ScalarNode && k.Value == "name" && v.Kind == yaml.ScalarNode && nameRE.MatchString(v.Value) {
				return fmt.Sprintf("%s %q", kind, v.Value)
			}
		}
	}
	return fmt.Sprintf("%s %d", kind, i+1)
}

// rule decodes one entry of a policy's limits, returning it with the nodes
// of its by attributes.
func (d *decoder) rule(n *yaml.Node, j int, policy string) (sluice.Rule, []*yaml.Node, bool) {
	var r sluice.Rule
	var byNodes []*yaml.Node
	what := describe(n, "rule", j) + " of " + policy
	nerr := len(d.errs)
	ok := d.mapping(n, what, []field{
		{name: "name", required: "name: followed by a name such as global or per-user", set: func(v *yaml.Node) {
			r.Name, _ = d.name(v, "rule name")
		}},
		{name: "by", set: func(v *yaml.Node) { r.By, byNodes = d.attrList(v, "by") }},
		{name: "limit", required: "limit: followed by the most cost per window, such as 100", set: func(v *yaml.Node) {
			lim, ok := d.integer(v, "limit", "100")
			if !ok {
				return
			}
			switch {
			case lim < 1:
				d.errorf(d.resolve(v), "limit is %d; a limit must be at least 1 (to stop all traffic, stop sending it; to watch a limit without enforcing it, set shadow: true)", lim)
			case lim > maxLimit:
				d.errorf(d.resolve(v), "limit %d is larger than %d; use a smaller limit", lim, int64(maxLimit))
			default:
				r.Limit = lim
			}
		}},
		{name: "window", required: "window: followed by a duration such as 30m", set: func(v *yaml.Node) { r.Window, _ = d.duration(v, "window", true) }},
		{name: "min_gap", set: func(v *yaml.Node) { r.MinGap, _ = d.duration(v, "min_gap", false) }},
	})
	return r, byNodes, ok && len(d.errs) == nerr
}

// schedules decodes the schedules list.
func (d *decoder) schedules(n *yaml.Node) []sluice.Schedule {
	return decodeNamed(d, n, "schedules", "- {name: carrier, by: [carrier], rate: 4/s, max_delay: 2s}",
		d.schedule, func(s sluice.Schedule) string { return s.Name }, "schedule %q is defined twice (first on line %d); rename one")
}

func (d *decoder) schedule(n *yaml.Node, i int) (sluice.Schedule, bool) {
	var s sluice.Schedule
	what := describe(n, "schedule", i)
	nerr := len(d.errs)
	ok := d.mapping(n, what, []field{
		{name: "name", required: "name: followed by a name such as carrier", set: func(v *yaml.Node) {
			s.Name, _ = d.name(v, "schedule name")
		}},
		{name: "by", set: func(v *yaml.Node) { s.By, _ = d.attrList(v, "by") }},
		{name: "rate", required: "rate: followed by events per period, such as 4/s or 100/30m", set: func(v *yaml.Node) {
			sv, ok := d.scalar(v, "rate", "4/s")
			if !ok {
				return
			}
			r, err := parseRate(sv.Value)
			if err != nil {
				d.errorf(sv, "%v", err)
				return
			}
			s.Rate = r
		}},
		{name: "max_delay", set: func(v *yaml.Node) { s.MaxDelay, _ = d.duration(v, "max_delay", false) }},
		{name: "max_queue", set: func(v *yaml.Node) {
			q, ok := d.integer(v, "max_queue", "100")
			if ok && q < 0 {
				d.errorf(d.resolve(v), "max_queue is %d; use 0 for no bound or a positive number", q)
				return
			}
			s.MaxQueue = q
		}},
	})
	if !ok || len(d.errs) != nerr {
		return s, false
	}
	if err := s.Validate(); err != nil {
		d.errorf(d.resolve(n), "%s: %v", what, err)
		return s, false
	}
	return s, true
}

// store decodes the store section.
func (d *decoder) store(n *yaml.Node) *Store {
	s := &Store{Prefix: "sluice"}
	d.mapping(n, "store", []field{
		{name: "redis", set: func(v *yaml.Node) { s.Redis = d.redis(v) }},
		{name: "prefix", set: func(v *yaml.Node) {
			p, ok := d.scalar(v, "prefix", "sluice")
			if !ok {
				return
			}
			if p.Value == "" || strings.ContainsAny(p.Value, "{} \t\r\n") || len(p.Value) > 64 {
				d.errorf(p, "prefix %q is not valid; use 1 to 64 characters without braces or spaces, such as sluice or myapp:sluice", p.Value)
				return
			}
			s.Prefix = p.Value
		}},
		{name: "timeout", set: func(v *yaml.Node) {
			t, ok := d.duration(v, "timeout", true)
			if ok && t > time.Minute {
				d.errorf(d.resolve(v), "timeout %v is longer than a minute; a store call should take milliseconds, use such as 50ms", t)
				return
			}
			s.Timeout = t
		}},
		{name: "on_error", set: func(v *yaml.Node) {
			o, ok := d.str(v, "on_error", "deny")
			if !ok {
				return
			}
			switch o {
			case "deny":
				s.OnError = sluice.Deny
			case "allow":
				s.OnError = sluice.Allow
			default:
				d.errorf(d.resolve(v), "on_error is %q; use deny (fail closed, the default) or allow (fail open)", o)
			}
		}},
	})
	return s
}

// redis decodes store.redis.
func (d *decoder) redis(n *yaml.Node) *Redis {
	r := &Redis{Mode: "standalone"}
	var addrsNode, modeNode, masterNode, dbNode *yaml.Node
	ok := d.mapping(n, "store.redis", []field{
		{name: "addrs", required: `addrs: a list of host:port, such as ["127.0.0.1:6379"]`, set: func(v *yaml.Node) {
			addrsNode = v
			d.list(v, "addrs", `["10.0.0.1:6379"]`, func(_ int, a *yaml.Node) {
				s, ok := d.str(a, "address", "10.0.0.1:6379")
				if !ok {
					return
				}
				host, port, err := net.SplitHostPort(s)
				if p, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || p < 1 || p > 65535 {
					d.errorf(d.resolve(a), "address %q is not host:port; write it as 10.0.0.1:6379 or redis.internal:6379", s)
					return
				}
				r.Addrs = append(r.Addrs, s)
			})
		}},
		{name: "mode", set: func(v *yaml.Node) {
			modeNode = v
			m, ok := d.str(v, "mode", "standalone")
			if !ok {
				return
			}
			switch m {
			case "standalone", "cluster", "sentinel":
				r.Mode = m
			default:
				d.errorf(d.resolve(v), "mode is %q; use standalone, cluster or sentinel", m)
			}
		}},
		{name: "username", set: func(v *yaml.Node) { r.Username, _ = d.str(v, "username", "sluice") }},
		{name: "password", set: func(v *yaml.Node) { r.Password, _ = d.str(v, "password", "secret") }},
		{name: "db", set: func(v *yaml.Node) {
			dbNode = v
			db, ok := d.integer(v, "db", "0")
			if ok && (db < 0 || db > 1<<20) {
				d.errorf(d.resolve(v), "db is %d; use a database number such as 0", db)
				return
			}
			r.DB = int(db)
		}},
		{name: "master_name", set: func(v *yaml.Node) { masterNode = v; r.MasterName, _ = d.str(v, "master_name", "mymaster") }},
		{name: "tls", set: func(v *yaml.Node) { r.TLS = d.tls(v) }},
	})
	if !ok {
		return r
	}
	at := func(v *yaml.Node) *yaml.Node {
		if v != nil {
			return d.resolve(v)
		}
		return d.resolve(n)
	}
	switch {
	case addrsNode != nil && len(r.Addrs) == 0 && d.resolve(addrsNode) != nil && d.resolve(addrsNode).Kind == yaml.SequenceNode && len(d.resolve(addrsNode).Content) == 0:
		d.errorf(at(addrsNode), "addrs is empty; list at least one host:port, such as [\"10.0.0.1:6379\"]")
	case r.Mode == "sentinel" && r.MasterName == "" && masterNode == nil:
		d.errorf(at(modeNode), "mode sentinel needs master_name: the name of the master the sentinels watch, such as mymaster")
	case r.Mode != "sentinel" && masterNode != nil:
		d.errorf(at(masterNode), "master_name is only used with mode: sentinel; remove it or set mode: sentinel")
	case r.Mode == "standalone" && len(r.Addrs) > 1:
		d.errorf(at(addrsNode), "mode standalone takes one address, got %d; set mode: cluster for cluster seeds or mode: sentinel for sentinels", len(r.Addrs))
	case r.Mode == "cluster" && dbNode != nil && r.DB != 0:
		d.errorf(at(dbNode), "db is not supported with mode: cluster (a cluster has only database 0); remove it")
	}
	return r
}

// tls decodes store.redis.tls.
func (d *decoder) tls(n *yaml.Node) *TLS {
	t := &TLS{}
	ok := d.mapping(n, "store.redis.tls", []field{
		{name: "ca", set: func(v *yaml.Node) { t.CA, _ = d.str(v, "ca", "ca.pem") }},
		{name: "cert", set: func(v *yaml.Node) { t.Cert, _ = d.str(v, "cert", "client.pem") }},
		{name: "key", set: func(v *yaml.Node) { t.Key, _ = d.str(v, "key", "client-key.pem") }},
		{name: "server_name", set: func(v *yaml.Node) { t.ServerName, _ = d.str(v, "server_name", "redis.internal") }},
		{name: "insecure_skip_verify", set: func(v *yaml.Node) { t.InsecureSkipVerify, _ = d.boolean(v, "insecure_skip_verify") }},
	})
	if ok && (t.Cert == "") != (t.Key == "") {
		d.errorf(d.resolve(n), "store.redis.tls needs both cert and key for a client certificate, or neither")
	}
	return t
}

func resolveTLSPaths(t *TLS, dir string) {
	for _, p := range []*string{&t.CA, &t.Cert, &t.Key} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
}

// forwardAuth decodes the forward_auth section.
func (d *decoder) forwardAuth(n *yaml.Node) ForwardAuth {
	var f ForwardAuth
	d.mapping(n, "forward_auth", []field{
		{name: "trusted_proxies", set: func(v *yaml.Node) {
			d.list(v, "trusted_proxies", `["10.0.0.0/8", "127.0.0.1"]`, func(_ int, a *yaml.Node) {
				s, ok := d.str(a, "trusted proxy", "10.0.0.0/8")
				if !ok {
					return
				}
				if p, err := netip.ParsePrefix(s); err == nil {
					f.TrustedProxies = append(f.TrustedProxies, p.Masked())
					return
				}
				if ip, err := netip.ParseAddr(s); err == nil {
					f.TrustedProxies = append(f.TrustedProxies, netip.PrefixFrom(ip, ip.BitLen()))
					return
				}
				d.errorf(d.resolve(a), "trusted proxy %q is not an IP address or CIDR prefix; write it as 10.0.0.0/8 or 127.0.0.1", s)
			})
		}},
		{name: "headers", set: func(v *yaml.Node) {
			m := d.resolve(v)
			if m == nil {
				return
			}
			if m.Kind != yaml.MappingNode {
				d.errorf(m, "headers must map attribute names to header names, such as {user: X-User-Id}")
				return
			}
			f.Headers = map[string]string{}
			for i := 0; i+1 < len(m.Content); i += 2 {
				a, ok := d.name(m.Content[i], "attribute name")
				if !ok {
					continue
				}
				switch a {
				case AttrIP, AttrMethod, AttrHost, AttrPath:
					d.errorf(d.resolve(m.Content[i]), "attribute %q is built into forward-auth; pick another name for the header", a)
					continue
				}
				if _, dup := f.Headers[a]; dup {
					d.errorf(d.resolve(m.Content[i]), "attribute %q is mapped twice in headers; keep one", a)
					continue
				}
				h, ok := d.str(m.Content[i+1], "header name", "X-User-Id")
				if !ok {
					continue
				}
				if !validHeaderName(h) {
					d.errorf(d.resolve(m.Content[i+1]), "header name %q is not valid; use letters, digits and '-', such as X-User-Id", h)
					continue
				}
				f.Headers[a] = h
			}
		}},
	})
	return f
}

func validHeaderName(h string) bool {
	if h == "" || len(h) > 128 {
		return false
	}
	for _, c := range h {
		if !(c == '-' || c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}
