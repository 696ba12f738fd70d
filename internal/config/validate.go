package config

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/yamlfile"
	"github.com/sluicerate/sluice/store"
)

// config is the one validation pass, from the schema as read to a Config. A
// policy or schedule must pass sluice's own Validate; this adds what only a
// file has: names, attributes lists, the store section, and a position and a
// fix in every message.
func (d *decoder) config(f *fileYAML, root *yaml.Node) *Config {
	c := &Config{File: d.Name, Store: d.store(f.Store.V), ForwardAuth: d.forwardAuth(f.ForwardAuth.V), Envoy: d.envoy(f.Envoy.V), TLS: d.listeners(f.TLS.V)}
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
	if len(d.Errs) == 0 && len(c.Policies)+len(c.Schedules) == 0 && c.Store == nil && c.Envoy == nil && c.TLS == (Listeners{}) {
		d.Errorf(cmp.Or(f.Policies.Node, f.Schedules.Node, root), "the file defines no policies or schedules; add a policies: list with at least one policy")
	}
	return c
}

// unique reports whether no item recorded in first has the name of the item
// at n, and records it; of a repeated name it reports format with args, the
// name and the first item's line.
func (d *decoder) unique(first map[string]int, name string, n *yaml.Node, format string, args ...any) bool {
	if line, dup := first[name]; dup {
		d.Errorf(n, format, append(args, name, line)...)
		return false
	}
	first[name] = n.Line
	return true
}

// policy converts a policy and reports whether it is valid.
func (d *decoder) policy(n node[policyYAML]) (sluice.Policy, bool) {
	f, nerr := n.V, len(d.Errs)
	p := sluice.Policy{Name: f.Name.V, Penalize: f.Penalize.V, Shadow: f.Shadow.V, CacheDenials: f.DenyCache.Node == nil || f.DenyCache.V}
	attrs, first := d.attributes(f.Attributes), map[string]int{}
	var valid []sluice.Rule // the rules before this one that passed every check
	for i, rn := range f.Limits.V {
		if i == maxRules {
			d.Errorf(rn.Node, "%s has more than %d limits; split it into several policies", n.what, maxRules)
			break
		}
		rerr := len(d.Errs)
		r := d.rule(rn, attrs, f.Attributes.ok)
		if r.Name == "" || !d.unique(first, r.Name, rn.Node, "%s has two rules named %q (first on line %d); rule names must differ within a policy", n.what) {
			continue
		}
		p.Rules = append(p.Rules, r)
		if rn.ok && len(d.Errs) == rerr && d.ruleValid(cmp.Or(p.Name, "unnamed"), valid, p.Rules[:len(p.Rules)-1], r, rn.Node) {
			valid = append(valid, r)
		}
	}
	if f.Limits.ok && len(f.Limits.V) == 0 {
		d.Errorf(f.Limits.Node, "%s has no limits; add at least one, such as {name: global, limit: 100, window: 30m}", n.what)
	}
	return p, d.valid(n.ok && len(d.Errs) == nerr, n.Node, p.Validate())
}

// ruleValid reports whether r passes sluice's own check of a policy of the
// rules valid and r, reporting its problem at n, r's place in the file:
// valid have passed it, so the problem is r's, alone (an algorithm on a
// concurrency rule) or beside one of them (another lease). Each rule is so
// reported where it is, and every rule of a policy is checked in one run.
// A credits rule covering a rule of earlier (the rules before r) that is
// not among valid, its own problem reported, is checked without its
// covers and kept out of valid: its covers is judged once that rule is
// fixed.
func (d *decoder) ruleValid(policy string, valid, earlier []sluice.Rule, r sluice.Rule, n *yaml.Node) bool {
	named := func(q sluice.Rule) bool { return q.Name == r.Covers }
	invalidQuota := r.Covers != "" && !slices.ContainsFunc(valid, named) && slices.ContainsFunc(earlier, named)
	if invalidQuota {
		r.Covers = ""
	}
	q := sluice.Policy{Name: policy, Rules: append(valid[:len(valid):len(valid)], r)}
	err := q.Validate()
	if err != nil {
		d.Errorf(n, "%v", err)
	}
	return err == nil && !invalidQuota
}

