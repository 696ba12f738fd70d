package decide_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/envoy"
	"github.com/sluicerate/sluice/internal/envoy/decide"
	"github.com/sluicerate/sluice/internal/envoy/envoytest"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/storetest"
)

// setup returns a limiter over a fresh memory store on a manual clock.
func setup(t *testing.T) (*sluice.Limiter, *storetest.Clock) {
	t.Helper()
	clk := storetest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	st := memstore.New(memstore.Config{Clock: clk.Now})
	t.Cleanup(func() { st.Close() })
	return sluice.NewLimiter(st, sluice.Config{}), clk
}

func load(t *testing.T, files ...string) *envoy.Config {
	t.Helper()
	var srcs []envoy.Source
	for i := 0; i+1 < len(files); i += 2 {
		srcs = append(srcs, envoy.Source{Name: files[i], Data: []byte(files[i+1])})
	}
	c, err := envoy.Parse(srcs, envoy.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestUpstreamScenarios replays envoyproxy/ratelimit's integration test and
// example scripts in process, on the memory store and a clock that stands
// still: every figure is exact.
func TestUpstreamScenarios(t *testing.T) {
	for _, sc := range []envoytest.Scenario{envoytest.Integration(decide.AllOrNothing), envoytest.Integration(decide.PerDescriptor), envoytest.Examples()} {
		t.Run(sc.Name, func(t *testing.T) {
			cfg, err := envoy.Load(envoytest.Dir(sc.Dir), envoy.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			lim, _ := setup(t)
			passed, differ := envoytest.Run(t, sc, func(req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
				res, err := decide.Decide(context.Background(), cfg, lim, req, decide.Options{Counting: sc.Counting})
				return res.Response, err
			}, false)
			t.Logf("%s: %d of %d steps pass, %d of them differ from upstream because windows slide", sc.Name, passed, len(sc.Steps), differ)
		})
	}
}

func req(domain string, hits uint32, descs ...[][2]string) *rlsv3.RateLimitRequest {
	s := envoytest.Step{Domain: domain, Descriptors: descs, Hits: hits}
	return s.Request()
}

// TestSlidingWindow: a limit of one a minute admits again exactly a minute
// after the admitted hit, and duration_until_reset counts down to it.
func TestSlidingWindow(t *testing.T) {
	cfg := load(t, "a.yaml", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 1}\n")
	lim, clk := setup(t)
	ctx := context.Background()
	r := req("d", 0, [][2]string{{"k", "v"}})
	steps := []struct {
		after time.Duration
		code  rlsv3.RateLimitResponse_Code
		reset int64
	}{
		{0, rlsv3.RateLimitResponse_OK, 60},
		{30 * time.Second, rlsv3.RateLimitResponse_OVER_LIMIT, 30},
		{29*time.Second + 500*time.Millisecond, rlsv3.RateLimitResponse_OVER_LIMIT, 1},
		{500 * time.Millisecond, rlsv3.RateLimitResponse_OK, 60},
	}
	for i, s := range steps {
		clk.Advance(s.after)
		res, err := decide.Decide(ctx, cfg, lim, r, decide.Options{})
		if err != nil {
			t.Fatal(err)
		}
		st := res.Response.Statuses[0]
		if st.Code != s.code || st.DurationUntilReset.GetSeconds() != s.reset {
			t.Errorf("step %d: %v reset %ds, want %v reset %ds", i+1, st.Code, st.DurationUntilReset.GetSeconds(), s.code, s.reset)
		}
	}
}

// TestBeyondUpstream: any window (unit_multiplier, window), several limits
// on a descriptor, a request's own limit, hits above the limit, hits 0.
func TestBeyondUpstream(t *testing.T) {
	cfg := load(t, "a.yaml", `domain: d
descriptors:
  - key: mult
    rate_limit: {unit: second, unit_multiplier: 90, requests_per_unit: 2}
  - key: window
    rate_limit: {window: 1h30m, requests_per_unit: 2, name: w}
  - key: both
    rate_limits:
      - {unit: second, requests_per_unit: 2}
      - {unit: hour, requests_per_unit: 3}
  - key: five
    rate_limit: {unit: minute, requests_per_unit: 5}
`)
	lim, clk := setup(t)
	ctx := context.Background()
	ask := func(r *rlsv3.RateLimitRequest) *rlsv3.RateLimitResponse {
		t.Helper()
		res, err := decide.Decide(ctx, cfg, lim, r, decide.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return res.Response
	}
	got := ask(req("d", 0, [][2]string{{"mult", "x"}})).Statuses[0]
	// 90 seconds is not a whole number of minutes: 90 SECOND.
	if got.CurrentLimit.Unit != rlsv3.RateLimitResponse_RateLimit_SECOND || got.CurrentLimit.UnitMultiplier.GetValue() != 90 || got.DurationUntilReset.GetSeconds() != 90 {
		t.Errorf("unit_multiplier 90: %v", got)
	}
	got = ask(req("d", 0, [][2]string{{"window", "x"}})).Statuses[0]
	if got.CurrentLimit.Unit != rlsv3.RateLimitResponse_RateLimit_MINUTE || got.CurrentLimit.UnitMultiplier.GetValue() != 90 || got.CurrentLimit.Name != "w" || got.DurationUntilReset.GetSeconds() != 5400 {
		t.Errorf("window 1h30m: %v", got)
	}
	// Several limits: 2 a second and 3 an hour.
	for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
		if got := ask(req("d", 0, [][2]string{{"both", "x"}})); got.OverallCode != want {
			t.Errorf("both, hit %d at once: %v, want %v", i+1, got.OverallCode, want)
		}
	}
	clk.Advance(time.Second)
	got = ask(req("d", 0, [][2]string{{"both", "x"}})).Statuses[0]
	if got.Code != rlsv3.RateLimitResponse_OK || got.CurrentLimit.Unit != rlsv3.RateLimitResponse_RateLimit_HOUR || got.LimitRemaining != 0 {
		t.Errorf("both, third hit a second later: %v, want OK with the hour's limit, 0 remaining", got)
	}
	got = ask(req("d", 0, [][2]string{{"both", "x"}})).Statuses[0]
	if got.Code != rlsv3.RateLimitResponse_OVER_LIMIT || got.CurrentLimit.Unit != rlsv3.RateLimitResponse_RateLimit_HOUR || got.DurationUntilReset.GetSeconds() != 3599 {
		t.Errorf("both, fourth hit: %v, want OVER_LIMIT by the hour, 3599s (the first hit leaves the hour then)", got)
	}
	// hits_addend 8 over a limit of 5: OVER_LIMIT, 0 remaining, nothing counted.
	got = ask(req("d", 8, [][2]string{{"five", "x"}})).Statuses[0]
	if got.Code != rlsv3.RateLimitResponse_OVER_LIMIT || got.LimitRemaining != 0 {
		t.Errorf("8 hits on 5: %v", got)
	}
	got = ask(req("d", 5, [][2]string{{"five", "x"}})).Statuses[0]
	if got.Code != rlsv3.RateLimitResponse_OK || got.LimitRemaining != 0 {
		t.Errorf("5 hits on 5 after a denied 8: %v, want OK, 0 remaining", got)
	}
	// Per descriptor, 8 on 5 are counted, as envoyproxy/ratelimit counts
	// them (a cost after the response): a check of 0 is over until they
	// leave a minute later.
	res, err := decide.Decide(ctx, cfg, lim, req("d", 8, [][2]string{{"five", "y"}}), decide.Options{Counting: decide.PerDescriptor})
	if err != nil || res.Response.Statuses[0].Code != rlsv3.RateLimitResponse_OVER_LIMIT || res.Response.Statuses[0].DurationUntilReset.GetSeconds() != 60 {
		t.Errorf("8 hits on 5 per descriptor: %v, %v; want OVER_LIMIT, reset in 60s", res.Response, err)
	}
	check := req("d", 0, [][2]string{{"five", "y"}})
	check.Descriptors[0].HitsAddend = wrapperspb.UInt64(0)
	if got := ask(check).Statuses[0]; got.Code != rlsv3.RateLimitResponse_OVER_LIMIT || got.DurationUntilReset.GetSeconds() != 60 {
		t.Errorf("hits 0 after 8 counted on 5: %v, want OVER_LIMIT for 60s", got)
	}
	clk.Advance(time.Minute)
	if got := ask(check).Statuses[0]; got.Code != rlsv3.RateLimitResponse_OK || got.LimitRemaining != 5 {
		t.Errorf("hits 0 a minute after 8 counted on 5: %v, want OK, 5 remaining", got)
	}
	// A descriptor's hits_addend of 0 reports without counting.
	r := req("d", 0, [][2]string{{"mult", "y"}})
	r.Descriptors[0].HitsAddend = wrapperspb.UInt64(0)
	for range 3 {
		if got := ask(r).Statuses[0]; got.Code != rlsv3.RateLimitResponse_OK || got.LimitRemaining != 2 {
			t.Errorf("hits 0: %v, want OK with 2 remaining", got)
		}
	}
	// A request's own limit.
	r = req("d", 0, [][2]string{{"anything", "z"}})
	r.Descriptors[0].Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 1, Unit: typev3.RateLimitUnit_MINUTE}
	if got := ask(r); got.OverallCode != rlsv3.RateLimitResponse_OK || got.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 1 {
		t.Errorf("own limit, first: %v", got)
	}
	if got := ask(r); got.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Errorf("own limit, second: %v", got)
	}
}

// TestHeaders: the x-ratelimit headers and the IETF ones, on request.
func TestHeaders(t *testing.T) {
	cfg := load(t, "a.yaml", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 2}\n")
	lim, _ := setup(t)
	res, err := decide.Decide(context.Background(), cfg, lim, req("d", 0, [][2]string{{"k", "v"}}), decide.Options{Headers: decide.Headers{XRateLimit: true, RateLimit: true}})
	if err != nil {
		t.Fatal(err)
	}
	h := map[string]string{}
	for _, kv := range res.Response.ResponseHeadersToAdd {
		h[kv.Key] = kv.Value
	}
	if h["x-ratelimit-limit"] != "2" || h["x-ratelimit-remaining"] != "1" || h["x-ratelimit-reset"] != "60" {
		t.Errorf("x-ratelimit headers: %v", h)
	}
	if !strings.Contains(h["ratelimit"], "r=1") {
		t.Errorf("RateLimit header: %v", h)
	}
}

// TestBadRequests: no domain, no descriptors, negative hits.
func TestBadRequests(t *testing.T) {
	cfg := load(t, "a.yaml", "domain: d\n")
	lim, _ := setup(t)
	neg := req("d", 0, [][2]string{{"k", "v"}})
	neg.Descriptors[0].IsNegativeHits = true
	for _, r := range []*rlsv3.RateLimitRequest{req("", 0, [][2]string{{"k", "v"}}), req("d", 0), neg} {
		if _, err := decide.Decide(context.Background(), cfg, lim, r, decide.Options{}); !errors.Is(err, decide.ErrBadRequest) {
			t.Errorf("%v: %v, want ErrBadRequest", r, err)
		}
	}
}

// TestUnlimited: a request no limit applies to (an unlimited descriptor, a
// domain not configured) is OK, and its decision is Unlimited with
// sluice.UnlimitedRemaining, a figure every wire format carries exactly.
func TestUnlimited(t *testing.T) {
	cfg := load(t, "a.yaml", "domain: d\ndescriptors:\n  - key: free\n    rate_limit: {unlimited: true}\n")
	lim, _ := setup(t)
	for _, r := range []*rlsv3.RateLimitRequest{req("d", 0, [][2]string{{"free", "x"}}), req("other", 0, [][2]string{{"k", "v"}})} {
		res, err := decide.Decide(context.Background(), cfg, lim, r, decide.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if d := res.Decision; !d.Allowed || !d.Unlimited || d.Remaining != sluice.UnlimitedRemaining || len(d.Limits()) != 0 {
			t.Errorf("%s: decision %+v, want allowed, unlimited, remaining %d, no limits", r.GetDomain(), d, int64(sluice.UnlimitedRemaining))
		}
		if res.Response.OverallCode != rlsv3.RateLimitResponse_OK {
			t.Errorf("%s: %v, want OK", r.GetDomain(), res.Response)
		}
	}
}

// TestBudget: a limit with a budget is answered from this Limiter's
// slices of its window, never past its limit, and a denial still comes
// from the store with its wait.
func TestBudget(t *testing.T) {
	cfg := load(t, "a.yaml", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 100, budget: 10s}\n")
	clk := storetest.NewClock(storetest.T0)
	lim := sluice.NewLimiter(memstore.New(memstore.Config{Clock: clk.Now}), sluice.Config{Clock: clk})
	ctx := context.Background()
	ok := 0
	for range 150 {
		res, err := decide.Decide(ctx, cfg, lim, req("d", 0, [][2]string{{"k", "v"}}), decide.Options{})
		if err != nil {
			t.Fatal(err)
		}
		st := res.Response.Statuses[0]
		switch st.Code {
		case rlsv3.RateLimitResponse_OK:
			ok++
		case rlsv3.RateLimitResponse_OVER_LIMIT:
			if st.DurationUntilReset.AsDuration() <= 0 {
				t.Fatalf("a denial without the store's wait: %v", st)
			}
		}
		if st.LimitRemaining > 100 {
			t.Fatalf("remaining %d above the limit", st.LimitRemaining)
		}
		clk.Advance(time.Millisecond)
	}
	if st := lim.BudgetStats(); ok != 100 || st.Local == 0 || st.SlicesLeased == 0 {
		t.Errorf("%d admitted, budget stats %+v; want 100, most from slices", ok, st)
	}
}
