package server

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/httpapi"
	"github.com/sluicerate/sluice/internal/wire"
)

func TestDecideAPI(t *testing.T) {
	ts := newTestServer(t, testConfig)
	errs := `{"policy":"notify","attributes":{"category":"errors"}}`
	d := ts.decide("/v1/decide", errs)
	if !d.Allowed || d.Remaining != 1 || d.DeniedBy != "" || len(d.Limits) != 2 {
		t.Fatalf("first decision = %+v", d)
	}
	if got, want := d.Limits[0], (wire.LimitJSON{Name: "global", Limit: 5, Used: 1, Remaining: 4, WindowMS: 1800000}); got != want {
		t.Errorf("global = %+v, want %+v", got, want)
	}
	if d.ResetAfterMS != 1800000 {
		t.Errorf("reset_after_ms = %d, want 1800000", d.ResetAfterMS)
	}
	ts.decide("/v1/decide", errs)
	d = ts.decide("/v1/decide", errs)
	if d.Allowed || d.DeniedBy != "category" || d.RetryAfterMS != 1800000 || d.Limits[1].RetryAfterMS != 1800000 {
		t.Fatalf("third decision = %+v, want denied by category", d)
	}
	// Peek records nothing, and answers what decide would (global 2 + 2
	// after it); record records unconditionally.
	p := ts.decide("/v1/peek", `{"policy":"notify","attributes":{"category":"info"},"cost":2}`)
	if !p.Allowed || p.Limits[0].Used != 4 {
		t.Errorf("peek = %+v, want allowed with global used 4 after it", p)
	}
	if p := ts.decide("/v1/peek", `{"policy":"notify","attributes":{"category":"info"},"cost":2}`); p.Limits[0].Used != 4 {
		t.Errorf("second peek = %+v, want global used 4 after it: the first recorded nothing", p)
	}
	r := ts.decide("/v1/record", `{"policy":"notify","attributes":{"category":"errors"},"cost":1}`)
	if r.Allowed || r.Limits[0].Used != 3 || r.Limits[1].Used != 3 {
		t.Errorf("record = %+v, want global 3, category 3", r)
	}
	// Shadow policies never deny.
	ts.decide("/v1/decide", `{"policy":"shadowed"}`)
	s := ts.decide("/v1/decide", `{"policy":"shadowed"}`)
	if !s.Allowed || !s.Shadowed || s.DeniedBy != "one" {
		t.Errorf("shadow = %+v", s)
	}
}

