package server

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/sluicerate/sluice/internal/httpapi"
	sluicev1 "github.com/sluicerate/sluice/proto/sluice/v1"
)

const budgetConfig = `
policies:
  - name: hot
    limits:
      - {name: global, limit: 1000, window: 1m, budget: 2s}
`

// peekUsed returns the store's count of policy hot's window, a peek
// (which a budgeted rule sends to the store) less its own unit.
func (ts *testServer) peekUsed() int64 {
	ts.t.Helper()
	d := ts.decide("/v1/peek", `{"policy":"hot"}`)
	if d.Local || len(d.Limits) != 1 {
		ts.t.Fatalf("peek = %+v, want one limit decided by the store", d)
	}
	return d.Limits[0].Used - 1
}

// metricInt is metric as an integer, 0 when absent.
func (ts *testServer) metricInt(name string) int64 {
	ts.t.Helper()
	v := ts.metric(name)
	if v == "absent" {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		ts.t.Fatalf("%s = %q", name, v)
	}
	return n
}

// TestBudgetServe: a budgeted rule from the YAML is answered from slices
// over HTTP (alone and in a batch) and gRPC, each such answer saying
// "local"; the store counts at least what was admitted while the slices
// are held, and exactly that once the server closes (a graceful
// shutdown); the metrics add up.
func TestBudgetServe(t *testing.T) {
	ts := newTestServer(t, budgetConfig)
	const req = `{"policy":"hot"}`
	var admitted, local int64
	count := func(allowed, isLocal bool) {
		if allowed {
			admitted++
		}
		if isLocal {
			local++
			if !allowed {
				t.Fatal("a denial says local")
			}
		}
	}
	for range 40 {
		d := ts.decide("/v1/decide", req)
		count(d.Allowed, d.Local)
		if d.Local && (d.Limits[0].Remaining > 1000-admitted || d.Limits[0].Used+d.Limits[0].Remaining != 1000) {
			t.Fatalf("local answer %+v after %d admitted: remaining above what the store would grant", d, admitted)
		}
	}
	for _, a := range ts.batch("/v1/decide", `[`+req+`,`+req+`,`+req+`]`) {
		if a.Status != 200 {
			t.Fatalf("batch answer %+v", a)
		}
		count(a.Decision.Allowed, a.Decision.Local)
	}
	client := sluicev1.NewSluiceClient(grpcConn(t, ts))
	grpcLocal := 0
	for range 20 {
		d, err := client.Decide(context.Background(), &sluicev1.DecideRequest{Policy: "hot"})
		if err != nil {
			t.Fatal(err)
		}
		count(d.GetAllowed(), d.GetLocal())
		if d.GetLocal() {
			grpcLocal++
		}
	}
	if admitted != 63 || local == 0 || grpcLocal == 0 {
		t.Fatalf("admitted %d of 63, %d local (%d over gRPC): want all admitted and some from slices", admitted, local, grpcLocal)
	}
	if used := ts.peekUsed(); used < admitted {
		t.Fatalf("the store counts %d with slices held, below the %d admitted", used, admitted)
	}
	if got := ts.metricInt(`sluice_budget_decisions_total{answered="local"}`); got != local {
		t.Errorf("local decisions metric = %d, answers said %d", got, local)
	}
	if got := ts.metricInt(`sluice_budget_decisions_total{answered="store"}`); got != 63-local {
		t.Errorf("store decisions metric = %d, want %d", got, 63-local)
	}

	ts.srv.Close()
	if used := ts.peekUsed(); used != admitted {
		t.Errorf("after close the store counts %d, want the %d admitted", used, admitted)
	}
	leased, returned := ts.metricInt(`sluice_budget_units_total{outcome="leased"}`), ts.metricInt(`sluice_budget_units_total{outcome="returned"}`)
	stranded := ts.metricInt(`sluice_budget_units_total{outcome="stranded"}`)
	if ts.metricInt("sluice_budget_slices_total") == 0 || leased-returned-stranded != local || stranded != 0 {
		t.Errorf("units leased %d, returned %d, stranded %d: want leased less returned to be the %d local admissions, none stranded",
			leased, returned, stranded, local)
	}
	if d := ts.decide("/v1/decide", req); !d.Allowed || d.Local {
		t.Errorf("decision after close = %+v, want allowed by the store", d)
	}
}

// TestBudgetReload: a reload gives back the slices of the configuration
// it swaps out, and the metrics keep what its Limiter counted.
func TestBudgetReload(t *testing.T) {
	ts := newTestServer(t, budgetConfig)
	var admitted, local int64
	for range 30 {
		d := ts.decide("/v1/decide", `{"policy":"hot"}`)
		if d.Allowed {
			admitted++
		}
		if d.Local {
			local++
		}
	}
	if local == 0 {
		t.Fatal("no decision answered from a slice")
	}
	if err := ts.srv.Swap(parseConfig(t, budgetConfig)); err != nil {
		t.Fatal(err)
	}
	ts.srv.closing.Wait()
	if used := ts.peekUsed(); used != admitted {
		t.Errorf("after a reload the store counts %d, want the %d admitted", used, admitted)
	}
	if got := ts.metricInt(`sluice_budget_decisions_total{answered="local"}`); got != local {
		t.Errorf("local decisions metric after a reload = %d, want %d", got, local)
	}
	if got := ts.metricInt(`sluice_budget_units_total{outcome="returned"}`); got == 0 {
		t.Error("no units returned on the reload")
	}
}

// TestBudgetPolicies: GET /v1/policies shows a rule's budget.
func TestBudgetPolicies(t *testing.T) {
	ts := newTestServer(t, budgetConfig+`      - {name: per-user, by: [user], limit: 10, window: 1m}
`)
	w := ts.do("GET", "/v1/policies", "")
	var out httpapi.PoliciesJSON
	if err := json.Unmarshal(w.Body.Bytes(), &out); w.Code != 200 || err != nil {
		t.Fatalf("policies = %d %s", w.Code, w.Body)
	}
	if l := out.Policies[0].Limits; len(l) != 2 || l[0].BudgetMS != 2000 || l[1].BudgetMS != 0 {
		t.Errorf("limits = %+v, want global's budget_ms 2000 and none for per-user", l)
	}
	if strings.Count(w.Body.String(), `"budget_ms"`) != 1 {
		t.Errorf("policies = %s, want budget_ms on the budgeted rule alone", w.Body)
	}
}
