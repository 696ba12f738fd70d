package config

import (
	"cmp"
	"fmt"
	"math"
	"net"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicerate/sluice"
)

// The one validation pass, from the schema as read (schema.go, decode.go)
// to a Config. A policy or schedule must pass sluice's own Validate; this
// adds what only a file has: names, attributes lists, the store section,
// and a position and a fix in every message.

const (
	maxRules = 32 // rules in a policy: every decision checks them all
	maxAttrs = 32 // attributes in a by or attributes list
)

// nameRE is what policy, rule, schedule and attribute names may look like:
// they appear in store keys, metric labels and URLs.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// forms are the forms a string may have to take (its field's form tag): a
// test, and the message, given what the string is and the string, of one
// that fails it.
var forms = map[string]struct {
	ok  func(string) bool
	msg string
}{
	"name":      {nameRE.MatchString, "%s %q is not a valid name; names are 1 to 64 letters, digits, '-', '_' or '.', starting with a letter or digit"},
	"address":   {isAddress, "%s %q is not host:port; write it as 10.0.0.1:6379 or redis.internal:6379"},
	"header":    {regexp.MustCompile(`^[-_0-9A-Za-z]{1,128}$`).MatchString, "%s %q is not valid; use letters, digits and '-', such as X-User-Id"},
	"prefix":    {regexp.MustCompile(`^[^{} \t\r\n]{1,64}$`).MatchString, "%s %q is not valid; use 1 to 64 characters without braces or spaces, such as sluice or myapp:sluice"},
	"algorithm": {oneOf("log", "gcra", "sliding-counter"), "%s is %q; use log (the default), gcra or sliding-counter"},
	"mode":      {oneOf("standalone", "cluster", "sentinel"), "%s is %q; use standalone, cluster or sentinel"},
	"on_error":  {oneOf("deny", "allow"), "%s is %q; use deny (fail closed, the default) or allow (fail open)"},
}

// oneOf returns a test of whether a string is one of valid.
func oneOf(valid ...string) func(string) bool {
	return func(s string) bool { return slices.Contains(valid, s) }
}

// isAddress reports whether s is host:port, the port from 1 to 65535.
func isAddress(s string) bool {
	host, port, err := net.SplitHostPort(s)
	p, perr := strconv.ParseUint(port, 10, 16)
	return err == nil && perr == nil && host != "" && p > 0
}

// bounds are the numbers and durations that have bounds, by key: a value
// out of [lo, hi] is reported with the fix. A limit stays below 2^53 so that
// counts stay exact in a Redis double; a store call takes milliseconds.
var bounds = map[string]struct {
	lo, hi int64
	fix    string
}{
	"limit":     {0, 1 << 53, "a limit must be at least 0 and at most 2^53 (0 blocks every request the rule applies to; to watch a limit without enforcing it, set shadow: true)"},
	"window":    {1, math.MaxInt64, "it must be longer than zero, such as 1s or 30m"},
	"max_queue": {0, math.MaxInt64, "use 0 for no bound or a positive number"},
	"db":        {0, 1 << 20, "use a database number such as 0"},
	"timeout":   {1, int64(time.Minute), "a store call takes milliseconds: use one longer than zero and not longer than a minute, such as 50ms"},
	"layout":    {1, 2, "use 2, the newest (the default), or 1, the key names of versions before it, while a rolling upgrade runs both (docs/design.md, Upgrades)"},
}

func (d *decoder) config(f *fileYAML, root *yaml.Node) *Config {
	c := &Config{File: d.file, Store: d.store(f.Store.V), ForwardAuth: d.forwardAuth(f.ForwardAuth)}
	first := map[string]int{}
	for _, n := range f.Policies.V {
		if p, ok := d.policy(n); ok && d.unique(first, p.Name, n.Node, "policy %q is defined twice (first on line %d); rename one or merge their limits") {
			c.Policies = append(c.Policies, p)
		}
	}
	clear(first)
	for _, n := range f.Schedules.V {
		if s, ok := d.schedule(n); ok && d.unique(first, s.Name, n.Node, "schedule %q is defined twice (first on line %d); rename one") {
			c.Schedules = append(c.Schedules, s)
		}
	}
	// A file of a store section alone configures the store of what comes
	// from elsewhere: sluice serve --envoy-config's domains.
	if len(d.errs) == 0 && len(c.Policies)+len(c.Schedules) == 0 && c.Store == nil {
		d.errorf(cmp.Or(f.Policies.Node, f.Schedules.Node, root), "the file defines no policies or schedules; add a policies: list with at least one policy")
	}
	return c
}

