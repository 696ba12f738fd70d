package config

import (
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicerate/sluice"
)

// The one validation pass, from the schema (schema.go) to a Config. A
// policy or schedule must pass sluice's own Validate; this adds what only a
// file has: names, attributes lists, the store section, and a position and
// a fix in every message.

const (
	maxRules = 32      // rules in a policy: every decision checks them all
	maxAttrs = 32      // attributes in a by or attributes list
	maxLimit = 1 << 53 // the largest limit: counts stay exact in a Redis double
)

var headerRE = regexp.MustCompile(`^[-_0-9A-Za-z]{1,128}$`)

func (d *decoder) config(root *yaml.Node) *Config {
	f := section(d, node[fileYAML]{root}, "the file")
	if f == nil {
		return nil
	}
	c := &Config{File: d.file, Store: d.store(f.Store), ForwardAuth: d.forwardAuth(f.ForwardAuth)}
	first := map[string]int{}
	for i, n := range items(d, f.Policies, "policies", "- {name: api, limits: [{name: per-user, by: [user], limit: 100, window: 1m}]}") {
		if p, ok := d.policy(n, i); ok && d.unique(first, p.Name, n, "policy %q is defined twice (first on line %d); rename one or merge their limits") {
			c.Policies = append(c.Policies, p)
		}
	}
	clear(first)
	for i, n := range items(d, f.Schedules, "schedules", "- {name: carrier, by: [carrier], rate: 4/s, max_delay: 2s}") {
		if s, ok := d.schedule(n, i); ok && d.unique(first, s.Name, n, "schedule %q is defined twice (first on line %d); rename one") {
			c.Schedules = append(c.Schedules, s)
		}
	}
	if len(d.errs) == 0 && len(c.Policies)+len(c.Schedules) == 0 {
		d.errorf(cmp.Or(f.Policies.Node, f.Schedules.Node, root), "the file defines no policies or schedules; add a policies: list with at least one policy")
	}
	return c
}

func (d *decoder) policy(n *yaml.Node, i int) (sluice.Policy, bool) {
	var f policyYAML
	what, nerr := describe(n, "policy", i), len(d.errs)
	if !d.fields(n, what, &f) {
		return sluice.Policy{}, false
	}
	attrs, declared := d.attributes(f.Attributes, "attributes")
	p := sluice.Policy{
		Name:     d.name(f.Name, "policy name"),
		Penalize: d.boolean(f.Penalize, "penalize"),
		Shadow:   d.boolean(f.Shadow, "shadow"),
	}
	first := map[string]int{}
	for j, rn := range items(d, f.Limits, what+" limits", "[{name: global, limit: 100, window: 30m}]") {
		if j == maxRules {
			d.errorf(deref(rn), "%s has more than %d limits; split it into several policies", what, maxRules)
			break
		}
		r, ok := d.rule(rn, describe(rn, "rule", j)+" of "+what, attrs, declared)
		if ok && d.unique(first, r.Name, rn, "%s has two rules named %q (first on line %d); rule names must differ within a policy", what) {
			p.Rules = append(p.Rules, r)
		}
	}
	if f.Limits.Node != nil && len(p.Rules) == 0 && len(d.errs) == nerr {
		d.errorf(deref(f.Limits.Node), "%s has no limits; add at least one, such as {name: global, limit: 100, window: 30m}", what)
	}
	return p, d.valid(nerr, n, p.Validate)
}

// rule reads one of a policy's limits; when declared, its by attributes
// must be among attrs.
func (d *decoder) rule(n *yaml.Node, what string, attrs []string, declared bool) (sluice.Rule, bool) {
	var f ruleYAML
	nerr := len(d.errs)
	if !d.fields(n, what, &f) {
		return sluice.Rule{}, false
	}
	r := sluice.Rule{
		Name:      d.name(f.Name, "rule name"),
		By:        d.by(f.By),
		Limit:     d.limit(f.Limit),
		Window:    d.duration(f.Window, "window", true),
		MinGap:    d.duration(f.MinGap, "min_gap", false),
		Optional:  d.boolean(f.Optional, "optional"),
		Unless:    d.names(f.Unless, "unless"),
		Match:     d.patterns(f.Match, "match"),
		Overrides: d.overrides(f.Overrides, what),
		Shadow:    d.boolean(f.Shadow, "shadow"),
		Burst:     d.integer(f.Burst, "burst", "10"),
		Spread:    int(d.integer(f.Spread, "spread", "6")),
		SpreadBy:  d.str(f.SpreadBy, "spread_by", "client"),
	}
	if a := d.oneOf(f.Algorithm, "algorithm", "log (the default), gcra or sliding-counter", "log", "gcra", "sliding-counter"); a != "" {
		r.Algorithm, _ = sluice.ParseAlgorithm(a)
	}
	ok := len(d.errs) == nerr
	for k, a := range r.By {
		if ok && declared && !slices.Contains(attrs, a) {
			d.errorf(deref(f.By.Node).Content[k], "%s is keyed by attribute %q, which the policy never receives (its attributes: %s); %s",
				what, a, strings.Join(attrs, ", "), fixAttr(a, attrs))
		}
	}
	return r, ok
}

