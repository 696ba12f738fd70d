package server

import (
	"context"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/internal/envoy/decide"
	"github.com/sluicerate/sluice/internal/redistest"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/store"
	"github.com/sluicerate/sluice/storetest"
)

// tokenBudget is the RateLimitConfig Envoy Gateway's translator pushes for
// a BackendTrafficPolicy on HTTPRoute default/llm of Gateway default/eg
// (listener http) with one rule: per x-user-id (Distinct), 100 a minute,
// cost.request 0 and cost.response from the metadata
// io.envoy.ai_gateway:llm_total_token (docs/envoy.md, Costs counted after
// the response). The cost leaves no trace here: it is in Envoy's route.
const tokenBudget = `name: default/eg/http
domain: default/eg/http
descriptors:
  - key: httproute/default/llm/rule/0/match/0
    value: httproute/default/llm/rule/0/match/0
    rate_limit: null
    descriptors:
      - key: rule-0-match-0
        value: ""
        rate_limit:
          requests_per_unit: 100
          unit: MINUTE
          unlimited: false
          name: ""
          replaces: []
        descriptors: []
        shadow_mode: false
        quota_mode: false
        detailed_metric: false
        value_to_metric: false
        share_threshold: false
    shadow_mode: false
    quota_mode: false
    detailed_metric: false
    value_to_metric: false
    share_threshold: false
`

// tokenCall is what Envoy's rate-limit filter sends for that route: the
// domain, one descriptor of the route's two actions (generic_key, then
// request_headers x-user-id) with the hits_addend of the rate limit that
// made it, and a request hits_addend of 0 (nothing in the filter state).
// On the request's path the rate limit is cost.request's, hits_addend 0;
// when the stream is done (apply_on_stream_done) cost.response's, the
// tokens the metadata holds. Nothing else tells the two calls apart.
func tokenCall(user string, hits uint64) *rlsv3.RateLimitRequest {
	const route = "httproute/default/llm/rule/0/match/0"
	return &rlsv3.RateLimitRequest{Domain: "default/eg/http", Descriptors: []*ratelimitv3.RateLimitDescriptor{{
		Entries: []*ratelimitv3.RateLimitDescriptor_Entry{
			{Key: route, Value: route},
			{Key: "rule-0-match-0", Value: user},
		},
		HitsAddend: wrapperspb.UInt64(hits),
	}}}
}

// TestEnvoyCostAfterResponse replays Envoy Gateway's token budget over
// Envoy's rate-limit service (gRPC on loopback) on the memory store and on
// Redis, both on a manual clock: a check with hits_addend 0 before the
// request, the response's tokens recorded when the stream is done. With
// per-descriptor counting (STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=false)
// a cost that overflows the budget is recorded, even one above the whole
// budget, and the next checks are OVER_LIMIT until it leaves the window;
// with all-or-nothing counting, sluice's default, it is not recorded at
// all and the next check is OK: counting after the response needs
// per-descriptor counting.
func TestEnvoyCostAfterResponse(t *testing.T) {
	t.Parallel()
	stores := []struct {
		name string
		open func(t *testing.T, clock func() time.Time) store.Store
	}{
		{"memory", func(t *testing.T, clock func() time.Time) store.Store {
			return memstore.New(memstore.Config{Clock: clock})
		}},
		{"redis", func(t *testing.T, clock func() time.Time) store.Store {
			st, err := redisstore.New(redisstore.Config{Addrs: []string{redistest.Start(t).Addr()}, Clock: clock})
			if err != nil {
				t.Fatal(err)
			}
			return st
		}},
	}
	for _, s := range stores {
		for _, counting := range []decide.Counting{decide.PerDescriptor, decide.AllOrNothing} {
			name := s.name + "/per-descriptor"
			if counting == decide.AllOrNothing {
				name = s.name + "/all-or-nothing"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				clk := storetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
				st := s.open(t, clk.Now)
				t.Cleanup(func() { st.Close() })
				replayTokenBudget(t, st, clk, counting)
			})
		}
	}
}