// unique reports whether no earlier list item, recorded in first, has the
// name of the item at n, and records it. Of a repeated name it reports
// format with args, the name and the first item's line.
func (d *decoder) unique(first map[string]int, name string, n *yaml.Node, format string, args ...any) bool {
	if line, dup := first[name]; dup {
		d.errorf(n, format, append(args, name, line)...)
		return false
	}
	first[name] = n.Line
	return true
}

func (d *decoder) policy(n node[policyYAML]) (sluice.Policy, bool) {
	f, nerr := n.V, len(d.errs)
	p := sluice.Policy{Name: f.Name.V, Penalize: f.Penalize.V, Shadow: f.Shadow.V, CacheDenials: f.DenyCache.Node == nil || f.DenyCache.V}
	attrs, first := d.attributes(f.Attributes), map[string]int{}
	for i, rn := range f.Limits.V {
		if i == maxRules {
			d.errorf(rn.Node, "%s has more than %d limits; split it into several policies", n.what, maxRules)
			break
		}
		r := d.rule(rn, attrs, f.Attributes.ok)
		if r.Name != "" && d.unique(first, r.Name, rn.Node, "%s has two rules named %q (first on line %d); rule names must differ within a policy", n.what) {
			p.Rules = append(p.Rules, r)
		}
	}
	if f.Limits.ok && len(f.Limits.V) == 0 {
		d.errorf(f.Limits.Node, "%s has no limits; add at least one, such as {name: global, limit: 100, window: 30m}", n.what)
	}
	return p, d.valid(n.ok && len(d.errs) == nerr, n.Node, p.Validate())
}

// rule converts one of a policy's limits; when the policy declares its
// attributes, attrs, every by attribute must be among them.
func (d *decoder) rule(n node[ruleYAML], attrs []string, declared bool) sluice.Rule {
	f := n.V
	r := sluice.Rule{Name: f.Name.V, Limit: f.Limit.V, Window: f.Window.V, MinGap: f.MinGap.V, Burst: f.Burst.V,
		By: d.attributes(f.By), Optional: f.Optional.V, Unless: d.attributes(f.Unless), Match: f.Match.V,
		Shadow: f.Shadow.V, Spread: int(f.Spread.V), SpreadBy: f.SpreadBy.V}
	r.Algorithm, _ = sluice.ParseAlgorithm(f.Algorithm.V)
	for i, a := range r.By {
		if declared && a != "" && !slices.Contains(attrs, a) {
			fix := Suggest(a, attrs)
			if !strings.HasPrefix(fix, "did you mean") {
				fix = fmt.Sprintf("add %q to the policy's attributes or fix the rule's by", a)
			}
			d.errorf(f.By.Content[i], "%s is keyed by attribute %q, which the policy never receives (its attributes: %s); %s",
				n.what, a, strings.Join(attrs, ", "), fix)
		}
	}
	for _, o := range f.Overrides.V {
		if o.ok && (o.V.Limit.Node == nil) == !o.V.Unlimited.V {
			d.errorf(o.Node, "%s needs limit: N (0 blocks) or unlimited: true, and not both", o.what)
		}
		r.Overrides = append(r.Overrides, sluice.Override{Match: o.V.Match.V, Limit: o.V.Limit.V, Unlimited: o.V.Unlimited.V})
	}
	return r
}

// attributes returns the attribute names of the list v, reporting one named
// twice and lists of more than maxAttrs.
func (d *decoder) attributes(v node[[]string]) []string {
	for i, a := range v.V {
		if i == maxAttrs {
			d.errorf(v.Content[i], "%s lists more than %d attributes; key rules by fewer", v.what, maxAttrs)
			break
		}
		if j := slices.Index(v.V[:i], a); a != "" && j >= 0 {
			d.errorf(v.Content[i], "%s names %q twice (also item %d); keep one", v.what, a, j+1)
		}
	}
	return v.V
}

