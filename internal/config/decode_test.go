package config

import (
	"errors"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestParseDocumentedExample parses the example file of docs/config.md, so
// that the documented file stays a valid one.
func TestParseDocumentedExample(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("docs/config.md has no yaml example")
	}
	c, err := Parse("/etc/sluice/sluice.yaml", m[1])
	if err != nil {
		t.Fatal(err)
	}
	if r := c.Store.Redis; r.Mode != "standalone" || r.MasterName != "" || r.TLS != nil {
		t.Errorf("store.redis = %+v, TLS %+v; want its TLS lines commented out", r, r.TLS)
	}
	if p := c.Policy("tenants"); p == nil || p.Rules[2].Spread != 6 || c.ForwardAuth.Headers["user"] != "X-User-Id" {
		t.Errorf("policy tenants = %+v, forward_auth %+v", p, c.ForwardAuth)
	}
	// The TLS lines, uncommented as the page says to, are valid too.
	tls := regexp.MustCompile(`(?m)^(    )# (tls:|  (?:ca|cert|key|server_name):)`)
	uncommented := tls.ReplaceAll(m[1], []byte("$1$2"))
	if n := len(tls.FindAll(m[1], -1)); n != 5 {
		t.Fatalf("docs/config.md's example has %d commented TLS lines, want 5 (tls, ca, cert, key, server_name)", n)
	}
	if c, err = Parse("/etc/sluice/sluice.yaml", uncommented); err != nil {
		t.Fatal(err)
	}
	if r := c.Store.Redis; r.TLS == nil || r.TLS.CA != "/etc/sluice/ca.pem" || r.TLS.Key != "/etc/sluice/client-key.pem" || r.TLS.ServerName != "redis.internal" {
		t.Errorf("store.redis.tls uncommented = %+v", r.TLS)
	}
}

// TestParseFields checks values and problems that TestParseErrors does not:
// each file either parses, or reports every message of want, in order.
func TestParseFields(t *testing.T) {
	t.Parallel()
	const okPolicy = "policies:\n  - name: p\n    limits:\n      - {name: r, limit: 1, window: 1s}\n"
	tests := []struct {
		name, file string
		want       []string
	}{
		{"empty master_name", okPolicy + "store:\n  redis: {addrs: [\"a:1\"], master_name: \"\"}\n", nil},
		{"empty headers", okPolicy + "forward_auth:\n  headers: {}\n", nil},
		{"store alone", "store:\n  timeout: 10s\n", nil},
		{"aliased rule", "policies:\n  - name: p\n    limits: [&r {name: r, limit: 1, window: 1s}]\n  - name: q\n    limits: [*r]\n", nil},
		{"sentinel empty master_name", okPolicy + "store:\n  redis: {addrs: [\"a:1\"], mode: sentinel, master_name: \"\"}\n",
			[]string{"f.yaml:6:33: mode sentinel needs master_name"}},
		{"unknown field twice", okPolicy + "polices: []\npolices: []\n",
			[]string{`f.yaml:5:1: unknown field "polices"`, `f.yaml:6:1: unknown field "polices"`}},
		{"header attribute twice", okPolicy + "forward_auth:\n  headers: {user: X-A, user: X-B}\n",
			[]string{`f.yaml:6:24: attribute "user" is set twice in headers (first on line 6); keep one`}},
		{"aliased key twice", okPolicy + "forward_auth:\n  headers: {&u user: X-A, *u : X-B}\n",
			[]string{`f.yaml:6:27: attribute "user" is set twice in headers (first on line 6); keep one`}},
		{"aliased bad key", okPolicy + "forward_auth:\n  trusted_proxies: [&k 10.0.0.0/8]\n  headers:\n    *k : X-A\n",
			[]string{`f.yaml:8:5: attribute name "10.0.0.0/8" is not a valid name`}},
		{"match value not single", "policies:\n  - name: p\n    limits: [{name: r, limit: 1, window: 1s, match: {a: [b]}}]\n",
			[]string{"f.yaml:3:57: match value must be a single value"}},
		{"limit too large", "policies:\n  - name: p\n    limits: [{name: r, limit: 9007199254740993, window: 1s}]\n",
			[]string{"f.yaml:3:31: limit is 9007199254740993; a limit must be at least 0 and at most 2^53"}},
		{"zero timeout", okPolicy + "store:\n  timeout: 0s\n", []string{"f.yaml:6:12: timeout is zero;"}},
		{"db", okPolicy + "store:\n  redis: {addrs: [\"a:1\"], db: -1}\n", []string{"f.yaml:6:31: db is -1; use a database number such as 0"}},
		{"layout", okPolicy + "store:\n  layout: 3\n", []string{"f.yaml:6:11: layout is 3; use 2, the newest (the default), or 1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := Parse("f.yaml", []byte(tt.file))
			var list ErrorList
			if err != nil && !errors.As(err, &list) {
				t.Fatalf("error %v (%T) is not an ErrorList", err, err)
			}
			if len(list) != len(tt.want) {
				t.Fatalf("errors:\n%v\nwant %d: %q", err, len(tt.want), tt.want)
			}
			for i, e := range list {
				if !strings.HasPrefix(e.Error(), tt.want[i]) {
					t.Errorf("error %d = %q, want prefix %q", i, e, tt.want[i])
				}
			}
			if err == nil && len(c.Policies)+len(c.Schedules) == 0 && c.Store == nil {
				t.Errorf("Parse = %+v, want policies or schedules", c)
			}
		})
	}
	for file, want := range map[string]int{okPolicy: 0, okPolicy + "store:\n  layout: 1\n": 1, okPolicy + "store:\n  layout: 2\n": 2} {
		if c, err := Parse("f.yaml", []byte(file)); err != nil || c.Store != nil && c.Store.Layout != want || c.Store == nil && want != 0 {
			t.Errorf("%s: store %+v, %v; want layout %d", file, c.Store, err, want)
		}
	}
	c, err := Parse("f.yaml", []byte("schedules:\n  - {name: s, rate: 1/d, max_delay: 2d12h}\n"))
	if err != nil || c.Schedules[0].Rate.Per != 24*time.Hour || c.Schedules[0].MaxDelay != 60*time.Hour {
		t.Errorf("schedule = %+v, %v; want 1/24h, max delay 60h", c.Schedules, err)
	}
}
