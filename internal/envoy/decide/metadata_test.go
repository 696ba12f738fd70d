package decide_test

import (
	"context"
	"strings"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicerate/sluice/internal/envoy"
	"github.com/sluicerate/sluice/internal/envoy/decide"
	"github.com/sluicerate/sluice/internal/envoy/envoytest"
)

// TestQuotaScenarios replays upstream's quota scripts in process: the
// answer goes through while one quota descriptor has room, and its dynamic
// metadata names the first that does.
func TestQuotaScenarios(t *testing.T) {
	for _, sc := range envoytest.Quota() {
		t.Run(sc.Name, func(t *testing.T) {
			cfg, err := envoy.Load(envoytest.Dir(sc.Dir), envoy.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			lim, _ := setup(t)
			passed, _ := envoytest.Run(t, sc, func(req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
				res, err := decide.Decide(context.Background(), cfg, lim, req, decide.Options{Counting: sc.Counting, DynamicMetadata: sc.Metadata})
				return res.Response, err
			}, false)
			if passed != len(sc.Steps) {
				t.Errorf("%d of %d steps pass", passed, len(sc.Steps))
			}
		})
	}
}

func mustStruct(t *testing.T, m map[string]any) *structpb.Struct {
	t.Helper()
	s, err := structpb.NewStruct(m)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestDynamicMetadata: the shape envoyproxy/ratelimit sends, the metadata
// of the descriptors that passed merged in request order (the first to set
// a key keeps it, mappings merge), none of one over its limit, unlimited
// or without a limit, and the configuration's metadata never changed by a
// merge.
func TestDynamicMetadata(t *testing.T) {
	cfg := load(t, "a.yaml", `domain: d
descriptors:
  - key: a
    rate_limit: {unit: minute, requests_per_unit: 5}
    metadata: {name: a, route: {cluster: a, weight: 1}, tags: [x, y]}
  - key: b
    rate_limit: {unit: minute, requests_per_unit: 5}
    metadata: {name: b, route: {cluster: b, zone: z}, extra: 2}
  - key: full
    rate_limit: {unit: minute, requests_per_unit: 0}
    metadata: {full: true}
  - key: shadow
    shadow_mode: true
    rate_limit: {unit: minute, requests_per_unit: 0}
    metadata: {shadow: true}
  - key: free
    rate_limit: {unlimited: true}
    metadata: {free: true}
  - key: nolimit
    metadata: {nolimit: true}
`)
	lim, _ := setup(t)
	r := req("d", 3, [][2]string{{"a", "1"}}, [][2]string{{"full", "1"}}, [][2]string{{"b", "1"}}, [][2]string{{"shadow", "1"}},
		[][2]string{{"free", "1"}}, [][2]string{{"nolimit", "1"}}, [][2]string{{"own", "1"}})
	r.Descriptors[2].HitsAddend = wrapperspb.UInt64(1)
	r.Descriptors[6].Limit = &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 9, Unit: typev3.RateLimitUnit_HOUR}
	want := map[string]any{
		"domain":     "d",
		"hitsAddend": 3,
		"descriptors": []any{
			map[string]any{"entries": []any{"a=1"}},
			map[string]any{"entries": []any{"full=1"}},
			map[string]any{"entries": []any{"b=1"}, "hitsAddend": 1},
			map[string]any{"entries": []any{"shadow=1"}},
			map[string]any{"entries": []any{"free=1"}},
			map[string]any{"entries": []any{"nolimit=1"}},
			map[string]any{"entries": []any{"own=1"}, "limit": strings.TrimSpace(r.Descriptors[6].Limit.String())},
		},
		"metadata": map[string]any{
			"name":   "a",
			"route":  map[string]any{"cluster": "a", "weight": 1, "zone": "z"},
			"tags":   []any{"x", "y"},
			"extra":  2,
			"shadow": true,
		},
	}
	for i := range 2 { // twice: the first merge must not change the configuration's metadata
		res, err := decide.Decide(context.Background(), cfg, lim, r, decide.Options{DynamicMetadata: true})
		if err != nil {
			t.Fatal(err)
		}
		if got := res.Response.DynamicMetadata; !proto.Equal(got, mustStruct(t, want)) {
			t.Errorf("request %d: dynamic metadata\n got %v\nwant %v", i+1, got, mustStruct(t, want))
		}
		if res.Response.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT {
			t.Errorf("request %d: %v, want OVER_LIMIT (full is over)", i+1, res.Response.OverallCode)
		}
	}
	res, err := decide.Decide(context.Background(), cfg, lim, r, decide.Options{})
	if err != nil || res.Response.DynamicMetadata != nil {
		t.Errorf("without DynamicMetadata: %v, %v; want none", res.Response.GetDynamicMetadata(), err)
	}
}

// TestQuotaMode: a descriptor in quota_mode over its limit reports
// OVER_LIMIT, yet the answer is OVER_LIMIT only when every quota
// descriptor is, or another descriptor is; QuotaMode puts them all in it.
func TestQuotaMode(t *testing.T) {
	cfg := load(t, "a.yaml", `domain: d
descriptors:
  - key: q1
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 1}
  - key: q2
    quota_mode: true
    rate_limit: {unit: minute, requests_per_unit: 2}
  - key: plain
    rate_limit: {unit: minute, requests_per_unit: 0}
`)
	const ok, over = rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT
	lim, _ := setup(t)
	both := req("d", 0, [][2]string{{"q1", "x"}}, [][2]string{{"q2", "x"}})
	for i, want := range [][3]rlsv3.RateLimitResponse_Code{{ok, ok, ok}, {ok, over, ok}, {over, over, over}} {
		res, err := decide.Decide(context.Background(), cfg, lim, both, decide.Options{})
		if err != nil {
			t.Fatal(err)
		}
		got := [3]rlsv3.RateLimitResponse_Code{res.Response.OverallCode, res.Response.Statuses[0].Code, res.Response.Statuses[1].Code}
		if got != want {
			t.Errorf("request %d: overall, q1, q2 %v, want %v", i+1, got, want)
		}
	}
	// A descriptor outside quota_mode over its limit: OVER_LIMIT, whatever the quotas say.
	lim, _ = setup(t)
	if res, _ := decide.Decide(context.Background(), cfg, lim, req("d", 0, [][2]string{{"q2", "y"}}, [][2]string{{"plain", "y"}}), decide.Options{}); res.Response.GetOverallCode() != over {
		t.Errorf("quota with room and plain over: %v, want OVER_LIMIT", res.Response)
	}
	// QUOTA_MODE: plain is a quota too; q2 has room, so the answer is OK.
	lim, _ = setup(t)
	if res, _ := decide.Decide(context.Background(), cfg, lim, req("d", 0, [][2]string{{"q2", "y"}}, [][2]string{{"plain", "y"}}), decide.Options{QuotaMode: true}); res.Response.GetOverallCode() != ok || res.Response.Statuses[1].Code != over {
		t.Errorf("QuotaMode, q2 with room and plain over: %v, want OK with plain OVER_LIMIT", res.Response)
	}
}
