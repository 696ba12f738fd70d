package server

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/redistest"
	"github.com/sluicerate/sluice/internal/wire"
	"github.com/sluicerate/sluice/memstore"
	sluicev1 "github.com/sluicerate/sluice/proto/sluice/v1"
	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/store"
	"github.com/sluicerate/sluice/storetest"
)

// costConfig is a policy per algorithm of one rule, a million a minute
// per user, and a policy of leases for settles.
const costConfig = `policies:
  - name: api
    limits:
      - {name: per-user, by: [user], limit: 1000000, window: 1m}
  - name: api-counter
    limits:
      - {name: per-user, by: [user], limit: 1000000, window: 1m, algorithm: sliding-counter}
  - name: api-gcra
    limits:
      - {name: per-user, by: [user], limit: 1000000, window: 1m, algorithm: gcra}
  - name: llm
    limits:
      - {name: tokens, by: [user], limit: 1000000, window: 1m}
      - {name: in-flight, by: [user], concurrency: 4, lease: 1m}
`

// costServer is a server of costConfig over st, on st's clock.
func costServer(t *testing.T, st store.Store) *testServer {
	t.Helper()
	// A long store deadline: these are semantics, on a machine that may be
	// loaded.
	return testServerFor(t, st, costConfig, Options{StoreTimeout: 10 * time.Second})
}

// answer is a decision or a refusal as one front gave it.
type answer struct {
	code     string // the problem code (HTTP) or status code (gRPC); empty for a decision
	detail   string
	decision wire.DecisionJSON
}

// caller sends one call of op ("decide", "peek" or "record") of cost for
// user on policy, over HTTP or gRPC.
type caller func(op, policy, user string, cost int64) answer

func httpFront(ts *testServer) caller {
	return func(op, policy, user string, cost int64) answer {
		ts.t.Helper()
		w := ts.do("POST", "/v1/"+op, fmt.Sprintf(`{"policy":%q,"attributes":{"user":%q},"cost":%d}`, policy, user, cost))
		if w.Code != 200 {
			var p httplimit.Problem
			if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || w.Code != 400 {
				ts.t.Fatalf("POST /v1/%s cost %d: %d %s", op, cost, w.Code, w.Body)
			}
			return answer{code: p.Code, detail: p.Detail}
		}
		var d wire.DecisionJSON
		if err := json.Unmarshal(w.Body.Bytes(), &d); err != nil {
			ts.t.Fatal(err)
		}
		return answer{decision: d}
	}
}

func grpcFront(ts *testServer) caller {
	client := sluicev1.NewSluiceClient(ts.conn())
	return func(op, policy, user string, cost int64) answer {
		ts.t.Helper()
		req := &sluicev1.DecideRequest{Policy: policy, Attributes: map[string]string{"user": user}, Cost: &cost}
		call := map[string]func(context.Context, *sluicev1.DecideRequest) (*sluicev1.Decision, error){
			"decide": func(ctx context.Context, r *sluicev1.DecideRequest) (*sluicev1.Decision, error) {
				return client.Decide(ctx, r)
			},
			"peek": func(ctx context.Context, r *sluicev1.DecideRequest) (*sluicev1.Decision, error) {
				return client.Peek(ctx, r)
			},
			"record": func(ctx context.Context, r *sluicev1.DecideRequest) (*sluicev1.Decision, error) {
				return client.Record(ctx, r)
			},
		}[op]
		res, err := call(context.Background(), req)
		if err != nil {
			s, _ := status.FromError(err)
			if s.Code() != codes.InvalidArgument {
				ts.t.Fatalf("gRPC %s cost %d: %v", op, cost, err)
			}
			return answer{code: s.Code().String(), detail: s.Message()}
		}
		d := wire.DecisionJSON{Allowed: res.GetAllowed(), Remaining: res.GetRemaining(), Degraded: res.GetDegraded()}
		for _, l := range res.GetLimits() {
			d.Limits = append(d.Limits, wire.LimitJSON{Name: l.GetName(), Limit: l.GetLimit(), Used: l.GetUsed(), Remaining: l.GetRemaining()})
		}
		return answer{decision: d}
	}
}