func (d *decoder) schedule(n node[scheduleYAML]) (sluice.Schedule, bool) {
	f, nerr := n.V, len(d.errs)
	s := sluice.Schedule{Name: f.Name.V, By: d.attributes(f.By), Rate: f.Rate.V, MaxDelay: f.MaxDelay.V, MaxQueue: f.MaxQueue.V}
	return s, d.valid(n.ok && len(d.errs) == nerr, n.Node, s.Validate())
}

// valid reports whether ok, the item at n was read without a problem, and
// err, sluice's own check of it, is nil; err names the item already.
func (d *decoder) valid(ok bool, n *yaml.Node, err error) bool {
	if ok && err != nil {
		d.errorf(n, "%v", err)
	}
	return ok && err == nil
}

func (d *decoder) store(f *storeYAML) *Store {
	if f == nil {
		return nil
	}
	s := &Store{Redis: d.redis(f.Redis), Prefix: cmp.Or(f.Prefix.V, "sluice"), Timeout: f.Timeout.V, Layout: int(f.Layout.V)}
	if f.OnError.V == "allow" {
		s.OnError = sluice.Allow
	}
	return s
}

// redis converts store.redis and reports the first of its addresses, mode,
// db and master name that do not fit together: at the field, or at the
// section when the field is absent.
func (d *decoder) redis(v node[*redisYAML]) *Redis {
	f := v.V
	if f == nil {
		return nil
	}
	r := &Redis{Addrs: f.Addrs.V, Mode: cmp.Or(f.Mode.V, "standalone"), Username: f.Username.V, Password: f.Password.V,
		DB: int(f.DB.V), MasterName: f.MasterName.V, TLS: d.tls(f.TLS)}
	at := func(n *yaml.Node) *yaml.Node { return cmp.Or(n, v.Node) }
	switch {
	case f.Addrs.ok && len(r.Addrs) == 0:
		d.errorf(f.Addrs.Node, "addrs is empty; list at least one host:port, such as [\"10.0.0.1:6379\"]")
	case r.Mode == "sentinel" && r.MasterName == "":
		d.errorf(at(f.Mode.Node), "mode sentinel needs master_name: the name of the master the sentinels watch, such as mymaster")
	case r.Mode != "sentinel" && r.MasterName != "":
		d.errorf(at(f.MasterName.Node), "master_name is only used with mode: sentinel; remove it or set mode: sentinel")
	case r.Mode == "standalone" && len(r.Addrs) > 1:
		d.errorf(at(f.Addrs.Node), "mode standalone takes one address, got %d; set mode: cluster for cluster seeds or mode: sentinel for sentinels", len(r.Addrs))
	case r.Mode == "cluster" && r.DB != 0:
		d.errorf(at(f.DB.Node), "db is not supported with mode: cluster (a cluster has only database 0); remove it")
	}
	return r
}

// tls converts store.redis.tls, resolving its files against the file's
// directory.
func (d *decoder) tls(v node[*tlsYAML]) *TLS {
	f := v.V
	if f == nil {
		return nil
	}
	t := &TLS{CA: f.CA.V, Cert: f.Cert.V, Key: f.Key.V, ServerName: f.ServerName.V, InsecureSkipVerify: f.InsecureSkipVerify.V}
	if (t.Cert == "") != (t.Key == "") {
		d.errorf(v.Node, "store.redis.tls needs both cert and key for a client certificate, or neither")
	}
	for _, p := range []*string{&t.CA, &t.Cert, &t.Key} {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(filepath.Dir(d.file), *p)
		}
	}
	return t
}

func (d *decoder) forwardAuth(v node[*forwardAuthYAML]) ForwardAuth {
	if v.V == nil {
		return ForwardAuth{}
	}
	h := v.V.Headers
	for i := 0; h.Node != nil && h.Kind == yaml.MappingNode && i < len(h.Content); i += 2 {
		if a := h.Content[i].Value; slices.Contains([]string{AttrIP, AttrMethod, AttrHost, AttrPath}, a) {
			d.errorf(h.Content[i], "attribute %q is built into forward-auth; pick another name for the header", a)
		}
	}
	return ForwardAuth{TrustedProxies: v.V.TrustedProxies.V, Headers: h.V}
}
