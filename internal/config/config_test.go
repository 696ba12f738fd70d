package config

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/edge"
)

// designFile is the example file of the design document.
const designFile = `store:                      # absent: in-memory store
  redis:
    addrs: ["127.0.0.1:6379"]
    mode: standalone
    username: ""
  prefix: sluice
  timeout: 50ms
  on_error: deny
policies:
  - name: notify                   # the notifier
    limits:
      - {name: global, limit: 100, window: 30m}
      - {name: category, by: [category], limit: 10, window: 30m}
  - name: push                     # push notifications
    penalize: false
    limits:
      - {name: per-user, by: [user], limit: 10, window: 1m, min_gap: 100ms}
schedules:
  - {name: carrier, by: [carrier], rate: 4/s, max_delay: 2s}   # the dialer
`

func TestParseDesignFile(t *testing.T) {
	c, err := Parse("sluice.yaml", []byte(designFile))
	if err != nil {
		t.Fatal(err)
	}
	wantStore := &Store{
		Redis:   &Redis{Addrs: []string{"127.0.0.1:6379"}, Mode: "standalone"},
		Prefix:  "sluice",
		Timeout: 50 * time.Millisecond,
		OnError: sluice.Deny,
	}
	if !reflect.DeepEqual(c.Store, wantStore) {
		t.Errorf("Store = %+v, want %+v", c.Store, wantStore)
	}
	wantPolicies := []sluice.Policy{
		{Name: "notify", Rules: []sluice.Rule{
			{Name: "global", Limit: 100, Window: 30 * time.Minute},
			{Name: "category", Limit: 10, Window: 30 * time.Minute, By: []string{"category"}},
		}, CacheDenials: true}, // a file's policies cache their denials unless deny_cache: false
		{Name: "push", Rules: []sluice.Rule{
			{Name: "per-user", Limit: 10, Window: time.Minute, MinGap: 100 * time.Millisecond, By: []string{"user"}},
		}, CacheDenials: true},
	}
	if !reflect.DeepEqual(c.Policies, wantPolicies) {
		t.Errorf("Policies = %+v, want %+v", c.Policies, wantPolicies)
	}
	wantSchedules := []sluice.Schedule{{Name: "carrier", By: []string{"carrier"}, Rate: sluice.Rate{Events: 4, Per: time.Second}, MaxDelay: 2 * time.Second}}
	if !reflect.DeepEqual(c.Schedules, wantSchedules) {
		t.Errorf("Schedules = %+v, want %+v", c.Schedules, wantSchedules)
	}
	if p := c.Policy("push"); p == nil || p.Name != "push" {
		t.Errorf("Policy(push) = %v", p)
	}
	if p := c.Policy("nope"); p != nil {
		t.Errorf("Policy(nope) = %v, want nil", p)
	}
	if s := c.Schedule("carrier"); s == nil || s.Rate.Interval() != 250*time.Millisecond {
		t.Errorf("Schedule(carrier) = %+v, want interval 250ms", s)
	}
}