// overrides reads a rule's overrides.
func (d *decoder) overrides(v node[[]overrideYAML], rule string) []sluice.Override {
	var out []sluice.Override
	for i, n := range items(d, v, "overrides", "[{match: {plan: paid}, limit: 1000}]") {
		var f overrideYAML
		if !d.fields(n, describe(n, "override", i)+" of "+rule, &f) {
			continue
		}
		o := sluice.Override{Match: d.patterns(f.Match, "match"), Limit: d.limit(f.Limit), Unlimited: d.boolean(f.Unlimited, "unlimited")}
		if (f.Limit.Node == nil) == !o.Unlimited {
			d.errorf(deref(n), "override %d of %s needs limit: N (0 blocks) or unlimited: true, and not both", i+1, rule)
		}
		out = append(out, o)
	}
	return out
}

// patterns reads a mapping of attribute names to value patterns.
func (d *decoder) patterns(v node[map[string]string], what string) map[string]string {
	m := d.resolve(v.Node)
	if m == nil {
		return nil
	} else if m.Kind != yaml.MappingNode || len(m.Content) == 0 {
		d.errorf(m, "%s must map attribute names to values, such as {plan: paid} or {path: /api/*}", what)
		return nil
	}
	out := map[string]string{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		a := d.name(node[string]{m.Content[i]}, "attribute name")
		if _, dup := out[a]; dup {
			d.errorf(deref(m.Content[i]), "%s names attribute %q twice; keep one", what, a)
		}
		if p := d.scalar(m.Content[i+1], what+" value", "paid"); p != nil {
			out[a] = p.Value
		}
	}
	return out
}

func (d *decoder) limit(v node[int64]) int64 {
	nerr := len(d.errs)
	switch lim := d.integer(v, "limit", "100"); {
	case len(d.errs) != nerr || v.Node == nil:
	case lim < 0:
		d.errorf(deref(v.Node), "limit is %d; a limit must be at least 0 (0 blocks every request the rule applies to; to watch a limit without enforcing it, set shadow: true)", lim)
	case lim > maxLimit:
		d.errorf(deref(v.Node), "limit %d is larger than %d; use a smaller limit", lim, int64(maxLimit))
	default:
		return lim
	}
	return 0
}

// fixAttr says how to fix a by attribute missing from a declared list.
func fixAttr(a string, attrs []string) string {
	if s := Suggest(a, attrs); strings.HasPrefix(s, "did you mean") {
		return s
	}
	return fmt.Sprintf("add %q to the policy's attributes or fix the rule's by", a)
}

// attributes reads a list of attribute names; ok when it is present and
// valid.
func (d *decoder) attributes(v node[[]string], what string) (attrs []string, ok bool) {
	nerr := len(d.errs)
	for i, n := range items(d, v, what, "[user] or [tenant, user]") {
		if i == maxAttrs {
			d.errorf(deref(n), "%s lists more than %d attributes; key rules by fewer", what, maxAttrs)
			break
		}
		if a := d.name(node[string]{n}, "attribute name"); slices.Contains(attrs, a) {
			d.errorf(n, "%s names %q twice (also item %d); keep one", what, a, slices.Index(attrs, a)+1)
		} else if a != "" {
			attrs = append(attrs, a)
		}
	}
	return attrs, v.Node != nil && len(d.errs) == nerr
}

func (d *decoder) by(v node[[]string]) []string { return d.names(v, "by") }