func TestProblems(t *testing.T) {
	ts := newTestServer(t, testConfig)
	tests := []struct {
		name, method, path, body string
		status                   int
		code, detail             string
	}{
		{"malformed json", "POST", "/v1/decide", `{"policy":`, 400, "malformed_json", "ends in the middle"},
		{"syntax", "POST", "/v1/decide", `{"policy" "x"}`, 400, "malformed_json", "not valid JSON"},
		{"empty body", "POST", "/v1/decide", ``, 400, "malformed_json", "empty"},
		{"not an object", "POST", "/v1/decide", `[1]`, 400, "malformed_json", "must be a JSON object"},
		{"unknown field", "POST", "/v1/decide", `{"policy":"notify","attribute":{}}`, 400, "malformed_json", `unknown field "attribute"`},
		{"wrong type", "POST", "/v1/decide", `{"policy":"notify","cost":"1"}`, 400, "malformed_json", `field "cost" must be a whole number`},
		{"number attribute", "POST", "/v1/decide", `{"policy":"notify","attributes":{"category":5}}`, 400, "malformed_json", "attributes"},
		{"trailing", "POST", "/v1/decide", `{"policy":"notify"} {}`, 400, "malformed_json", "more than one JSON value"},
		{"unknown policy", "POST", "/v1/decide", `{"policy":"nope"}`, 400, "unknown_policy", `"nope"`},
		{"no policy", "POST", "/v1/peek", `{}`, 400, "bad_request", "names no policy"},
		{"missing attribute", "POST", "/v1/decide", `{"policy":"notify"}`, 400, "missing_attribute", `"category"`},
		{"cost 0", "POST", "/v1/decide", `{"policy":"notify","attributes":{"category":"a"},"cost":0}`, 400, "invalid_cost", "1 to 2^53"},
		{"cost negative", "POST", "/v1/record", `{"policy":"notify","attributes":{"category":"a"},"cost":-3}`, 400, "invalid_cost", "1 to 2^53"},
		{"cost over limit", "POST", "/v1/decide", `{"policy":"notify","attributes":{"category":"a"},"cost":3}`, 400, "cost_exceeds_limit", "limit 2"},
		{"too large", "POST", "/v1/decide", `{"policy":"notify","attributes":{"category":"` + strings.Repeat("a", 2000) + `"}}`, 413, "body_too_large", "1024 bytes"},
		{"unknown schedule", "POST", "/v1/reserve", `{"schedule":"nope"}`, 400, "unknown_schedule", `"nope"`},
		{"reserve missing attribute", "POST", "/v1/reserve", `{"schedule":"carrier"}`, 400, "missing_attribute", `"carrier"`},
		{"reserve cost 0", "POST", "/v1/reserve", `{"schedule":"carrier","attributes":{"carrier":"1"},"cost":0}`, 400, "invalid_cost", "1 to 2^53"},
		{"not found", "GET", "/v2/decide", ``, 404, "not_found", "/v2/decide"},
		{"method", "GET", "/v1/decide", ``, 405, "method_not_allowed", "POST"},
		{"forward-auth no policy", "GET", "/v1/forward-auth", ``, 400, "bad_request", "policy=NAME"},
		{"forward-auth unknown policy", "GET", "/v1/forward-auth?policy=nope", ``, 400, "unknown_policy", "nope"},
		{"forward-auth missing header", "GET", "/v1/forward-auth?policy=edge", ``, 400, "missing_attribute", `"user"`},
		{"forward-auth attribute it never has", "GET", "/v1/forward-auth?policy=notify", ``, 400, "missing_attribute",
			`needs attribute "category", which forward-auth does not read: it has ip, method, host, path and the headers named in forward_auth.headers; map a header to it there (headers: {category: X-Category})`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := ts.do(tt.method, tt.path, tt.body)
			if w.Code != tt.status {
				t.Fatalf("status = %d, want %d; body %s", w.Code, tt.status, w.Body)
			}
			if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("Content-Type = %q", ct)
			}
			var p httplimit.Problem
			if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
				t.Fatal(err)
			}
			if p.Status != tt.status || p.Code != tt.code || p.Type != "about:blank" || p.Title == "" || !strings.Contains(p.Detail, tt.detail) {
				t.Errorf("problem = %+v, want status %d code %s detail containing %q", p, tt.status, tt.code, tt.detail)
			}
		})
	}
	// Nothing was recorded by the bad requests: a peek counts itself alone.
	d := ts.decide("/v1/peek", `{"policy":"notify","attributes":{"category":"a"}}`)
	if d.Limits[0].Used != 1 {
		t.Errorf("bad requests recorded %d", d.Limits[0].Used-1)
	}
}