// replayTokenBudget runs the token budget's calls on st under counting.
func replayTokenBudget(t *testing.T, st store.Store, clk *storetest.Clock, counting decide.Counting) {
	// No configuration file, as sluice serve --envoy-config alone; a long
	// store deadline: these are semantics, not latency, on a test machine
	// that may be loaded.
	srv, err := New(st, &config.Config{}, Options{StoreTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	loadEnvoy(t, srv, EnvoyOptions{Decide: decide.Options{Counting: counting}}, map[string]string{"default-eg-http.yaml": tokenBudget})
	client := rlsv3.NewRateLimitServiceClient(grpcConn(t, &testServer{t: t, srv: srv}))
	start := clk.Now()
	const (
		ok   = rlsv3.RateLimitResponse_OK
		over = rlsv3.RateLimitResponse_OVER_LIMIT
	)
	// call sends user's call of hits at start+at and checks the answer:
	// its code, limit_remaining and duration_until_reset in seconds (-1:
	// not checked, for a check of hits 0 that fits, which reports the
	// reset a hit would leave).
	call := func(what string, at time.Duration, user string, hits uint64, code rlsv3.RateLimitResponse_Code, remaining uint32, reset int64) {
		t.Helper()
		clk.Set(start.Add(at))
		res, err := client.ShouldRateLimit(context.Background(), tokenCall(user, hits))
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		st := res.GetStatuses()[0]
		if res.GetOverallCode() != code || st.GetCode() != code || st.GetLimitRemaining() != remaining ||
			reset >= 0 && st.GetDurationUntilReset().GetSeconds() != reset || st.GetCurrentLimit().GetRequestsPerUnit() != 100 {
			t.Errorf("%s (at %v, hits %d): %v; want %v, 100 a minute, %d remaining, reset in %ds", what, at, hits, res, code, remaining, reset)
		}
	}
	const sec = time.Second
	call("alice's first request", 0, "alice", 0, ok, 100, -1)
	call("its 60 tokens", 1*sec, "alice", 60, ok, 40, 60)
	call("alice's second request", 2*sec, "alice", 0, ok, 40, -1)
	if counting == decide.AllOrNothing {
		// 70 tokens do not fit the 40 left: refused (until the 60 leave
		// at 61s), recorded nowhere, and the budget still shows 40.
		call("its 70 tokens, refused", 3*sec, "alice", 70, over, 0, 58)
		call("alice's third request, the 70 not counted", 4*sec, "alice", 0, ok, 40, -1)
		// 150, above the whole budget, can never fit: not counted.
		call("150 tokens, above the budget", 5*sec, "alice", 150, over, 0, 60)
		call("alice's next request, the 150 not counted", 6*sec, "alice", 0, ok, 40, -1)
		call("after the 60 left", 61*sec, "alice", 0, ok, 100, -1)
		return
	}
	// Recorded over the budget: the answer (which Envoy ignores) is
	// OVER_LIMIT, and 130 of 100 are counted until the 60 leave at 61s.
	call("its 70 tokens, over the budget", 3*sec, "alice", 70, over, 0, 60)
	call("alice's third request", 4*sec, "alice", 0, over, 0, 57)
	call("bob's first request", 4*sec, "bob", 0, ok, 100, -1)
	call("a µs before the 60 leave", 61*sec-time.Microsecond, "alice", 0, over, 0, 1)
	call("the 60 have left: 70 counted", 61*sec, "alice", 0, ok, 30, -1)
	// 150, above the whole budget, is recorded too (envoyproxy/ratelimit
	// counts it): 220 counted, over until the 150 leave at 2m02s.
	call("150 tokens, above the budget", 62*sec, "alice", 150, over, 0, 60)
	call("the 70 have left, the 150 not", 63*sec, "alice", 0, over, 0, 59)
	call("a µs before the 150 leave", 122*sec-time.Microsecond, "alice", 0, over, 0, 1)
	call("the 150 have left", 122*sec, "alice", 0, ok, 100, -1)
}