// names reads a list of attribute names, such as by or unless.
func (d *decoder) names(v node[[]string], what string) []string {
	names, _ := d.attributes(v, what)
	return names
}

// valid reports whether no problem was found since the nerr-th and the
// item n, described as what, passes validate, sluice's own check.
func (d *decoder) valid(nerr int, n *yaml.Node, validate func() error) bool {
	if len(d.errs) != nerr {
		return false
	}
	if err := validate(); err != nil {
		d.errorf(deref(n), "%v", err) // it names the policy or schedule already
		return false
	}
	return true
}

func (d *decoder) schedule(n *yaml.Node, i int) (sluice.Schedule, bool) {
	var f scheduleYAML
	what, nerr := describe(n, "schedule", i), len(d.errs)
	if !d.fields(n, what, &f) {
		return sluice.Schedule{}, false
	}
	s := sluice.Schedule{
		Name:     d.name(f.Name, "schedule name"),
		By:       d.by(f.By),
		Rate:     d.rate(f.Rate),
		MaxDelay: d.duration(f.MaxDelay, "max_delay", false),
		MaxQueue: d.integer(f.MaxQueue, "max_queue", "100"),
	}
	if s.MaxQueue < 0 {
		d.errorf(deref(f.MaxQueue.Node), "max_queue is %d; use 0 for no bound or a positive number", s.MaxQueue)
	}
	return s, d.valid(nerr, n, s.Validate)
}

func (d *decoder) store(v node[storeYAML]) *Store {
	f := section(d, v, "store")
	if f == nil {
		return nil
	}
	s := &Store{
		Redis:   d.redis(f.Redis),
		Prefix:  "sluice",
		Timeout: d.duration(f.Timeout, "timeout", true),
	}
	if p := d.scalar(f.Prefix.Node, "prefix", "sluice"); p != nil && (p.Value == "" || len(p.Value) > 64 || strings.ContainsAny(p.Value, "{} \t\r\n")) {
		d.errorf(p, "prefix %q is not valid; use 1 to 64 characters without braces or spaces, such as sluice or myapp:sluice", p.Value)
	} else if p != nil {
		s.Prefix = p.Value
	}
	if s.Timeout > time.Minute {
		d.errorf(deref(f.Timeout.Node), "timeout %v is longer than a minute; a store call should take milliseconds, use such as 50ms", s.Timeout)
	}
	if d.oneOf(f.OnError, "on_error", "deny (fail closed, the default) or allow (fail open)", "deny", "allow") == "allow" {
		s.OnError = sluice.Allow
	}
	return s
}

func (d *decoder) redis(v node[redisYAML]) *Redis {
	f := section(d, v, "store.redis")
	if f == nil {
		return nil
	}
	r := &Redis{
		Addrs:      d.addrs(f.Addrs),
		Mode:       cmp.Or(d.oneOf(f.Mode, "mode", "standalone, cluster or sentinel", "standalone", "cluster", "sentinel"), "standalone"),
		Username:   d.str(f.Username, "username", "sluice"),
		Password:   d.str(f.Password, "password", "secret"),
		DB:         int(d.integer(f.DB, "db", "0")),
		MasterName: d.str(f.MasterName, "master_name", "mymaster"),
		TLS:        d.tls(f.TLS),
	}
	if r.DB < 0 || r.DB > 1<<20 {
		d.errorf(deref(f.DB.Node), "db is %d; use a database number such as 0", r.DB)
		r.DB = 0
	}
	d.topology(r, f, v.Node)
	return r
}

// topology reports the first of r's addresses, mode, db and master name that
// do not fit together, at its field, or at n, the section, when it is absent.
func (d *decoder) topology(r *Redis, f *redisYAML, n *yaml.Node) {
	at := func(v *yaml.Node) *yaml.Node { return deref(cmp.Or(v, n)) }
	switch addrs := deref(f.Addrs.Node); {
	case addrs != nil && addrs.Kind == yaml.SequenceNode && len(addrs.Content) == 0:
		d.errorf(addrs, "addrs is empty; list at least one host:port, such as [\"10.0.0.1:6379\"]")
	case r.Mode == "sentinel" && f.MasterName.Node == nil:
		d.errorf(at(f.Mode.Node), "mode sentinel needs master_name: the name of the master the sentinels watch, such as mymaster")
	case r.Mode != "sentinel" && f.MasterName.Node != nil:
		d.errorf(at(f.MasterName.Node), "master_name is only used with mode: sentinel; remove it or set mode: sentinel")
	case r.Mode == "standalone" && len(r.Addrs) > 1:
		d.errorf(at(f.Addrs.Node), "mode standalone takes one address, got %d; set mode: cluster for cluster seeds or mode: sentinel for sentinels", len(r.Addrs))
	case r.Mode == "cluster" && r.DB != 0:
		d.errorf(at(f.DB.Node), "db is not supported with mode: cluster (a cluster has only database 0); remove it")
	}
}