func TestReserveAndCancel(t *testing.T) {
	ts := newTestServer(t, testConfig)
	var got []httpapi.ReservationJSON
	for range 4 {
		w := ts.do("POST", "/v1/reserve", `{"schedule":"carrier","attributes":{"carrier":"45"}}`)
		var r httpapi.ReservationJSON
		if err := json.Unmarshal(w.Body.Bytes(), &r); w.Code != 200 || err != nil {
			t.Fatalf("reserve = %d %s", w.Code, w.Body)
		}
		got = append(got, r)
	}
	for i, want := range []int64{0, 250, 500} {
		if !got[i].OK || got[i].DelayMS != want || got[i].ID == "" || got[i].Queue != int64(i+1) {
			t.Errorf("reservation %d = %+v, want ok with delay %dms, queue %d", i, got[i], want, i+1)
		}
	}
	if got[3].OK || got[3].Reason != "delay" || got[3].ID != "" {
		t.Errorf("reservation 3 = %+v, want rejected for delay", got[3])
	}
	w := ts.do("POST", "/v1/cancel", `{"schedule":"carrier","attributes":{"carrier":"45"},"id":"`+got[2].ID+`"}`)
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"cancelled":true`) {
		t.Fatalf("cancel = %d %s", w.Code, w.Body)
	}
	w = ts.do("POST", "/v1/cancel", `{"schedule":"carrier","attributes":{"carrier":"45"},"id":"`+got[2].ID+`"}`)
	if !strings.Contains(w.Body.String(), `"cancelled":false`) {
		t.Errorf("second cancel = %s, want false", w.Body)
	}
	w = ts.do("POST", "/v1/reserve", `{"schedule":"carrier","attributes":{"carrier":"45"}}`)
	if !strings.Contains(w.Body.String(), `"delay_ms":500`) {
		t.Errorf("reserve after cancel = %s, want the cancelled slot (500ms)", w.Body)
	}
}

func TestPolicies(t *testing.T) {
	ts := newTestServer(t, testConfig)
	w := ts.do("GET", "/v1/policies", "")
	var out httpapi.PoliciesJSON
	if err := json.Unmarshal(w.Body.Bytes(), &out); w.Code != 200 || err != nil {
		t.Fatalf("policies = %d %s", w.Code, w.Body)
	}
	if len(out.Policies) != 3 || out.Policies[0].Name != "notify" || out.Policies[0].Limits[1].By[0] != "category" ||
		out.Policies[0].Limits[0].WindowMS != 1800000 {
		t.Errorf("policies = %+v", out.Policies)
	}
	if len(out.Schedules) != 1 || out.Schedules[0].Rate != "4/1s" || out.Schedules[0].IntervalMS != 250 || out.Schedules[0].MaxDelayMS != 500 {
		t.Errorf("schedules = %+v", out.Schedules)
	}
}

func TestForwardAuth(t *testing.T) {
	ts := newTestServer(t, testConfig)
	fwd := func(xff, user string) *httptest.ResponseRecorder {
		return ts.do("GET", "/v1/forward-auth?policy=edge", "", "X-Forwarded-For", xff, "X-User-Id", user,
			"X-Forwarded-Method", "POST", "X-Forwarded-Uri", "/api/x?y=1", "X-Forwarded-Host", "example.test")
	}
	for i := range 2 {
		w := fwd("203.0.113.7", "bob")
		if w.Code != 200 || w.Header().Get("RateLimit") == "" || w.Header().Get("RateLimit-Policy") == "" {
			t.Fatalf("request %d = %d %v", i, w.Code, w.Header())
		}
	}
	w := fwd("198.51.100.1, 203.0.113.7", "alice") // the proxy appended the client's address last
	if w.Code != 429 {
		t.Fatalf("third request from 203.0.113.7 = %d, want 429", w.Code)
	}
	if w.Header().Get("Retry-After") != "60" || !strings.Contains(w.Body.String(), "quota-exceeded") {
		t.Errorf("429 headers %v body %s", w.Header(), w.Body)
	}
	if w := fwd("203.0.113.8", "alice"); w.Code != 200 {
		t.Errorf("another client = %d, want 200", w.Code)
	}
	w = ts.do("GET", "/v1/forward-auth?policy=edge&deny_status=403", "", "X-Forwarded-For", "203.0.113.7", "X-User-Id", "bob")
	if w.Code != 403 || w.Header().Get("Retry-After") != "60" {
		t.Errorf("deny_status=403: %d %v", w.Code, w.Header())
	}
	if w := ts.do("GET", "/v1/forward-auth?policy=edge&deny_status=500", ""); w.Code != 400 {
		t.Errorf("deny_status=500: %d, want 400", w.Code)
	}
}

func TestMetrics(t *testing.T) {
	ts := newTestServer(t, testConfig)
	for range 3 {
		ts.do("POST", "/v1/decide", `{"policy":"notify","attributes":{"category":"x"}}`)
	}
	ts.do("POST", "/v1/reserve", `{"schedule":"carrier","attributes":{"carrier":"1"}}`)
	w := ts.do("GET", "/metrics", "")
	body := w.Body.String()
	for _, want := range []string{
		`sluice_decisions_total{outcome="allowed",policy="notify",rule=""} 2`,
		`sluice_decisions_total{outcome="denied",policy="notify",rule="category"} 1`,
		`sluice_store_duration_seconds_count{op="decide"} 3`,
		`sluice_reservations_total{outcome="reserved",schedule="carrier"} 1`,
		`sluice_reservation_delay_seconds_count{schedule="carrier"} 1`,
		`sluice_requests_total{api="decide",code="200"} 3`,
		`go_goroutines`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if w := ts.do("GET", "/healthz", ""); w.Code != 200 {
		t.Errorf("/healthz = %d", w.Code)
	}
	if w := ts.do("GET", "/readyz", ""); w.Code != 200 {
		t.Errorf("/readyz = %d", w.Code)
	}
}

func TestReloadFile(t *testing.T) {
	ts := newTestServer(t, testConfig)
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(strings.Replace(testConfig, "limit: 2, window: 30m", "limit: 1, window: 30m", 1))
	if err := ts.srv.ReloadFile(path); err != nil {
		t.Fatal(err)
	}
	d := ts.decide("/v1/decide", `{"policy":"notify","attributes":{"category":"a"}}`)
	if d.Limits[1].Limit != 1 {
		t.Fatalf("after reload the category limit is %d, want 1", d.Limits[1].Limit)
	}
	write("policies:\n  - name: notify\n    limits: [{name: global, limit: -1, window: 1m}]\n")
	if err := ts.srv.ReloadFile(path); err == nil {
		t.Fatal("a broken file was accepted")
	}
	d = ts.decide("/v1/decide", `{"policy":"notify","attributes":{"category":"b"}}`)
	if d.Limits[1].Limit != 1 || d.Limits[0].Used != 2 {
		t.Errorf("after a broken reload: %+v, want the previous config and state", d)
	}
	if !strings.Contains(ts.log.String(), "configuration not reloaded") || !strings.Contains(ts.log.String(), "limit is -1") {
		t.Errorf("log lacks the reload error:\n%s", ts.log)
	}
}
