package server

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sluicerate/sluice/internal/httpapi"
	sluicev1 "github.com/sluicerate/sluice/proto/sluice/v1"
)

const leaseConfig = `
policies:
  - name: llm
    limits:
      - {name: tokens, by: [user], limit: 10000, window: 1m}
      - {name: in-flight, by: [user], concurrency: 2, lease: 30s}
`

// acquire posts body to /v1/acquire and decodes a 200 answer.
func (ts *testServer) acquire(body string) httpapi.AcquireJSON {
	ts.t.Helper()
	w := ts.do("POST", "/v1/acquire", body)
	var a httpapi.AcquireJSON
	if err := json.Unmarshal(w.Body.Bytes(), &a); w.Code != 200 || err != nil {
		ts.t.Fatalf("acquire = %d %s", w.Code, w.Body)
	}
	return a
}

// lease posts body to path, one of /v1/release, /v1/settle and /v1/extend,
// and decodes a 200 answer.
func (ts *testServer) lease(path, body string) httpapi.LeaseJSON {
	ts.t.Helper()
	w := ts.do("POST", path, body)
	var l httpapi.LeaseJSON
	if err := json.Unmarshal(w.Body.Bytes(), &l); w.Code != 200 || err != nil {
		ts.t.Fatalf("POST %s %s = %d %s", path, body, w.Code, w.Body)
	}
	return l
}

func TestLeaseAPI(t *testing.T) {
	ts := newTestServer(t, leaseConfig)
	const ann = `{"policy":"llm","attributes":{"user":"ann"},"cost":2000}`
	a := ts.acquire(ann)
	if !a.Allowed || a.Lease == "" || a.LeaseExpiresMS != 30000 || a.Limits[0].Used != 2000 || a.Limits[1].Used != 1 {
		t.Fatalf("first acquire = %+v", a)
	}
	b := ts.acquire(ann)
	c := ts.acquire(ann)
	if !b.Allowed || c.Allowed || c.Lease != "" || c.DeniedBy != "in-flight" || c.Cause != "concurrency" || c.RetryAfterMS != 30000 {
		t.Fatalf("second %+v, third %+v: want the third denied by in-flight for 30s", b, c)
	}
	// Settle a at its real cost: the estimate is replaced, the slot freed.
	if l := ts.lease("/v1/settle", `{"lease":"`+a.Lease+`","cost":500}`); !l.Held {
		t.Errorf("settle = %+v, want held", l)
	}
	if l := ts.lease("/v1/settle", `{"lease":"`+a.Lease+`","cost":500}`); l.Held {
		t.Errorf("second settle = %+v, want not held", l)
	}
	if l := ts.lease("/v1/extend", `{"lease":"`+b.Lease+`"}`); !l.Held || l.LeaseExpiresMS != 30000 {
		t.Errorf("extend = %+v, want held for 30s", l)
	}
	d := ts.decide("/v1/peek", ann)
	if !d.Allowed || d.Limits[0].Used != 500+2000+2000 || d.Limits[1].Used != 2 {
		t.Errorf("peek after settle = %+v, want tokens 4500 and 2 in flight (the peek's own included)", d)
	}
	if l := ts.lease("/v1/release", `{"lease":"`+b.Lease+`"}`); !l.Held {
		t.Errorf("release = %+v, want held", l)
	}
	if l := ts.lease("/v1/release", `{"lease":"`+b.Lease+`"}`); l.Held {
		t.Errorf("second release = %+v, want not held", l)
	}
	// Bad input: problems; a decide on a concurrency rule says to acquire.
	for _, tt := range []struct{ path, body, code, detail string }{
		{"/v1/release", `{}`, "bad_request", "names no lease"},
		{"/v1/release", `{"lease":"not-a-lease"}`, "invalid_lease", "invalid lease id"},
		{"/v1/settle", `{"lease":"` + b.Lease + `"}`, "bad_request", "real cost"},
		{"/v1/settle", `{"lease":"` + b.Lease + `","cost":-1}`, "invalid_cost", "real cost"},
		{"/v1/decide", ann, "bad_request", "POST /v1/acquire"},
		{"/v1/record", ann, "bad_request", "POST /v1/acquire"},
		{"/v1/acquire", `{"policy":"llm"}`, "missing_attribute", `needs attribute \"user\"`},
	} {
		w := ts.do("POST", tt.path, tt.body)
		if w.Code != 400 || !strings.Contains(w.Body.String(), `"code":"`+tt.code+`"`) || !strings.Contains(w.Body.String(), tt.detail) {
			t.Errorf("POST %s %s = %d %s, want 400 %s saying %q", tt.path, tt.body, w.Code, w.Body, tt.code, tt.detail)
		}
		if strings.Contains(w.Body.String(), "Limiter.") {
			t.Errorf("POST %s %s = %s, which names the library's API to an HTTP caller", tt.path, tt.body, w.Body)
		}
	}
	// In a batch, the item's problem says the same.
	if w := ts.do("POST", "/v1/decide", "["+ann+"]"); w.Code != 200 || !strings.Contains(w.Body.String(), `"status":400`) ||
		!strings.Contains(w.Body.String(), "POST /v1/acquire") || strings.Contains(w.Body.String(), "Limiter.") {
		t.Errorf("POST /v1/decide [%s] = %d %s, want an item's 400 naming POST /v1/acquire", ann, w.Code, w.Body)
	}
}