func (d *decoder) addrs(v node[[]string]) (addrs []string) {
	for _, n := range items(d, v, "addrs", `["10.0.0.1:6379"]`) {
		if s := d.scalar(n, "address", "10.0.0.1:6379"); s != nil {
			host, port, err := net.SplitHostPort(s.Value)
			if p, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || p < 1 || p > 65535 {
				d.errorf(s, "address %q is not host:port; write it as 10.0.0.1:6379 or redis.internal:6379", s.Value)
				continue
			}
			addrs = append(addrs, s.Value)
		}
	}
	return addrs
}

func (d *decoder) tls(v node[tlsYAML]) *TLS {
	f := section(d, v, "store.redis.tls")
	if f == nil {
		return nil
	}
	t := &TLS{
		CA:                 d.str(f.CA, "ca", "ca.pem"),
		Cert:               d.str(f.Cert, "cert", "client.pem"),
		Key:                d.str(f.Key, "key", "client-key.pem"),
		ServerName:         d.str(f.ServerName, "server_name", "redis.internal"),
		InsecureSkipVerify: d.boolean(f.InsecureSkipVerify, "insecure_skip_verify"),
	}
	if (t.Cert == "") != (t.Key == "") {
		d.errorf(deref(v.Node), "store.redis.tls needs both cert and key for a client certificate, or neither")
	}
	for _, p := range []*string{&t.CA, &t.Cert, &t.Key} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(filepath.Dir(d.file), *p)
		}
	}
	return t
}

func (d *decoder) forwardAuth(v node[forwardAuthYAML]) (fa ForwardAuth) {
	if f := section(d, v, "forward_auth"); f != nil {
		fa = ForwardAuth{TrustedProxies: d.proxies(f.TrustedProxies), Headers: d.headers(f.Headers)}
	}
	return fa
}

func (d *decoder) proxies(v node[[]netip.Prefix]) (proxies []netip.Prefix) {
	for _, n := range items(d, v, "trusted_proxies", `["10.0.0.0/8", "127.0.0.1"]`) {
		if s := d.scalar(n, "trusted proxy", "10.0.0.0/8"); s != nil {
			p, err := netip.ParsePrefix(s.Value)
			if ip, aerr := netip.ParseAddr(s.Value); err != nil && aerr == nil {
				p, err = netip.PrefixFrom(ip, ip.BitLen()), nil
			}
			if err != nil {
				d.errorf(s, "trusted proxy %q is not an IP address or CIDR prefix; write it as 10.0.0.0/8 or 127.0.0.1", s.Value)
				continue
			}
			proxies = append(proxies, p.Masked())
		}
	}
	return proxies
}

func (d *decoder) headers(v node[map[string]string]) map[string]string {
	m := d.resolve(v.Node)
	if m == nil {
		return nil
	} else if m.Kind != yaml.MappingNode {
		d.errorf(m, "headers must map attribute names to header names, such as {user: X-User-Id}")
		return nil
	}
	headers := map[string]string{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, a := deref(m.Content[i]), d.name(node[string]{m.Content[i]}, "attribute name")
		_, dup := headers[a]
		switch {
		case a == "":
		case slices.Contains([]string{AttrIP, AttrMethod, AttrHost, AttrPath}, a):
			d.errorf(k, "attribute %q is built into forward-auth; pick another name for the header", a)
		case dup:
			d.errorf(k, "attribute %q is mapped twice in headers; keep one", a)
		default:
			if h := d.scalar(m.Content[i+1], "header name", "X-User-Id"); h != nil && !headerRE.MatchString(h.Value) {
				d.errorf(h, "header name %q is not valid; use letters, digits and '-', such as X-User-Id", h.Value)
			} else if h != nil {
				headers[a] = h.Value
			}
		}
	}
	return headers
}