// checkDecision fails unless a is a decision, not degraded, whose every
// rule has used 0 to MaxCost and remaining 0 to its limit.
func checkDecision(t *testing.T, what string, a answer) wire.DecisionJSON {
	t.Helper()
	d := a.decision
	if a.code != "" {
		t.Fatalf("%s: refused (%s: %s), want a decision", what, a.code, a.detail)
	}
	if d.Degraded || len(d.Limits) == 0 {
		t.Fatalf("%s: %+v, want a decision of the store, not degraded", what, d)
	}
	for _, l := range d.Limits {
		if l.Used < 0 || l.Used > sluice.MaxCost || l.Remaining < 0 || l.Remaining > l.Limit {
			t.Errorf("%s: rule %s used %d, remaining %d of %d", what, l.Name, l.Used, l.Remaining, l.Limit)
		}
	}
	return d
}

// TestHugeCost replays the two records of cost 2^63-1 that used to wrap a
// window, over HTTP and gRPC, on the memory store, Redis and a Redis
// Cluster, for each algorithm: the record is refused and changes nothing;
// records of 2^53, the bound, saturate the window; no answer is degraded;
// and the next decisions are what the window holds.
func TestHugeCost(t *testing.T) {
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
		{"cluster", func(t *testing.T, clock func() time.Time) store.Store {
			st, err := redisstore.New(redisstore.Config{Addrs: redistest.StartCluster(t).Addrs(), Mode: redisstore.Cluster, Clock: clock})
			if err != nil {
				t.Fatal(err)
			}
			return st
		}},
	}
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			clk := storetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			st := s.open(t, clk.Now)
			t.Cleanup(func() { st.Close() })
			ts := costServer(t, st)
			for _, f := range []struct {
				name string
				call caller
			}{{"http", httpFront(ts)}, {"grpc", grpcFront(ts)}} {
				for _, policy := range []string{"api", "api-counter", "api-gcra"} {
					clk.Set(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
					hugeCost(t, clk, f.call, f.name+"/"+policy, policy, "u-"+f.name)
				}
			}
		})
	}
}

// hugeCost runs the sequence on policy for user, through call.
func hugeCost(t *testing.T, clk *storetest.Clock, call caller, what, policy, user string) {
	t.Helper()
	for i := range 2 {
		a := call("record", policy, user, math.MaxInt64)
		if a.code != "invalid_cost" && a.code != codes.InvalidArgument.String() || !strings.Contains(a.detail, "2^53") {
			t.Errorf("%s: record #%d of 2^63-1: %+v, want refused as invalid_cost naming 2^53", what, i+1, a)
		}
	}
	d := checkDecision(t, what+": peek after the refusals", call("peek", policy, user, 1))
	if !d.Allowed || d.Limits[0].Used != 1 {
		t.Errorf("%s: peek after the refusals: %+v, want allowed, used 1 (nothing recorded)", what, d)
	}
	full := int64(sluice.MaxCost) // what the window counts after records of 2^53
	if policy == "api-gcra" {
		full = 1000000 // the bucket's burst
	}
	for i := range 2 {
		d := checkDecision(t, fmt.Sprintf("%s: record #%d of 2^53", what, i+1), call("record", policy, user, sluice.MaxCost))
		if d.Allowed || d.Limits[0].Used != full || d.Limits[0].Remaining != 0 {
			t.Errorf("%s: record #%d of 2^53: %+v, want not allowed, used %d, remaining 0", what, i+1, d, full)
		}
	}
	d = checkDecision(t, what+": next decide", call("decide", policy, user, 1))
	if d.Allowed || d.Limits[0].Used != full || d.Limits[0].Remaining != 0 {
		t.Errorf("%s: next decide: %+v, want denied, used %d", what, d, full)
	}
	if policy == "api-gcra" {
		return // the bucket is held the longest a bucket is (store.MaxBucket)
	}
	// The records leave the window a minute after them (the counter's
	// bucket a minute after that).
	after := time.Minute
	if policy == "api-counter" {
		after = 2 * time.Minute
	}
	clk.Advance(after - time.Microsecond)
	if d := checkDecision(t, what+": 1µs before the records leave", call("decide", policy, user, 1)); d.Allowed {
		t.Errorf("%s: 1µs before the records leave: allowed", what)
	}
	clk.Advance(time.Microsecond)
	if d := checkDecision(t, what+": once the records left", call("decide", policy, user, 1)); !d.Allowed || d.Limits[0].Used != 1 {
		t.Errorf("%s: once the records left: %+v, want allowed, used 1", what, d)
	}
}