func TestLeaseGRPC(t *testing.T) {
	ts := newTestServer(t, leaseConfig)
	client := sluicev1.NewSluiceClient(grpcConn(t, ts))
	ctx := context.Background()
	req := &sluicev1.DecideRequest{Policy: "llm", Attributes: map[string]string{"user": "ann"}, Cost: proto.Int64(2000)}
	a, err := client.Acquire(ctx, req)
	if err != nil || !a.Decision.Allowed || a.Lease == "" || a.LeaseExpiresMs != 30000 {
		t.Fatalf("Acquire = %v, %v", a, err)
	}
	if _, err := client.Acquire(ctx, req); err != nil {
		t.Fatal(err)
	}
	c, err := client.Acquire(ctx, req)
	if err != nil || c.Decision.Allowed || c.Lease != "" || c.Decision.Cause != "concurrency" || c.Decision.RetryAfterMs != 30000 {
		t.Fatalf("third Acquire = %v, %v; want denied by concurrency for 30s", c, err)
	}
	if st, err := client.Settle(ctx, &sluicev1.SettleRequest{Lease: a.Lease, Cost: 300}); err != nil || !st.Held {
		t.Fatalf("Settle = %v, %v", st, err)
	}
	if st, err := client.Release(ctx, &sluicev1.LeaseRequest{Lease: a.Lease}); err != nil || st.Held {
		t.Fatalf("Release after Settle = %v, %v; want not held", st, err)
	}
	d, err := client.Acquire(ctx, req)
	if err != nil || !d.Decision.Allowed || d.Decision.Limits[0].Used != 300+2000+2000 {
		t.Fatalf("Acquire after Settle = %v, %v; want allowed, tokens 4300", d, err)
	}
	if st, err := client.Extend(ctx, &sluicev1.LeaseRequest{Lease: d.Lease}); err != nil || !st.Held || st.LeaseExpiresMs != 30000 {
		t.Fatalf("Extend = %v, %v", st, err)
	}
	if _, err := client.Decide(ctx, req); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "Sluice/Acquire") ||
		strings.Contains(err.Error(), "Limiter.") {
		t.Errorf("Decide on a concurrency rule: %v, want InvalidArgument naming Sluice/Acquire", err)
	}
	if _, err := client.Release(ctx, &sluicev1.LeaseRequest{Lease: "not-a-lease"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("Release of a malformed id: %v, want InvalidArgument", err)
	}
}

// TestOverLimitCounted: a record and a lease's settle far above a rule's
// limit (10,000,000 against 10,000 a minute: a unit mistake) are recorded,
// counted in sluice_over_limit_total and logged, once per key and minute;
// a cost within the limit is neither.
func TestOverLimitCounted(t *testing.T) {
	ts := newTestServer(t, leaseConfig+`  - name: upload
    limits:
      - {name: bytes, by: [user], limit: 10000, window: 1m}
`)
	const total = `sluice_over_limit_total{policy="%s",rule="%s"}`
	ts.decide("/v1/record", `{"policy":"upload","attributes":{"user":"ann"},"cost":10000}`)
	if got := ts.metric(fmt.Sprintf(total, "upload", "bytes")); got != "absent" {
		t.Errorf("a record at the limit: over-limit count %s, want absent", got)
	}
	for range 2 {
		ts.decide("/v1/record", `{"policy":"upload","attributes":{"user":"ann"},"cost":10000000}`)
	}
	a := ts.acquire(`{"policy":"llm","attributes":{"user":"bob"},"cost":100}`)
	if l := ts.lease("/v1/settle", `{"lease":"`+a.Lease+`","cost":10000000}`); !l.Held {
		t.Fatalf("settle = %+v, want held", l)
	}
	for _, tt := range []struct{ policy, rule, want string }{{"upload", "bytes", "2"}, {"llm", "tokens", "1"}} {
		if got := ts.metric(fmt.Sprintf(total, tt.policy, tt.rule)); got != tt.want {
			t.Errorf("over-limit count of %s/%s = %s, want %s", tt.policy, tt.rule, got, tt.want)
		}
	}
	logs := ts.log.String()
	if n := strings.Count(logs, "a cost above the rule's limit was recorded"); n != 2 ||
		!strings.Contains(logs, `"policy":"upload","rule":"bytes","values":["ann"],"cost":10000000,"limit":10000`) ||
		!strings.Contains(logs, `"policy":"llm","rule":"tokens","values":["bob"],"cost":10000000,"limit":10000`) {
		t.Errorf("%d lines logged, want ann's record and bob's settle once each:\n%s", n, logs)
	}
}