func TestParseOptionalSections(t *testing.T) {
	const file = `
policies:
  - name: api
    shadow: true
    penalize: true
    attributes: [user, path]
    limits:
      - name: per-user
        by: [user]
        limit: 1_000
        window: 1d
forward_auth:
  trusted_proxies: ["10.0.0.0/8", "127.0.0.1", "::1"]
  headers: {user: X-User-Id}
store:
  on_error: allow
  redis:
    addrs: [a:1, b:2]
    mode: sentinel
    master_name: mymaster
    wait_for_replicas: true
    replica_grace: 45s
    tls: {ca: ca.pem, cert: /etc/c.pem, key: k.pem}
`
	c, err := Parse("/etc/sluice/sluice.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Policy("api")
	if !p.Shadow || !p.Penalize || p.Rules[0].Limit != 1000 || p.Rules[0].Window != 24*time.Hour {
		t.Errorf("policy = %+v", p)
	}
	wantProxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128")}
	if !reflect.DeepEqual(c.ForwardAuth.TrustedProxies, wantProxies) {
		t.Errorf("TrustedProxies = %v, want %v", c.ForwardAuth.TrustedProxies, wantProxies)
	}
	if got, want := c.ForwardAuth.ForwardAuthAttributes(), []string{"ip", "method", "host", "path", "user"}; !reflect.DeepEqual(got, want) {
		t.Errorf("ForwardAuthAttributes = %v, want %v", got, want)
	}
	if c.Store.OnError != sluice.Allow || c.Store.Prefix != "sluice" {
		t.Errorf("store = %+v", c.Store)
	}
	if !c.Store.Redis.WaitForReplicas || c.Store.Redis.ReplicaGrace != 45*time.Second {
		t.Errorf("store.redis = %+v, want WaitForReplicas and ReplicaGrace 45s", c.Store.Redis)
	}
	wantTLS := &TLS{CA: "/etc/sluice/ca.pem", Cert: "/etc/c.pem", Key: "/etc/sluice/k.pem"}
	if !reflect.DeepEqual(c.Store.Redis.TLS, wantTLS) {
		t.Errorf("TLS = %+v, want %+v", c.Store.Redis.TLS, wantTLS)
	}
}

func TestParseErrors(t *testing.T) {
	const okPolicy = "policies:\n  - name: p\n    limits:\n      - {name: r, limit: 1, window: 1s}\n"
	tests := []struct {
		name string
		file string
		line int
		want string // substring of the message
	}{
		{"empty", "", 0, "the file is empty"},
		{"syntax", "policies:\n  - name: [\n", 2, "YAML syntax"},
		{"two documents", okPolicy + "---\n" + okPolicy, 5, "second YAML document"},
		{"unknown top field", okPolicy + "polices: []\n", 5, `unknown field "polices" in the file; did you mean "policies"?`},
		{"unknown rule field", "policies:\n  - name: p\n    limits:\n      - {name: r, limit: 1, windw: 1s}\n", 4, `did you mean "window"?`},
		{"unknown far field", "policies:\n  - name: p\n    foo: 1\n    limits: [{name: r, limit: 1, window: 1s}]\n", 3, "valid: name, limits, penalize, shadow, attributes"},
		{"duplicate key", "policies:\n  - name: p\n    name: q\n    limits: [{name: r, limit: 1, window: 1s}]\n", 3, `field "name" is set twice in policy "p" (first on line 2)`},
		{"no policies", "policies: []\n", 1, "defines no policies or schedules"},
		{"policies not a list", "policies: {name: p}\n", 1, "policies must be a list"},
		{"bad duration unit", "policies:\n  - name: p\n    limits: [{name: r, limit: 1, window: 30}]\n", 3, `duration "30" has no unit; write 30s, 30m or 30ms`},
		{"bad duration", "policies:\n  - name: p\n    limits: [{name: r, limit: 1, window: 30mins}]\n", 3, `duration "30mins" is not valid`},
		{"zero window", "policies:\n  - name: p\n    limits: [{name: r, limit: 1, window: 0s}]\n", 3, "window is zero"},
		{"negative window", "policies:\n  - name: p\n    limits: [{name: r, limit: 1, window: -1s}]\n", 3, "negative"},
		{"huge window", "policies:\n  - name: p\n    limits: [{name: r, limit: 1, window: 9000h}]\n", 3, "longer than a year"},
		{"negative limit", "policies:\n  - name: p\n    limits:\n      - name: r\n        limit: -1\n        window: 1s\n", 5, "limit is -1; a limit must be at least 0"},
		{"quoted limit", "policies:\n  - name: p\n    limits: [{name: r, limit: \"5\", window: 1s}]\n", 3, "remove the quotes"},
		{"float limit", "policies:\n  - name: p\n    limits: [{name: r, limit: 1.5, window: 1s}]\n", 3, "whole number"},
		{"missing limit", "policies:\n  - name: p\n    limits:\n      - {name: r, window: 1s}\n", 4, `rule "r" of policy "p" has no limit`},
		{"missing name", "policies:\n  - limits: [{name: r, limit: 1, window: 1s}]\n", 2, "policy 1 has no name"},
		{"no limits", "policies:\n  - name: p\n    limits: []\n", 3, `policy "p" has no limits`},
		{"bad name", "policies:\n  - name: \"a b\"\n    limits: [{name: r, limit: 1, window: 1s}]\n", 2, `policy name "a b" is not a valid name`},
		{"duplicate policy", okPolicy + "  - name: p\n    limits: [{name: r, limit: 1, window: 1s}]\n", 5, `policy "p" is defined twice (first on line 2)`},
		{"duplicate rule", "policies:\n  - name: p\n    limits:\n      - {name: r, limit: 1, window: 1s}\n      - {name: r, limit: 2, window: 1s}\n", 5, `two rules named "r" (first on line 4)`},
		{"duplicate by", "policies:\n  - name: p\n    limits: [{name: r, by: [u, u], limit: 1, window: 1s}]\n", 3, `names "u" twice`},
		{"by never supplied", "policies:\n  - name: p\n    attributes: [category]\n    limits:\n      - {name: r, by: [categroy], limit: 1, window: 1s}\n", 5,
			`rule "r" of policy "p" is keyed by attribute "categroy", which the policy never receives (its attributes: category); did you mean "category"?`},
		{"by not a list", "policies:\n  - name: p\n    limits: [{name: r, by: user, limit: 1, window: 1s}]\n", 3, "by must be a list"},
		{"bad bool", "policies:\n  - name: p\n    shadow: yes please\n    limits: [{name: r, limit: 1, window: 1s}]\n", 3, "shadow must be true or false"},
		{"duplicate schedule", okPolicy + "schedules:\n  - {name: s, rate: 1/s}\n  - {name: s, rate: 1/s}\n", 7, `schedule "s" is defined twice`},
		{"bad rate", okPolicy + "schedules:\n  - {name: s, rate: 4}\n", 6, `rate "4" is not EVENTS/PERIOD`},
		{"bad rate period", okPolicy + "schedules:\n  - {name: s, rate: 4/sec}\n", 6, `rate "4/sec" has a bad period`},
		{"zero rate", okPolicy + "schedules:\n  - {name: s, rate: 0/s}\n", 6, "at least 1"},
		{"missing rate", okPolicy + "schedules:\n  - {name: s}\n", 6, `schedule "s" has no rate`},
		{"negative queue", okPolicy + "schedules:\n  - {name: s, rate: 1/s, max_queue: -1}\n", 6, "max_queue is -1"},
		{"on_error", okPolicy + "store:\n  on_error: maybe\n", 6, `on_error is "maybe"; use deny`},
		{"mode", okPolicy + "store:\n  redis: {addrs: [\"a:1\"], mode: clustre}\n", 6, `mode is "clustre"`},
		{"bad addr", okPolicy + "store:\n  redis: {addrs: [\"localhost\"]}\n", 6, `address "localhost" is not host:port`},
		{"no addrs", okPolicy + "store:\n  redis: {mode: cluster}\n", 6, "store.redis has no addrs"},
		{"empty addrs", okPolicy + "store:\n  redis: {addrs: []}\n", 6, "addrs is empty"},
		{"standalone seeds", okPolicy + "store:\n  redis: {addrs: [\"a:1\", \"b:2\"]}\n", 6, "mode standalone takes one address"},
		{"sentinel master", okPolicy + "store:\n  redis: {addrs: [\"a:1\"], mode: sentinel}\n", 6, "needs master_name"},
		{"master without sentinel", okPolicy + "store:\n  redis: {addrs: [\"a:1\"], master_name: m}\n", 6, "only used with mode: sentinel"},
		{"grace without acks", okPolicy + "store:\n  redis:\n    addrs: [\"a:1\"]\n    replica_grace: 30s\n", 8, "replica_grace is only used with wait_for_replicas: true"},
		{"zero grace", okPolicy + "store:\n  redis: {addrs: [\"a:1\"], wait_for_replicas: true, replica_grace: 0s}\n", 6, "replica_grace is zero; use a duration longer than zero"},
		{"tls half", okPolicy + "store:\n  redis:\n    addrs: [\"a:1\"]\n    tls: {cert: c.pem}\n", 8, "both cert and key"},
		{"bad prefix", okPolicy + "store:\n  prefix: \"a{b}\"\n", 6, "prefix"},
		{"timeout", okPolicy + "store:\n  timeout: 5m\n", 6, "longer than a minute"},
		{"bad proxy", okPolicy + "forward_auth:\n  trusted_proxies: [nope]\n", 6, `trusted proxy "nope"`},
		{"builtin header attr", okPolicy + "forward_auth:\n  headers: {ip: X-Real-IP}\n", 6, "built into forward-auth"},
		{"aliased builtin header attr", okPolicy + "forward_auth:\n  trusted_proxies: [&k ip]\n  headers: {*k : X-Real-IP}\n", 7, `attribute "ip" is built into forward-auth`},
		{"override limit", "policies:\n  - name: p\n    limits: [{name: r, limit: 1, window: 1s, overrides: [{match: {a: b}, limit: -1}]}]\n", 3, "0 blocks the requests the override matches"},
		{"bad header", okPolicy + "forward_auth:\n  headers: {user: \"X User\"}\n", 6, "not valid"},
		{"merge key", "base: &b {limit: 1, window: 1s}\n" + okPolicy, 1, `unknown field "base"`},
		{"alias bomb", "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n", 1, "unknown field"},
		{"too many rules", "policies:\n  - name: p\n    limits:\n" + strings.Repeat("      - {name: r, limit: 1, window: 1s}\n", 40), 36, "more than 32 limits"},
		{"too many attributes", "policies:\n  - name: p\n    limits:\n      - name: r\n        limit: 1\n        window: 1s\n        by:\n" + strings.Repeat("          - a\n", 40), 40, "more than 32 attributes"},
		{"empty value", "policies:\n  - name:\n    limits: [{name: r, limit: 1, window: 1s}]\n", 2, "policy name is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse("f.yaml", []byte(tt.file))
			if err == nil {
				t.Fatalf("Parse = %+v, want an error containing %q", c, tt.want)
			}
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error %v (%T) is not an ErrorList", err, err)
			}
			var found *Error
			for _, e := range list {
				if strings.Contains(e.Msg, tt.want) {
					found = e
					break
				}
			}
			if found == nil {
				t.Fatalf("errors:\n%v\nwant one containing %q", err, tt.want)
			}
			if found.Line != tt.line {
				t.Errorf("%v: line %d, want %d", found, found.Line, tt.line)
			}
			if found.File != "f.yaml" {
				t.Errorf("File = %q, want f.yaml", found.File)
			}
			if tt.line > 0 && !strings.HasPrefix(found.Error(), "f.yaml:") {
				t.Errorf("Error() = %q, want file:line: prefix", found.Error())
			}
		})
	}
}