// TestCostProblems checks the refusal of every amount out of its range,
// in each front: HTTP (decide, peek, record, acquire, settle, reserve,
// batch), gRPC and forward-auth's cost; nothing is recorded.
func TestCostProblems(t *testing.T) {
	ts := newTestServer(t, testConfig)
	attrs := `"attributes":{"category":"a"}`
	for _, c := range []struct {
		path, body, detail string
	}{
		{"/v1/decide", `{"policy":"notify",` + attrs + `,"cost":9007199254740993}`, "1 to 2^53"},
		{"/v1/peek", `{"policy":"notify",` + attrs + `,"cost":9223372036854775807}`, "1 to 2^53"},
		{"/v1/record", `{"policy":"notify",` + attrs + `,"cost":9223372036854775807}`, "1 to 2^53"},
		{"/v1/record", `{"policy":"notify",` + attrs + `,"cost":-9223372036854775808}`, "1 to 2^53"},
		{"/v1/acquire", `{"policy":"notify",` + attrs + `,"cost":9007199254740993}`, "1 to 2^53"},
		{"/v1/reserve", `{"schedule":"carrier","attributes":{"carrier":"1"},"cost":9007199254740993}`, "1 to 2^53"},
	} {
		w := ts.do("POST", c.path, c.body)
		var p httplimit.Problem
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || w.Code != 400 || p.Code != "invalid_cost" || !strings.Contains(p.Detail, c.detail) {
			t.Errorf("POST %s %s: %d %s, want 400 invalid_cost saying %q", c.path, c.body, w.Code, w.Body, c.detail)
		}
	}
	// A settle takes 0 to 2^53: its refusal says so, and nothing else.
	w := ts.do("POST", "/v1/acquire", `{"policy":"notify",`+attrs+`}`)
	var acq struct {
		Lease string `json:"lease"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &acq); err != nil || acq.Lease == "" {
		t.Fatalf("acquire: %d %s", w.Code, w.Body)
	}
	for _, cost := range []string{"-1", "9007199254740993"} {
		w := ts.do("POST", "/v1/settle", `{"lease":"`+acq.Lease+`","cost":`+cost+`}`)
		var p httplimit.Problem
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || w.Code != 400 || p.Code != "invalid_cost" ||
			!strings.Contains(p.Detail, "0 to 2^53") || strings.Contains(p.Detail, "at least 1") {
			t.Errorf("settle at %s: %d %s, want 400 invalid_cost saying 0 to 2^53 alone", cost, w.Code, w.Body)
		}
	}
	if w := ts.do("POST", "/v1/settle", `{"lease":"`+acq.Lease+`","cost":0}`); w.Code != 200 || !strings.Contains(w.Body.String(), `"held":true`) {
		t.Errorf("settle at 0 after the refusals: %d %s, want held", w.Code, w.Body)
	}
	// gRPC: InvalidArgument naming the range.
	client := sluicev1.NewSluiceClient(ts.conn())
	for _, cost := range []int64{sluice.MaxCost + 1, math.MaxInt64} {
		_, err := client.Record(context.Background(), &sluicev1.DecideRequest{Policy: "notify", Attributes: map[string]string{"category": "a"}, Cost: &cost})
		if s, _ := status.FromError(err); s.Code() != codes.InvalidArgument || !strings.Contains(s.Message(), "1 to 2^53") {
			t.Errorf("gRPC Record cost %d: %v, want InvalidArgument naming 1 to 2^53", cost, err)
		}
	}
	d := ts.decide("/v1/peek", `{"policy":"notify",`+attrs+`}`)
	if d.Limits[0].Used != 1 {
		t.Errorf("the refusals recorded %d", d.Limits[0].Used-1)
	}
}
