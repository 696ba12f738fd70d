package admin_test

import (
	"strings"
	"testing"

	"github.com/sluicerate/sluice/internal/admin"
)

const budgetConfig = `
policies:
  - name: notify
    limits:
      - {name: global, limit: 1000, window: 1m, budget: 2s}
      - {name: per-user, by: [user], limit: 100, window: 1m, budget: 4s}
`

// TestAdminBudgetsMemory: GET /api/v1/budgets lists the slices this server
// holds, per budgeted rule and window, with their size, use and time left,
// and the totals the metrics count; after Close it lists none.
func TestAdminBudgetsMemory(t *testing.T) {
	t.Parallel()
	as := newAdminServer(t, budgetConfig, "")
	budgets := func() admin.BudgetsJSON {
		t.Helper()
		var b admin.BudgetsJSON
		as.getJSON("/api/v1/budgets", &b)
		return b
	}
	if b := budgets(); len(b.Slices) != 0 || b.Held != 0 || b.Local != 0 || b.Store != 0 {
		t.Errorf("before any decision: %+v", b)
	}
	var local int64
	for _, user := range []string{"ann", "ann", "ann", "bob"} {
		w := as.do("POST", "/v1/decide", `{"policy":"notify","attributes":{"user":"`+user+`"}}`)
		if w.Code != 200 {
			t.Fatalf("decide = %d %s", w.Code, w.Body)
		}
		if body := w.Body.String(); strings.Contains(body, `"local":true`) {
			local++
		}
	}
	b := budgets()
	// global's one window, then per-user's of ann and bob.
	if b.Held != 3 || len(b.Slices) != 3 || b.Slices[0].Rule != "global" || len(b.Slices[0].Values) != 0 ||
		b.Slices[1].Rule != "per-user" || b.Slices[1].Values[0] != "ann" || b.Slices[2].Values[0] != "bob" {
		t.Fatalf("budgets = %+v, want the slices of global, per-user ann and per-user bob", b)
	}
	for _, s := range b.Slices {
		budget := int64(2000)
		if s.Rule == "per-user" {
			budget = 4000
		}
		// The stored clock stands still; the Limiter's runs, a little.
		if s.Policy != "notify" || s.Granted < 1 || s.Used < 0 || s.Used > s.Granted || s.LeftMS <= 0 || s.LeftMS > budget {
			t.Errorf("slice %+v: want a live slice of at most its budget", s)
		}
	}
	// An answer is local when its budgeted rules took from slices; the
	// count, when no rule needed the store.
	if b.Local+b.Store != 4 || b.Local < 1 || b.Local > local || b.SlicesLeased < 3 || b.UnitsLeased < b.SlicesLeased {
		t.Errorf("budgets = %+v, %d answers said local: want the totals to count the 4 decisions", b, local)
	}
	as.srv.Close()
	if b := budgets(); len(b.Slices) != 0 || b.Held != 0 || b.UnitsReturned == 0 {
		t.Errorf("after Close: %+v, want no slice held and units returned", b)
	}
}