func TestParseReportsEveryError(t *testing.T) {
	const file = `policies:
  - name: a
    limits: [{name: r, limit: -1, window: 1s}]
  - name: b
    limits: [{name: r, limit: 1, window: 1}]
`
	_, err := Parse("f.yaml", []byte(file))
	var list ErrorList
	if !errors.As(err, &list) {
		t.Fatalf("err = %v", err)
	}
	if len(list) != 2 || list[0].Line != 3 || list[1].Line != 5 {
		t.Errorf("errors = %v, want one on line 3 and one on line 5", err)
	}
	if got, want := list[0].Error(), "f.yaml:3:31: limit is -1"; !strings.HasPrefix(got, want) {
		t.Errorf("Error() = %q, want prefix %q", got, want)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sluice.yaml")
	if err := os.WriteFile(path, []byte(designFile), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.File != path || len(c.Policies) != 2 {
		t.Errorf("Load = %+v", c)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v, want not-exist", err)
	}
}

func TestParseRate(t *testing.T) {
	tests := []struct {
		in   string
		want sluice.Rate
	}{
		{"4/s", sluice.Rate{Events: 4, Per: time.Second}},
		{"100/30m", sluice.Rate{Events: 100, Per: 30 * time.Minute}},
		{"10/1m", sluice.Rate{Events: 10, Per: time.Minute}},
		{" 5 / h ", sluice.Rate{Events: 5, Per: time.Hour}},
		{"1/ms", sluice.Rate{Events: 1, Per: time.Millisecond}},
		{"7/d", sluice.Rate{Events: 7, Per: 24 * time.Hour}},
	}
	for _, tt := range tests {
		got, err := parseRate(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("parseRate(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "4", "/s", "x/s", "-1/s", "4/", "4/0s", "4/-1s", "2000000/ms", "4/s/s"} {
		if got, err := parseRate(bad); err == nil {
			t.Errorf("parseRate(%q) = %v, want an error", bad, got)
		}
	}
}

// TestParseConditionalRules reads rules that apply to some requests only,
// per-value limits, blocked values and shadow rules.
func TestParseConditionalRules(t *testing.T) {
	const file = `policies:
  - name: api
    limits:
      - name: per-user
        by: [user]
        optional: true
        limit: 100
        window: 1m
        overrides:
          - {match: {plan: paid}, limit: 1000}
          - {match: {tenant: acme}, unlimited: true}
          - {match: {user: "bot-*"}, limit: 0}
      - {name: per-ip, by: [ip], unless: [user], limit: 20, window: 1m}
      - {name: uploads, by: [path], match: {path: "/upload/*"}, limit: 5, window: 1m, shadow: true}
      - {name: blocked, limit: 0, window: 1m, match: {country: xx}}
`
	c, err := Parse("f.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	want := []sluice.Rule{
		{Name: "per-user", By: []string{"user"}, Optional: true, Limit: 100, Window: time.Minute, Overrides: []sluice.Override{
			{Match: map[string]string{"plan": "paid"}, Limit: 1000},
			{Match: map[string]string{"tenant": "acme"}, Unlimited: true},
			{Match: map[string]string{"user": "bot-*"}, Limit: 0},
		}},
		{Name: "per-ip", By: []string{"ip"}, Unless: []string{"user"}, Limit: 20, Window: time.Minute},
		{Name: "uploads", By: []string{"path"}, Match: map[string]string{"path": "/upload/*"}, Limit: 5, Window: time.Minute, Shadow: true},
		{Name: "blocked", Limit: 0, Window: time.Minute, Match: map[string]string{"country": "xx"}},
	}
	if got := c.Policies[0].Rules; !reflect.DeepEqual(got, want) {
		t.Errorf("rules:\n got %+v\nwant %+v", got, want)
	}
	for _, tt := range []struct{ rule, want string }{
		{"{name: r, limit: 1, window: 1s, overrides: [{match: {plan: paid}}]}", "3:58: override 1 of rule \"r\" of policy \"p\" needs limit: N (0 blocks) or unlimited: true"},
		{"{name: r, limit: 1, window: 1s, overrides: [{limit: 2}]}", "3:58: override 1 of rule \"r\" of policy \"p\" has no match"},
		{"{name: r, limit: 1, window: 1s, match: {}}", "3:53: match must map attribute names to values"},
		{"{name: r, by: [u], unless: [u], limit: 1, window: 1s}", "3:14: policy \"p\": sluice: invalid policy: rule \"r\": it is keyed by \"u\" and applies unless \"u\" is present"},
		{"{name: r, limit: 1, window: 1s, match: {p: /a/*/b}}", "a '*' before its end"},
	} {
		_, err := Parse("f.yaml", []byte("policies:\n  - name: p\n    limits: ["+tt.rule+"]\n"))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.rule, err, tt.want)
		}
	}
}

// TestParseAlgorithmsAndSpread checks the limits' algorithm, burst, spread
// and spread_by, and what a limit that cannot take them is told.
func TestParseAlgorithmsAndSpread(t *testing.T) {
	const file = `policies:
  - name: api
    limits:
      - {name: per-user, by: [user], limit: 10000, window: 1h, algorithm: gcra, burst: 100}
      - {name: per-ip, by: [ip], limit: 600, window: 1m, algorithm: sliding-counter}
      - {name: per-tenant, by: [tenant], limit: 6000, window: 1m, spread: 6, spread_by: client}
      - {name: global, limit: 100000, window: 1m, algorithm: log}
`
	c, err := Parse("f.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	want := []sluice.Rule{
		{Name: "per-user", By: []string{"user"}, Limit: 10000, Window: time.Hour, Algorithm: sluice.GCRA, Burst: 100},
		{Name: "per-ip", By: []string{"ip"}, Limit: 600, Window: time.Minute, Algorithm: sluice.SlidingCounter},
		{Name: "per-tenant", By: []string{"tenant"}, Limit: 6000, Window: time.Minute, Spread: 6, SpreadBy: "client"},
		{Name: "global", Limit: 100000, Window: time.Minute},
	}
	if got := c.Policies[0].Rules; !reflect.DeepEqual(got, want) {
		t.Errorf("rules:\n got %+v\nwant %+v", got, want)
	}
	for _, tt := range []struct{ rule, want string }{
		{"{name: r, limit: 1, window: 1s, algorithm: leaky}", `3:57: algorithm is "leaky"; use log (the default), gcra or sliding-counter`},
		{"{name: r, limit: 1, window: 1s, algorithm: gcra, min_gap: 1s}", `rule "r": a min gap needs the log algorithm`},
		{"{name: r, limit: 1, window: 1s, burst: 2}", `rule "r": a burst is gcra's; the log takes none`},
		{"{name: r, limit: 4, window: 1s, spread: 6}", `rule "r": limit 4 spread over 6 sub-windows leaves some with none; spread over at most 4`},
		{"{name: r, limit: 100, window: 1s, spread: 65}", `rule "r": spread 65; spread a window over 2 to 64 sub-windows`},
		{"{name: r, limit: 100, window: 1s, spread: 2, min_gap: 1s}", `rule "r": a min gap cannot be spread`},
		{"{name: r, limit: 100, window: 1s, spread_by: client}", `rule "r": spread_by "client" without a spread of 2 or more`},
	} {
		_, err := Parse("f.yaml", []byte("policies:\n  - name: p\n    limits: ["+tt.rule+"]\n"))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.rule, err, tt.want)
		}
	}
}