// rule converts one of a policy's limits; when the policy declares its
// attributes, attrs, every by attribute must be among them.
func (d *decoder) rule(n node[ruleYAML], attrs []string, declared bool) sluice.Rule {
	f := n.V
	r := sluice.Rule{Name: f.Name.V, Limit: f.Limit.V, Window: f.Window.V, MinGap: f.MinGap.V, Burst: f.Burst.V,
		By: d.attributes(f.By), Optional: f.Optional.V, Unless: d.attributes(f.Unless), Match: f.Match.V,
		Shadow: f.Shadow.V, Spread: int(f.Spread.V), SpreadBy: f.SpreadBy.V, Concurrency: f.Concurrency.V, Lease: f.Lease.V, Budget: f.Budget.V}
	r.Algorithm, _ = sluice.ParseAlgorithm(f.Algorithm.V)
	d.quota(n, &r)
	switch {
	case !n.ok || f.Concurrency.Node != nil || f.Lease.Node != nil:
	case f.Credits.Node != nil:
		// A credits rule: its balance stands for a limit and a window.
	case f.Period.Node != nil:
		if f.Limit.Node == nil {
			d.Errorf(n.Node, "%s has no limit; add limit: followed by the most cost per %s, such as 100000", n.what, f.Period.V)
		}
	default:
		// A rate rule: its limit and window are required.
		if f.Limit.Node == nil {
			d.Errorf(n.Node, "%s has no limit; add limit: followed by the most cost per window, such as 100 (or concurrency: N and lease: D for a limit of leases alive at once)", n.what)
		}
		if f.Window.Node == nil {
			d.Errorf(n.Node, "%s has no window; add window: followed by a duration such as 30m (or period: month for a calendar quota)", n.what)
		}
	}
	for i, a := range r.By {
		if declared && a != "" && !slices.Contains(attrs, a) {
			fix := yamlfile.Suggest(a, attrs)
			if !strings.HasPrefix(fix, "did you mean") {
				fix = fmt.Sprintf("add %q to the policy's attributes or fix the rule's by", a)
			}
			d.Errorf(f.By.Content[i], "%s is keyed by attribute %q, which the policy never receives (its attributes: %s); %s", n.what, a, strings.Join(attrs, ", "), fix)
		}
	}
	for _, o := range f.Overrides.V {
		if o.ok && (o.V.Limit.Node == nil) == !o.V.Unlimited.V {
			d.Errorf(o.Node, "%s needs limit: N (0 blocks) or unlimited: true, and not both", o.what)
		}
		r.Overrides = append(r.Overrides, sluice.Override{Match: o.V.Match.V, Limit: o.V.Limit.V, Unlimited: o.V.Unlimited.V})
	}
	return r
}

// quota reads the fields of a calendar quota or a credits rule into r:
// period, timezone, week_start, history, credits, refill and covers.
// sluice's own validation says which of them fit together.
func (d *decoder) quota(n node[ruleYAML], r *sluice.Rule) {
	f := n.V
	r.Period, _ = store.ParsePeriod(f.Period.V)
	r.History, r.Covers = int(f.History.V), f.Covers.V
	if f.Timezone.Node != nil {
		r.Location = d.location(f.Timezone)
	}
	if i := slices.Index(weekdays[:], f.WeekStart.V); i >= 0 {
		r.WeekStart = time.Weekday(i)
	}
	if f.Credits.Node != nil {
		switch {
		case f.Limit.Node != nil:
			d.Errorf(f.Limit.Node, "%s has credits and a limit; a credits rule's balance starts at credits: leave limit out (or credits, for a rate limit)", n.what)
		case f.Algorithm.Node != nil:
			d.Errorf(f.Algorithm.Node, "%s has credits and an algorithm; a credits rule keeps a balance: leave algorithm out", n.what)
		}
		r.Algorithm, r.Limit = sluice.Credits, f.Credits.V
	}
	if rf := f.Refill.V; rf != nil {
		r.Refill = sluice.Refill{To: rf.To.V, Add: rf.Add.V}
		r.Refill.Every, _ = store.ParsePeriod(rf.Every.V)
		if rf.To.Node != nil && rf.Add.Node != nil {
			d.Errorf(f.Refill.Node, "%s has both to and add; keep to (each period starts at it) or add (each period adds it)", f.Refill.what)
		} else if rf.To.Node == nil && rf.Add.Node == nil && f.Refill.ok {
			d.Errorf(f.Refill.Node, "%s has neither to nor add; give to: N (each period starts at N) or add: N (each period adds N)", f.Refill.what)
		}
		if f.Credits.Node == nil {
			d.Errorf(f.Refill.Node, "%s is for a credits rule; add credits: N, the balance a key starts with", f.Refill.what)
		}
	}
}

// location returns the time zone v names, reporting a name the time zone
// database does not have; nil for UTC.
func (d *decoder) location(v node[string]) *time.Location {
	switch v.V {
	case "", "Local":
		d.Errorf(v.Node, "timezone %q; give an IANA time zone name such as Europe/Berlin or America/New_York, or UTC (the default)", v.V)
		return nil
	case "UTC":
		return nil
	}
	loc, err := time.LoadLocation(v.V)
	if err != nil {
		d.Errorf(v.Node, "timezone %q is not a time zone the time zone database knows; give an IANA name such as Europe/Berlin or America/New_York, or UTC (the default)", v.V)
		return nil
	}
	return loc
}

// attributes returns the attribute names of the list v, reporting one named
// twice and lists of more than maxAttrs.
func (d *decoder) attributes(v node[[]string]) []string {
	for i, a := range v.V {
		if i == maxAttrs {
			d.Errorf(v.Content[i], "%s lists more than %d attributes; key rules by fewer", v.what, maxAttrs)
			break
		}
		if j := slices.Index(v.V[:i], a); a != "" && j >= 0 {
			d.Errorf(v.Content[i], "%s names %q twice (also item %d); keep one", v.what, a, j+1)
		}
	}
	return v.V
}

