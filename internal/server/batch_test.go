package server

import (
	"encoding/json"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/wire"
	"github.com/sluicerate/sluice/memstore"
)

// batchAnswer is one request's answer in a batch's.
type batchAnswer struct {
	Status   int                `json:"status"`
	Decision *wire.DecisionJSON `json:"decision"`
	Problem  *httplimit.Problem `json:"problem"`
}

// batch posts a batch to path and decodes its 200 answer.
func (ts *testServer) batch(path, body string) []batchAnswer {
	ts.t.Helper()
	w := ts.do("POST", path, body)
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" {
		ts.t.Fatalf("POST %s %s = %d %v %s", path, body, w.Code, w.Header(), w.Body)
	}
	var out []batchAnswer
	dec := json.NewDecoder(w.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		ts.t.Fatalf("answer %s: %v", w.Body, err)
	}
	return out
}

func TestBatch(t *testing.T) {
	ts := newTestServer(t, testConfig)
	// category "a" has room for 2; the third "a" is denied, and nothing of
	// the bad requests is recorded.
	got := ts.batch("/v1/decide", ` [
		{"policy":"notify","attributes":{"category":"a"}},
		{"policy":"notify","attributes":{"category":"a"}},
		{"policy":"nope"},
		{"policy":"notify","attributes":{"category":"a"}},
		{"policy":"notify","attribute":{}},
		{"policy":"notify"},
		{"policy":"notify","attributes":{"category":"b"},"cost":0},
		{"policy":"notify","attributes":{"category":"`+"\xff"+`"}},
		{},
		{"policy":"notify","attributes":{"category":"b"},"cost":2}
	] `)
	want := []struct {
		status  int
		allowed bool
		code    string
		used    int64 // the global window's, after the request
	}{
		{200, true, "", 1},
		{200, true, "", 2},
		{400, false, "unknown_policy", 0},
		{200, false, "", 2},
		{400, false, "malformed_json", 0},
		{400, false, "missing_attribute", 0},
		{400, false, "invalid_cost", 0},
		{400, false, "invalid_attribute", 0},
		{400, false, "bad_request", 0},
		{200, true, "", 4},
	}
	if len(got) != len(want) {
		t.Fatalf("%d answers, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		switch {
		case g.Status != w.status:
			t.Errorf("request %d: status %d, want %d", i, g.Status, w.status)
		case w.status == 200 && (g.Decision == nil || g.Problem != nil || g.Decision.Allowed != w.allowed || g.Decision.Limits[0].Used != w.used):
			t.Errorf("request %d: %+v %+v, want allowed %v with global used %d", i, g.Decision, g.Problem, w.allowed, w.used)
		case w.status != 200 && (g.Problem == nil || g.Decision != nil || g.Problem.Status != w.status || g.Problem.Code != w.code):
			t.Errorf("request %d: %+v %+v, want a problem %s", i, g.Decision, g.Problem, w.code)
		}
	}
	// Each answer is the one the request alone gets: the same problem, and
	// a peek alone and in a batch agree.
	for i, body := range []string{`{"policy":"nope"}`, `{"policy":"notify","attribute":{}}`, `{}`, `{"policy":"notify","attributes":{"category":"b"},"cost":0}`} {
		w := ts.do("POST", "/v1/decide", body)
		var alone httplimit.Problem
		if err := json.Unmarshal(w.Body.Bytes(), &alone); err != nil {
			t.Fatal(err)
		}
		in := ts.batch("/v1/decide", "["+body+"]")
		if len(in) != 1 || in[0].Problem == nil || !reflect.DeepEqual(*in[0].Problem, alone) {
			t.Errorf("request %d: in a batch %+v, alone %+v", i, in, alone)
		}
	}
	peek := `{"policy":"notify","attributes":{"category":"c"}}`
	alone := ts.decide("/v1/peek", peek)
	if in := ts.batch("/v1/peek", "["+peek+","+peek+"]"); len(in) != 2 || !reflect.DeepEqual(*in[0].Decision, alone) || !reflect.DeepEqual(*in[1].Decision, alone) {
		t.Errorf("peeks in a batch %+v, alone %+v", in, alone)
	}
	// Record records each request, whether or not it fits.
	rec := ts.batch("/v1/record", `[{"policy":"notify","attributes":{"category":"d"},"cost":2},{"policy":"notify","attributes":{"category":"d"},"cost":2}]`)
	if len(rec) != 2 || rec[1].Decision.Allowed || rec[1].Decision.Limits[1].Used != 4 {
		t.Errorf("records %+v, want the second over the category's limit, with used 4", rec)
	}
	if got := ts.batch("/v1/decide", " [ ] "); len(got) != 0 {
		t.Errorf("an empty batch: %+v", got)
	}
}

func TestBatchProblems(t *testing.T) {
	store := memstore.New(memstore.Config{})
	t.Cleanup(func() { store.Close() })
	ts := testServerFor(t, store, testConfig, Options{Logger: slog.New(slog.DiscardHandler), MaxBodyBytes: 1024, MaxBatch: 3})
	one := `{"policy":"shadowed"}`
	tests := []struct {
		name, body   string
		status       int
		code, detail string
	}{
		{"not JSON", `[{"policy":"shadowed"},`, 400, "malformed_json", "ends in the middle"},
		{"syntax", `[{"policy":"shadowed"} {}]`, 400, "malformed_json", "not valid JSON (at byte 24"},
		{"trailing", `[] []`, 400, "malformed_json", "more than one JSON value"},
		{"not an object", `[` + one + `,1]`, 400, "malformed_json", "request 1 of the batch must be a JSON object"},
		{"array", `[[` + one + `]]`, 400, "malformed_json", "not array"},
		{"null", `[null]`, 400, "malformed_json", "not null"},
		{"too many", `[` + strings.Repeat(one+",", 3) + one + `]`, 400, "batch_too_large", "holds 4 requests, more than the 3"},
		{"too large", `[` + strings.Repeat(one+",", 50) + one + `]`, 413, "body_too_large", "1024 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := ts.do("POST", "/v1/decide", tt.body)
			var p httplimit.Problem
			if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || w.Code != tt.status {
				t.Fatalf("%d %s, want %d", w.Code, w.Body, tt.status)
			}
			if w.Header().Get("Content-Type") != "application/problem+json" || p.Code != tt.code || !strings.Contains(p.Detail, tt.detail) {
				t.Errorf("%v %+v, want %s with %q", w.Header(), p, tt.code, tt.detail)
			}
		})
	}
	// Nothing was decided: the shadow policy's window is empty.
	if d := ts.decide("/v1/peek", one); d.Limits[0].Used != 1 {
		t.Errorf("the bad batches recorded %d", d.Limits[0].Used-1)
	}
	if got := ts.batch("/v1/decide", "["+strings.Repeat(one+",", 2)+one+"]"); len(got) != 3 {
		t.Errorf("a batch of the most requests: %+v", got)
	}
}

func TestBatchMetrics(t *testing.T) {
	ts := newTestServer(t, testConfig)
	ts.batch("/v1/decide", `[{"policy":"notify","attributes":{"category":"x"}},{"policy":"nope"},{"policy":"notify","attributes":{"category":"x"}}]`)
	ts.do("POST", "/v1/decide", `[1]`)
	body := ts.do("GET", "/metrics", "").Body.String()
	for _, want := range []string{
		`sluice_requests_total{api="decide",code="200"} 2`,
		`sluice_requests_total{api="decide",code="400"} 2`,
		`sluice_decisions_total{outcome="allowed",policy="notify",rule=""} 2`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
