package decide_test

import (
	"context"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicerate/sluice/internal/envoy/decide"
	"github.com/sluicerate/sluice/internal/overrides"
	"github.com/sluicerate/sluice/memstore"
)

// TestRuntimeOverrides: a domain's limit takes a runtime override for one
// value, and for values that start with a prefix, as a policy's rule does:
// the response reports the override's limit and window; a blocked value is
// over the limit; other values keep the file's limit.
func TestRuntimeOverrides(t *testing.T) {
	cfg := load(t, "a.yaml", `domain: rl
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: client
    descriptors:
      - key: path
        rate_limit: {unit: hour, requests_per_unit: 10}
`)
	rules := cfg.Rules()
	if len(rules) != 2 || rules[0].Name != "user" || rules[0].Keys[0] != "user" || rules[1].Name != "client.path" || len(rules[1].Keys) != 2 {
		t.Fatalf("rules %+v, want user by user, client.path by client and path, in file order", rules)
	}
	lim, clk := setup(t)
	m := overrides.New(overrides.Options{Store: memstore.New(memstore.Config{Clock: clk.Now}), Now: clk.Now})
	m.SetTargets("envoy", overrides.EnvoyTargets(cfg))
	ctx := context.Background()
	n := func(v int64) *int64 { return &v }
	for _, o := range []overrides.Override{
		{Domain: "rl", Rule: "user", Values: []string{"vip"}, Limit: n(5), Window: overrides.Duration(3600e9)},
		{Domain: "rl", Rule: "user", Values: []string{"bot_*"}, Blocked: true},
		{Domain: "rl", Rule: "client.path", Values: []string{"acme", "/api/*"}, Limit: n(1)},
	} {
		if _, err := m.Set(ctx, "t", o); err != nil {
			t.Fatalf("%+v: %v", o, err)
		}
	}
	ask := func(descs ...[2]string) *rlsv3.RateLimitResponse_DescriptorStatus {
		t.Helper()
		res, err := decide.Decide(ctx, cfg, lim, req("rl", 0, descs), decide.Options{Overrides: m})
		if err != nil {
			t.Fatal(err)
		}
		return res.Response.Statuses[0]
	}
	st := ask([2]string{"user", "vip"})
	if st.Code != rlsv3.RateLimitResponse_OK || st.CurrentLimit.RequestsPerUnit != 5 || st.CurrentLimit.Unit != rlsv3.RateLimitResponse_RateLimit_HOUR ||
		st.LimitRemaining != 4 {
		t.Errorf("vip: %v, want OK with 5 per hour, 4 left", st)
	}
	if st := ask([2]string{"user", "bot_7"}); st.Code != rlsv3.RateLimitResponse_OVER_LIMIT || st.CurrentLimit.RequestsPerUnit != 0 {
		t.Errorf("bot_7, blocked: %v, want OVER_LIMIT with a limit of 0", st)
	}
	if st := ask([2]string{"user", "ann"}); st.CurrentLimit.RequestsPerUnit != 2 || st.CurrentLimit.Unit != rlsv3.RateLimitResponse_RateLimit_MINUTE {
		t.Errorf("ann: %v, want the file's 2 per minute", st)
	}
	path := [][2]string{{"client", "acme"}, {"path", "/api/orders"}}
	for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
		if st := ask(path...); st.Code != want || st.CurrentLimit.RequestsPerUnit != 1 {
			t.Errorf("acme /api/orders hit %d: %v, want %v under 1 per hour", i+1, st, want)
		}
	}
	if st := ask([2]string{"client", "other"}, [2]string{"path", "/api/orders"}); st.CurrentLimit.RequestsPerUnit != 10 {
		t.Errorf("another client: %v, want the file's 10", st)
	}
}