// schedule converts a schedule and reports whether it is valid.
func (d *decoder) schedule(n node[scheduleYAML]) (sluice.Schedule, bool) {
	f, nerr := n.V, len(d.Errs)
	s := sluice.Schedule{Name: f.Name.V, By: d.attributes(f.By), Rate: f.Rate.V, MaxDelay: f.MaxDelay.V, MaxQueue: f.MaxQueue.V}
	return s, d.valid(n.ok && len(d.Errs) == nerr, n.Node, s.Validate())
}

// valid reports whether ok, the item at n was read without a problem, and
// err, sluice's own check of it, is nil; err names the item already.
func (d *decoder) valid(ok bool, n *yaml.Node, err error) bool {
	if ok && err != nil {
		d.Errorf(n, "%v", err)
	}
	return ok && err == nil
}

// store converts the store section.
func (d *decoder) store(f *storeYAML) *Store {
	if f == nil {
		return nil
	}
	s := &Store{Redis: d.redis(f.Redis), Prefix: cmp.Or(f.Prefix.V, "sluice"), Timeout: f.Timeout.V, Layout: int(f.Layout.V)}
	switch f.OnError.V {
	case "allow":
		s.OnError = sluice.Allow
	case "fallback":
		s.Fallback, s.FallbackShare = true, int(cmp.Or(f.Share.V, 1))
	}
	if f.Share.ok && f.Share.Node != nil && !s.Fallback {
		d.Errorf(f.Share.Node, "fallback_share is for on_error: fallback; add it, or leave fallback_share out")
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
		DB: int(f.DB.V), MasterName: f.MasterName.V, WaitForReplicas: f.WaitReplicas.V, ReplicaGrace: f.ReplicaGrace.V, TLS: d.tls(f.TLS)}
	at := func(n *yaml.Node) *yaml.Node { return cmp.Or(n, v.Node) }
	switch {
	case f.Addrs.ok && len(r.Addrs) == 0:
		d.Errorf(f.Addrs.Node, "addrs is empty; list at least one host:port, such as [\"10.0.0.1:6379\"]")
	case r.Mode == "sentinel" && r.MasterName == "":
		d.Errorf(at(f.Mode.Node), "mode sentinel needs master_name: the name of the master the sentinels watch, such as mymaster")
	case r.Mode != "sentinel" && r.MasterName != "":
		d.Errorf(at(f.MasterName.Node), "master_name is only used with mode: sentinel; remove it or set mode: sentinel")
	case r.Mode == "standalone" && len(r.Addrs) > 1:
		d.Errorf(at(f.Addrs.Node), "mode standalone takes one address, got %d; set mode: cluster for cluster seeds or mode: sentinel for sentinels", len(r.Addrs))
	case r.Mode == "cluster" && r.DB != 0:
		d.Errorf(at(f.DB.Node), "db is not supported with mode: cluster (a cluster has only database 0); remove it")
	case r.ReplicaGrace > 0 && !r.WaitForReplicas:
		d.Errorf(f.ReplicaGrace.Node, "replica_grace is only used with wait_for_replicas: true; remove it or set wait_for_replicas")
	}
	return r
}

// tls converts a client's tls section (store.redis.tls, envoy.xds.tls),
// its files checked by files.
func (d *decoder) tls(v node[*tlsYAML]) *TLS {
	f := v.V
	if f == nil {
		return nil
	}
	t := &TLS{CA: f.CA.V, Cert: f.Cert.V, Key: f.Key.V, ServerName: f.ServerName.V, InsecureSkipVerify: f.InsecureSkipVerify.V}
	if (t.Cert == "") != (t.Key == "") {
		d.Errorf(v.Node, "%s needs both cert and key for a client certificate, or neither", v.what)
	}
	d.files(v.what, pemFile{"ca", &t.CA, f.CA.Node}, pemFile{"cert", &t.Cert, f.Cert.Node}, pemFile{"key", &t.Key, f.Key.Node})
	return t
}

// pemFile is a field that names a file: its key, its value, where it is.
type pemFile struct {
	name string
	path *string
	node *yaml.Node
}

// files resolves the relative paths of fs, fields of the section what,
// from the file's directory; for a file on disk (Load), each must open, so
// that a missing one is reported where it is named.
func (d *decoder) files(what string, fs ...pemFile) {
	for _, file := range fs {
		p := file.path
		if *p == "" {
			continue
		}
		if !filepath.IsAbs(*p) {
			*p = filepath.Join(filepath.Dir(d.Name), *p)
		}
		if d.disk {
			if r, err := os.Open(*p); err != nil {
				d.Errorf(file.node, "%s.%s: %v; give a PEM file's path, absolute or relative to this file's directory, or remove %s", what, file.name, err, file.name)
			} else {
				r.Close()
			}
		}
	}
}

// forwardAuth converts forward_auth.
func (d *decoder) forwardAuth(f *forwardAuthYAML) ForwardAuth {
	if f == nil {
		return ForwardAuth{}
	}
	return ForwardAuth{TrustedProxies: f.TrustedProxies.V, Headers: f.Headers.V}
}
