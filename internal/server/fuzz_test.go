package server

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/envoy/decide"
	"github.com/sluicerate/sluice/internal/wire"
	"github.com/sluicerate/sluice/memstore"
	sluicev1 "github.com/sluicerate/sluice/proto/sluice/v1"
	"github.com/sluicerate/sluice/storetest"
)

// fuzzConfig is costConfig with a schedule and forward-auth.
const fuzzConfig = costConfig + `schedules:
  - {name: jobs, by: [user], rate: 1000/s, max_delay: 1h}
forward_auth:
  trusted_proxies: ["127.0.0.1"]
  headers: {user: X-User-Id}
`

// fuzzFronts is a server of fuzzConfig on the memory store, on a manual
// clock, with Envoy's token budget loaded in each counting model, and
// clients of its gRPC services.
type fuzzFronts struct {
	clock  *storetest.Clock
	http   *Server
	sluice sluicev1.SluiceClient
	rls    [2]rlsv3.RateLimitServiceClient // per-descriptor, all-or-nothing
}

func newFuzzFronts(f *testing.F) *fuzzFronts {
	clk := storetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st := memstore.New(memstore.Config{Clock: clk.Now})
	f.Cleanup(func() { st.Close() })
	fr := &fuzzFronts{clock: clk}
	for i, counting := range []decide.Counting{decide.PerDescriptor, decide.AllOrNothing} {
		srv := serverFor(f, st, fuzzConfig, Options{StoreTimeout: 10 * time.Second})
		loadEnvoy(f, srv, EnvoyOptions{Decide: decide.Options{Counting: counting}}, map[string]string{"default-eg-http.yaml": tokenBudget})
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			f.Fatal(err)
		}
		gs := srv.GRPCServer()
		go gs.Serve(l)
		f.Cleanup(gs.Stop)
		conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			f.Fatal(err)
		}
		f.Cleanup(func() { conn.Close() })
		fr.rls[i] = rlsv3.NewRateLimitServiceClient(conn)
		if i == 0 {
			fr.http, fr.sluice = srv, sluicev1.NewSluiceClient(conn)
		}
	}
	return fr
}

// FuzzFrontAmounts sends extreme amounts through every front of a server
// on the memory store: HTTP decide, peek, record, acquire and settle,
// reserve, batch and forward-auth; gRPC Decide, Peek, Record, Acquire and
// Settle; Envoy's ShouldRateLimit with a descriptor's hits_addend, in both
// counting models. After each answer: no failure (no 5xx, no degraded
// decision, nothing but InvalidArgument over gRPC); a refusal exactly when
// the amount is out of its range (or over the limit); in every decision,
// used 0 to 2^53 and remaining 0 to the limit; and a peek of the user's
// windows that says the same.
func FuzzFrontAmounts(f *testing.F) {
	extremes := []int64{1, 2, 999999, 1000000, 1000001, 1 << 31, sluice.MaxCost - 1, sluice.MaxCost, sluice.MaxCost + 1,
		math.MaxInt64, 0, -1, math.MinInt64}
	for i, c := range extremes {
		for op := range uint8(fuzzOps) {
			f.Add(op, c, uint64(c), extremes[(i+int(op))%len(extremes)], uint8(i%3), uint32(i)*7919)
		}
	}
	f.Add(uint8(opEnvoy), int64(1), uint64(math.MaxUint64), int64(0), uint8(0), uint32(0))
	f.Add(uint8(opEnvoyAll), int64(1), uint64(sluice.MaxCost+1), int64(0), uint8(1), uint32(0))
	fr := newFuzzFronts(f)
	f.Fuzz(func(t *testing.T, op uint8, cost int64, hits uint64, settle int64, user uint8, step uint32) {
		fr.clock.Advance(time.Duration(step%120_000_000) * time.Microsecond)
		u := "u" + strconv.Itoa(int(user%4))
		policy := [...]string{"api", "api-counter", "api-gcra"}[int(user)%3]
		fr.call(t, op%fuzzOps, policy, u, cost, hits, settle)
		for _, p := range []string{"api", "api-counter", "api-gcra", "llm"} {
			a := fr.httpCall(t, "peek", `{"policy":"`+p+`","attributes":{"user":"`+u+`"}}`)
			if a.code != "" {
				t.Fatalf("peek %s: refused %s: %s", p, a.code, a.detail)
			}
			checkFuzzDecision(t, "peek "+p, a.decision, 0)
		}
	})
}

const (
	opHTTP = iota
	opHTTPAcquire
	opBatch
	opForwardAuth
	opReserve
	opGRPC
	opGRPCAcquire
	opEnvoy
	opEnvoyAll
	fuzzOps
)

// inRange reports whether cost is a request's cost sluice takes.
func inRange(cost int64) bool { return cost >= 1 && cost <= sluice.MaxCost }

