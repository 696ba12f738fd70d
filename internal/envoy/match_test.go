package envoy_test

import (
	"slices"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicerate/sluice/internal/envoy"
	"github.com/sluicerate/sluice/store"
)

const matchFile = `domain: d
descriptors:
  - key: user
    rate_limits:
      - {unit: minute, requests_per_unit: 2}
      - {unit: hour, requests_per_unit: 10}
  - key: path
    value: /api/*
    share_threshold: true
    shadow_mode: true
    rate_limit: {unit: second, requests_per_unit: 5}
  - key: client
    descriptors:
      - key: plan
        value: gold
        detailed_metric: true
        quota_mode: true
        metadata: {tier: gold}
        rate_limit: {unit: day, requests_per_unit: 100}
  - key: free
    rate_limit: {unlimited: true}
`

// TestMatch: a descriptor lands on the tree as envoyproxy/ratelimit's
// does, and the match carries what deciding it needs: the limits and
// their windows' rules, the values (a shared wildcard's pattern), the
// statistics key and the descriptor's flags.
func TestMatch(t *testing.T) {
	cfg, err := envoy.Parse([]envoy.Source{{Name: "a.yaml", Data: []byte(matchFile)}}, envoy.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	entries := func(kv ...string) []*ratelimitv3.RateLimitDescriptor_Entry {
		var es []*ratelimitv3.RateLimitDescriptor_Entry
		for i := 0; i+1 < len(kv); i += 2 {
			es = append(es, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
		}
		return es
	}
	m := cfg.Match("d", entries("user", "ann"))
	if !m.Found || len(m.Limits) != 2 || !slices.Equal(m.Rules, []string{"user", "user#2"}) || !slices.Equal(m.Values, []string{"ann"}) || m.Stat != "d.user" {
		t.Errorf("user: %+v, want two limits, rules user and user#2, values [ann], stat d.user", m)
	}
	m = cfg.Match("d", entries("path", "/api/orders"))
	if !m.Found || !slices.Equal(m.Values, []string{"/api/*"}) || m.Stat != "d.path_/api/*" || !m.Shadow || m.Quota {
		t.Errorf("shared wildcard: %+v, want values [/api/*], stat d.path_/api/*, shadow", m)
	}
	m = cfg.Match("d", entries("client", "acme", "plan", "gold"))
	if !m.Found || m.Stat != "d.client_acme.plan_gold" || !m.Quota || m.Metadata.GetFields()["tier"].GetStringValue() != "gold" ||
		!slices.Equal(m.Rules, []string{"client.plan_gold"}) {
		t.Errorf("nested: %+v, want the detailed stat d.client_acme.plan_gold, quota_mode, metadata tier gold", m)
	}
	if m = cfg.Match("d", entries("free", "x")); !m.Found || !m.Unlimited || len(m.Limits) != 0 {
		t.Errorf("unlimited: %+v, want found, unlimited, no limits", m)
	}
	for _, miss := range [][]*ratelimitv3.RateLimitDescriptor_Entry{
		entries("client", "acme"), // a descriptor with no rate_limit
		entries("user", "ann", "extra", "x"),
		entries("nobody", "x"),
		nil,
	} {
		if m := cfg.Match("d", miss); m.Found || m.Stat != "" || m.Limits != nil {
			t.Errorf("%v: %+v, want no match", miss, m)
		}
	}
	if m := cfg.Match("other", entries("user", "ann")); m.Found {
		t.Errorf("another domain: %+v, want no match", m)
	}
}

// TestUnitLimit: a descriptor's own limit counts its unit as the files
// do, and a unit that is not one of the seven is reported.
func TestUnitLimit(t *testing.T) {
	for _, calendar := range []bool{false, true} {
		cfg, err := envoy.Parse(nil, envoy.LoadOptions{CalendarUnits: calendar})
		if err != nil {
			t.Fatal(err)
		}
		l, ok := cfg.UnitLimit(rlsv3.RateLimitResponse_RateLimit_MONTH, 3)
		wantPeriod, wantWindow := store.NoPeriod, 30*24*time.Hour
		if calendar {
			wantPeriod, wantWindow = store.Month, store.MaxPeriodLength
		}
		if !ok || l.Requests != 3 || l.Multiplier != 1 || l.Period != wantPeriod || l.Window != wantWindow {
			t.Errorf("calendar %v: month %+v, %v; want 3 per %v, period %v", calendar, l, ok, wantWindow, wantPeriod)
		}
		if l, ok := cfg.UnitLimit(rlsv3.RateLimitResponse_RateLimit_MINUTE, 1); !ok || l.Window != time.Minute || l.Period != store.NoPeriod {
			t.Errorf("calendar %v: minute %+v, %v; want a window of a minute", calendar, l, ok)
		}
		if _, ok := cfg.UnitLimit(rlsv3.RateLimitResponse_RateLimit_UNKNOWN, 1); ok {
			t.Errorf("calendar %v: UNKNOWN reported as a unit", calendar)
		}
	}
}
