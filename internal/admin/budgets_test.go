package admin_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

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

const budgetInspectConfig = `
policies:
  - name: notify
    limits:
      - {name: global, limit: 1000, window: 1m, budget: 2s}
`

// TestAdminInspectSlicesMemory: on the memory store the key inspector
// shows a budgeted rule's slices this server holds (every slice there is),
// and a used that counts them beside what the store admitted per request.
func TestAdminInspectSlicesMemory(t *testing.T) {
	t.Parallel()
	as := newAdminServer(t, budgetInspectConfig, "")
	if w := as.do("POST", "/v1/decide", `{"policy":"notify"}`); w.Code != 200 {
		t.Fatalf("decide = %d %s", w.Code, w.Body)
	}
	var b admin.BudgetsJSON
	as.getJSON("/api/v1/budgets", &b)
	if len(b.Slices) != 1 || b.Store != 1 {
		t.Fatalf("budgets = %+v, want one slice leased with the first decision", b)
	}
	in := as.inspect(`{"policy":"notify"}`)
	w := in.Windows[0]
	if len(w.Slices) != 1 || w.Sliced == nil || *w.Sliced != b.Slices[0].Granted || w.Slices[0].Units != b.Slices[0].Granted ||
		w.Slices[0].EndsInMS <= 0 || w.Slices[0].EndsInMS > 2000 {
		t.Fatalf("global's slices %+v (sliced %v), want the one of %d units this server holds", w.Slices, w.Sliced, b.Slices[0].Granted)
	}
	// The store's count: the first request, the slice, and the peek's own.
	if want := 1 + b.Slices[0].Granted + 1; w.Used != want {
		t.Errorf("global's used %d, want %d: the request, the slice's %d units and the peek", w.Used, want, b.Slices[0].Granted)
	}
}

// TestAdminInspectSlicesRedis: on Redis the key inspector shows the
// slices the store holds for a budgeted log, with their units and when
// each ends on the store's clock; a slice that ended still counts until
// its entry leaves the window, then goes.
func TestAdminInspectSlicesRedis(t *testing.T) {
	bs := newBrowserServer(t, budgetInspectConfig, 0)
	var d struct {
		Allowed bool `json:"allowed"`
	}
	postJSON(t, bs.public.URL+"/v1/decide", `{"policy":"notify"}`, &d)
	if !d.Allowed {
		t.Fatal("the first decision was denied")
	}
	var b admin.BudgetsJSON
	getAdmin(t, bs.admin.URL+"/api/v1/budgets", &b)
	if len(b.Slices) != 1 {
		t.Fatalf("budgets = %+v, want one slice", b)
	}
	granted := b.Slices[0].Granted
	inspect := func(what string, endsInMS int64, n int) {
		t.Helper()
		var in admin.InspectJSON
		postJSON(t, bs.admin.URL+"/api/v1/inspect", `{"policy":"notify"}`, &in)
		if !in.EntriesShown || in.Error != "" || len(in.Windows) != 1 {
			t.Fatalf("%s: inspect = %+v", what, in)
		}
		w := in.Windows[0]
		if len(w.Slices) != n || w.Sliced == nil || *w.Sliced != int64(n)*granted || n == 1 && (w.Slices[0].Units != granted ||
			w.Slices[0].EndsInMS != endsInMS || !w.Slices[0].Ends.Equal(bs.clock.Now().Add(time.Duration(endsInMS)*time.Millisecond))) {
			t.Errorf("%s: slices %+v (sliced %v), want %d of %d units ending in %d ms", what, w.Slices, w.Sliced, n, granted, endsInMS)
		}
		var entries int64
		for _, e := range w.Entries {
			if *e.Counts {
				entries += e.Cost
			}
		}
		if want := entries + *w.Sliced + 1; w.Used != want {
			t.Errorf("%s: used %d, want %d: the entries' %d, the slices' %d and the peek's 1", what, w.Used, want, entries, *w.Sliced)
		}
	}
	inspect("at the lease", 2000, 1)
	bs.clock.Advance(3 * time.Second)
	inspect("after its end", -1000, 1)
	bs.clock.Advance(time.Minute)
	inspect("a window after its end", 0, 0)
}

// TestAdminPageSlices opens the admin page in headless Chromium over a
// server on Redis that leased a slice of a budgeted rule, and checks that
// the key inspector lists it with its units and time left.
func TestAdminPageSlices(t *testing.T) {
	chrome := browserPath(t)
	bs := newBrowserServer(t, budgetInspectConfig, 0)
	var d struct {
		Allowed bool `json:"allowed"`
	}
	postJSON(t, bs.public.URL+"/v1/decide", `{"policy":"notify"}`, &d)
	var b admin.BudgetsJSON
	getAdmin(t, bs.admin.URL+"/api/v1/budgets", &b)
	if !d.Allowed || len(b.Slices) != 1 {
		t.Fatalf("decision %+v, budgets %+v: want one slice leased", d, b)
	}
	p := openPage(t, chrome, bs.admin.URL+"/?token="+browserToken, `[data-policy="notify"]`)
	p.eventually("the inspector's targets", `[...document.getElementById("inspect-target").options].some(o => o.value === "policy:notify") ? "listed" : "not yet"`, "listed")
	// The form is submitted from script, not by a click at the button's
	// place, which a page still laying out under load may move.
	p.text(`document.getElementById("inspect-target").value = "policy:notify";
		document.getElementById("inspect-target").dispatchEvent(new Event("change"));
		document.getElementById("inspect-form").requestSubmit(document.getElementById("inspect-go")); "ok"`)
	rows := `[...document.querySelectorAll('#inspect-result [data-window="global"] tr[data-slice]')]`
	p.eventually("global's slices", rows+`.map(e => e.dataset.units + "/" + e.dataset.endsMs).join(",")`,
		strconv.FormatInt(b.Slices[0].Granted, 10)+"/2000")
}