// call sends one call of op and checks its answer.
func (fr *fuzzFronts) call(t *testing.T, op uint8, policy, user string, cost int64, hits uint64, settle int64) {
	body := fmt.Sprintf(`{"policy":%q,"attributes":{"user":%q},"cost":%d}`, policy, user, cost)
	switch op {
	case opHTTP:
		for _, route := range []string{"decide", "peek", "record"} {
			fr.expect(t, route, cost, route == "record", fr.httpCall(t, route, body))
		}
	case opHTTPAcquire:
		w := fr.do(t, "POST", "/v1/acquire", fmt.Sprintf(`{"policy":"llm","attributes":{"user":%q},"cost":%d}`, user, cost))
		var acq struct {
			wire.DecisionJSON
			Lease string `json:"lease"`
		}
		if w.Code == 400 {
			fr.expectRefusal(t, "acquire", cost, false, w.Body.Bytes())
			return
		}
		if err := json.Unmarshal(w.Body.Bytes(), &acq); err != nil || w.Code != 200 && w.Code != 429 {
			t.Fatalf("acquire cost %d: %d %s", cost, w.Code, w.Body)
		}
		checkFuzzDecision(t, "acquire", acq.DecisionJSON, 0)
		if acq.Lease == "" {
			return
		}
		w = fr.do(t, "POST", "/v1/settle", fmt.Sprintf(`{"lease":%q,"cost":%d}`, acq.Lease, settle))
		valid := settle >= 0 && settle <= sluice.MaxCost
		switch {
		case valid && (w.Code != 200 || !strings.Contains(w.Body.String(), `"held":true`)):
			t.Fatalf("settle at %d: %d %s, want held", settle, w.Code, w.Body)
		case !valid && (w.Code != 400 || !strings.Contains(w.Body.String(), "0 to 2^53")):
			t.Fatalf("settle at %d: %d %s, want 400 naming 0 to 2^53", settle, w.Code, w.Body)
		case !valid:
			fr.do(t, "POST", "/v1/release", fmt.Sprintf(`{"lease":%q}`, acq.Lease))
		}
	case opBatch:
		w := fr.do(t, "POST", "/v1/record", "["+body+","+body+"]")
		var out []struct {
			Status   int                `json:"status"`
			Decision *wire.DecisionJSON `json:"decision"`
			Problem  *httplimit.Problem `json:"problem"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || w.Code != 200 || len(out) != 2 {
			t.Fatalf("batch cost %d: %d %s", cost, w.Code, w.Body)
		}
		for _, o := range out {
			if (o.Status == 200) != inRange(cost) || o.Status != 200 && (o.Problem == nil || o.Problem.Code != "invalid_cost") {
				t.Fatalf("batch record cost %d: %s", cost, w.Body)
			}
			if o.Decision != nil {
				checkFuzzDecision(t, "batch record", *o.Decision, 0)
			}
		}
	case opForwardAuth:
		r := httptest.NewRequest("GET", "/v1/forward-auth?policy="+policy+"&cost="+strconv.FormatInt(cost, 10), nil)
		r.RemoteAddr = "127.0.0.1:5555"
		r.Header.Set("X-User-Id", user)
		w := httptest.NewRecorder()
		fr.http.Handler().ServeHTTP(w, r)
		switch {
		case w.Code >= 500:
			t.Fatalf("forward-auth cost %d: %d %s", cost, w.Code, w.Body)
		case !inRange(cost) && (w.Code != 400 || !strings.Contains(w.Body.String(), "invalid_cost")):
			t.Fatalf("forward-auth cost %d: %d %s, want 400 invalid_cost", cost, w.Code, w.Body)
		case inRange(cost) && cost <= 1000000 && w.Code != 200 && w.Code != 429:
			t.Fatalf("forward-auth cost %d: %d %s, want a decision", cost, w.Code, w.Body)
		}
	case opReserve:
		w := fr.do(t, "POST", "/v1/reserve", fmt.Sprintf(`{"schedule":"jobs","attributes":{"user":%q},"cost":%d}`, user, cost))
		if w.Code >= 500 || !inRange(cost) && (w.Code != 400 || !strings.Contains(w.Body.String(), "invalid_cost")) {
			t.Fatalf("reserve cost %d: %d %s", cost, w.Code, w.Body)
		}
	case opGRPC:
		for _, route := range []string{"decide", "peek", "record"} {
			fr.expect(t, route, cost, route == "record", fr.grpcCall(t, route, policy, user, cost))
		}
	case opGRPCAcquire:
		res, err := fr.sluice.Acquire(context.Background(), &sluicev1.DecideRequest{Policy: "llm", Attributes: map[string]string{"user": user}, Cost: &cost})
		if err != nil {
			fr.expectGRPCRefusal(t, "Acquire", cost, false, err)
			return
		}
		if res.GetLease() == "" {
			return
		}
		_, err = fr.sluice.Settle(context.Background(), &sluicev1.SettleRequest{Lease: res.GetLease(), Cost: settle})
		if valid := settle >= 0 && settle <= sluice.MaxCost; valid != (err == nil) || !valid && status.Code(err) != codes.InvalidArgument {
			t.Fatalf("gRPC Settle at %d: %v", settle, err)
		}
	case opEnvoy, opEnvoyAll:
		res, err := fr.rls[op-opEnvoy].ShouldRateLimit(context.Background(), tokenCall(user, hits))
		if hits > sluice.MaxCost {
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "2^53") {
				t.Fatalf("envoy hits_addend %d: %v, want InvalidArgument naming 2^53", hits, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("envoy hits_addend %d: %v", hits, err)
		}
		for _, s := range res.GetStatuses() {
			if s.GetLimitRemaining() > s.GetCurrentLimit().GetRequestsPerUnit() {
				t.Fatalf("envoy hits_addend %d: %v", hits, res)
			}
		}
	}
}

// expect checks a decide, peek or record of cost: refused exactly when
// cost is out of range (or, but for a record, over the limit).
func (fr *fuzzFronts) expect(t *testing.T, route string, cost int64, record bool, a answer) {
	t.Helper()
	switch {
	case !inRange(cost) && a.code == "":
		t.Fatalf("%s cost %d: %+v, want refused", route, cost, a.decision)
	case !inRange(cost) && !strings.Contains(a.detail, "1 to 2^53"):
		t.Fatalf("%s cost %d: %s %q, want the range named", route, cost, a.code, a.detail)
	case inRange(cost) && (record || cost <= 1000000) && a.code != "":
		t.Fatalf("%s cost %d: refused %s: %s", route, cost, a.code, a.detail)
	case a.code == "":
		checkFuzzDecision(t, route, a.decision, 0)
	}
}

func (fr *fuzzFronts) expectRefusal(t *testing.T, route string, cost int64, record bool, body []byte) {
	t.Helper()
	var p httplimit.Problem
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("%s cost %d: %s", route, cost, body)
	}
	fr.expect(t, route, cost, record, answer{code: p.Code, detail: p.Detail})
}

func (fr *fuzzFronts) expectGRPCRefusal(t *testing.T, route string, cost int64, record bool, err error) {
	t.Helper()
	s, _ := status.FromError(err)
	if s.Code() != codes.InvalidArgument {
		t.Fatalf("gRPC %s cost %d: %v", route, cost, err)
	}
	fr.expect(t, route, cost, record, answer{code: s.Code().String(), detail: s.Message()})
}

func (fr *fuzzFronts) do(t *testing.T, method, path, body string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.RemoteAddr = "127.0.0.1:5555"
	w := httptest.NewRecorder()
	fr.http.Handler().ServeHTTP(w, r)
	if w.Code >= 500 {
		t.Fatalf("%s %s %s: %d %s", method, path, body, w.Code, w.Body)
	}
	return w
}

// httpCall posts body to /v1/route and returns its decision or refusal.
func (fr *fuzzFronts) httpCall(t *testing.T, route, body string) answer {
	t.Helper()
	w := fr.do(t, "POST", "/v1/"+route, body)
	if w.Code != 200 {
		var p httplimit.Problem
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || w.Code != 400 {
			t.Fatalf("POST /v1/%s %s: %d %s", route, body, w.Code, w.Body)
		}
		return answer{code: p.Code, detail: p.Detail}
	}
	var d wire.DecisionJSON
	if err := json.Unmarshal(w.Body.Bytes(), &d); err != nil {
		t.Fatal(err)
	}
	return answer{decision: d}
}

// grpcCall calls sluice's gRPC route and returns its decision or refusal.
func (fr *fuzzFronts) grpcCall(t *testing.T, route, policy, user string, cost int64) answer {
	t.Helper()
	req := &sluicev1.DecideRequest{Policy: policy, Attributes: map[string]string{"user": user}, Cost: &cost}
	var (
		res *sluicev1.Decision
		err error
	)
	switch route {
	case "decide":
		res, err = fr.sluice.Decide(context.Background(), req)
	case "peek":
		res, err = fr.sluice.Peek(context.Background(), req)
	default:
		res, err = fr.sluice.Record(context.Background(), req)
	}
	if err != nil {
		s, _ := status.FromError(err)
		if s.Code() != codes.InvalidArgument {
			t.Fatalf("gRPC %s cost %d: %v", route, cost, err)
		}
		return answer{code: s.Code().String(), detail: s.Message()}
	}
	d := wire.DecisionJSON{Allowed: res.GetAllowed(), Remaining: res.GetRemaining(), Degraded: res.GetDegraded()}
	for _, l := range res.GetLimits() {
		d.Limits = append(d.Limits, wire.LimitJSON{Name: l.GetName(), Limit: l.GetLimit(), Used: l.GetUsed(), Remaining: l.GetRemaining()})
	}
	return answer{decision: d}
}

// checkFuzzDecision fails unless d is the store's decision, not degraded,
// with used 0 to 2^53 and remaining 0 to the limit in every rule, and at
// least least used (a peek counts itself).
func checkFuzzDecision(t *testing.T, what string, d wire.DecisionJSON, least int64) {
	t.Helper()
	if d.Degraded {
		t.Fatalf("%s: degraded: %+v", what, d)
	}
	for _, l := range d.Limits {
		if l.Used < least || l.Used > sluice.MaxCost || l.Remaining < 0 || l.Remaining > l.Limit {
			t.Fatalf("%s: rule %s used %d, remaining %d of %d", what, l.Name, l.Used, l.Remaining, l.Limit)
		}
	}
}