// TestParseConcurrency checks a concurrency rule beside a rate rule, and
// what a concurrency rule that cannot hold is told.
func TestParseConcurrency(t *testing.T) {
	const file = `policies:
  - name: llm
    limits:
      - {name: tokens, by: [user], limit: 100000, window: 1m}
      - {name: in-flight, by: [user], concurrency: 4, lease: 30s}
`
	c, err := Parse("f.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	want := []sluice.Rule{
		{Name: "tokens", By: []string{"user"}, Limit: 100000, Window: time.Minute},
		{Name: "in-flight", By: []string{"user"}, Concurrency: 4, Lease: 30 * time.Second},
	}
	if got := c.Policies[0].Rules; !reflect.DeepEqual(got, want) {
		t.Errorf("rules:\n got %+v\nwant %+v", got, want)
	}
	for _, tt := range []struct{ rule, want string }{
		{"{name: r, concurrency: 4}", `rule "r": concurrency 4 without a lease; give lease: D`},
		{"{name: r, lease: 1s}", `rule "r": a lease of 1s without a concurrency`},
		{"{name: r, concurrency: 0, lease: 1s}", `concurrency is zero; give the most leases alive at once, at least 1`},
		{"{name: r, concurrency: 2, lease: 10us}", `lease is 10µs; a lease lives at least 1ms`},
		{"{name: r, concurrency: 2, lease: 1s, limit: 5, window: 1s}", `rule "r": a concurrency rule counts leases alive, not cost over a window`},
		{"{name: r, window: 1s}", `rule "r" of policy "p" has no limit; add limit: followed by the most cost per window, such as 100 (or concurrency: N and lease: D`},
		{"{name: r, limit: 1}", `rule "r" of policy "p" has no window; add window:`},
	} {
		_, err := Parse("f.yaml", []byte("policies:\n  - name: p\n    limits: ["+tt.rule+"]\n"))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.rule, err, tt.want)
		}
	}
}

// TestLoadTLSFiles: Load reports a TLS file that cannot be read where the
// file names it, as every other problem; Parse, which reads no disk, does
// not look.
func TestLoadTLSFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sluice.yaml")
	const file = "store:\n  redis:\n    addrs: [\"127.0.0.1:6379\"]\n    tls:\n      ca: ca.pem\n      cert: client.pem\n      key: client-key.pem\n"
	if err := os.WriteFile(path, []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 3 {
		t.Fatalf("Load = %v, want three problems", err)
	}
	for i, want := range []string{path + ":5:11: store.redis.tls.ca: open " + filepath.Join(dir, "ca.pem"), path + ":6:13: store.redis.tls.cert", path + ":7:12: store.redis.tls.key"} {
		if got := list[i].Error(); !strings.HasPrefix(got, want) || !strings.Contains(got, "relative to this file's directory") {
			t.Errorf("problem %d = %q, want it to start %q and say how to fix it", i+1, got, want)
		}
	}
	if _, err := Parse(path, []byte(file)); err != nil {
		t.Errorf("Parse = %v, want no look at the disk", err)
	}
	for _, name := range []string{"ca.pem", "client.pem", "client-key.pem"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Load(path); err != nil {
		t.Errorf("Load with the files = %v", err)
	}
}

// TestFind: FindPolicy and FindSchedule return the one named, or an error
// that wraps the library's sentinel and lists what the file has.
func TestFind(t *testing.T) {
	c, err := Parse("f.yaml", []byte("policies:\n  - {name: api, limits: [{name: g, limit: 1, window: 1s}]}\n  - {name: push, limits: [{name: g, limit: 1, window: 1s}]}\nschedules:\n  - {name: carrier, rate: 4/s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p, err := c.FindPolicy("push"); err != nil || p != &c.Policies[1] {
		t.Errorf("FindPolicy(push) = %v, %v; want the second policy", p, err)
	}
	if s, err := c.FindSchedule("carrier"); err != nil || s != &c.Schedules[0] {
		t.Errorf("FindSchedule(carrier) = %v, %v; want the schedule", s, err)
	}
	if _, err := c.FindPolicy("nope"); !errors.Is(err, edge.ErrUnknownPolicy) || !strings.HasSuffix(err.Error(), `"nope" is not in f.yaml (policies: api, push)`) {
		t.Errorf("FindPolicy(nope): %v", err)
	}
	if _, err := c.FindSchedule("nope"); !errors.Is(err, edge.ErrUnknownSchedule) || !strings.HasSuffix(err.Error(), `"nope" is not in f.yaml (schedules: carrier)`) {
		t.Errorf("FindSchedule(nope): %v", err)
	}
}
