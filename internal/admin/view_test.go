package admin_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/sluicerate/sluice/internal/admin"
	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/internal/server"
	"github.com/sluicerate/sluice/internal/servertest"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/storetest"
)

// testConfig is the configuration most of the package's tests serve.
const testConfig = servertest.Config

// adminServer is a sluice serve over a memory store whose clock, and the
// admin view's, is clock: its public handler h and its admin handler.
type adminServer struct {
	t     *testing.T
	srv   *server.Server
	reg   *prometheus.Registry
	h     http.Handler
	clock *storetest.Clock
	admin http.Handler
}

func newAdminServer(t *testing.T, file string, token string) *adminServer {
	t.Helper()
	return newAdminServerWith(t, file, token, server.Options{MaxBodyBytes: 1024})
}

// newAdminServerWith is newAdminServer with opts, whose clock and registry
// it sets.
func newAdminServerWith(t *testing.T, file string, token string, opts server.Options) *adminServer {
	t.Helper()
	cfg, err := config.Parse("test.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st := memstore.New(memstore.Config{Clock: clock.Now})
	t.Cleanup(func() { st.Close() })
	reg := prometheus.NewRegistry()
	opts.Clock, opts.Registry = clock, reg
	srv, err := server.New(st, cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return &adminServer{t: t, srv: srv, reg: reg, h: srv.Handler(), clock: clock,
		admin: srv.AdminHandler(server.AdminOptions{Token: token})}
}

// do sends a request to the public handler.
func (as *adminServer) do(method, path, body string) *httptest.ResponseRecorder {
	as.t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.RemoteAddr = "127.0.0.1:5555"
	w := httptest.NewRecorder()
	as.h.ServeHTTP(w, r)
	return w
}

// get sends a GET to the admin handler with the given headers.
func (as *adminServer) get(path string, header ...string) *httptest.ResponseRecorder {
	as.t.Helper()
	r := httptest.NewRequest("GET", path, nil)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	as.admin.ServeHTTP(w, r)
	return w
}

// getJSON GETs path from the admin handler and decodes its 200 answer.
func (as *adminServer) getJSON(path string, v any) {
	as.t.Helper()
	w := as.get(path)
	if w.Code != 200 {
		as.t.Fatalf("GET %s = %d %s", path, w.Code, w.Body)
	}
	if err := json.Unmarshal(w.Body.Bytes(), v); err != nil {
		as.t.Fatalf("GET %s: %v", path, err)
	}
}

func TestAdminToken(t *testing.T) {
	t.Parallel()
	as := newAdminServer(t, testConfig, "s3cret")
	for _, tc := range []struct {
		name, path string
		header     []string
		want       int
	}{
		{"no token: page", "/", nil, 401},
		{"no token: API", "/api/v1/denied", nil, 401},
		{"no token: metrics", "/metrics", nil, 401},
		{"no token: pprof", "/debug/pprof/", nil, 401},
		{"wrong bearer", "/api/v1/config", []string{"Authorization", "Bearer nope"}, 401},
		{"basic auth", "/api/v1/config", []string{"Authorization", "Basic czNjcmV0"}, 401},
		{"wrong cookie", "/api/v1/config", []string{"Cookie", admin.Cookie + "=nope"}, 401},
		{"wrong ?token", "/?token=nope", nil, 401},
		{"bearer: page", "/", []string{"Authorization", "Bearer s3cret"}, 200},
		{"bearer: API", "/api/v1/config", []string{"Authorization", "Bearer s3cret"}, 200},
		{"bearer: metrics", "/metrics", []string{"Authorization", "Bearer s3cret"}, 200},
		{"bearer: pprof", "/debug/pprof/", []string{"Authorization", "Bearer s3cret"}, 200},
		{"cookie", "/api/v1/health", []string{"Cookie", admin.Cookie + "=s3cret"}, 200},
		{"?token sets the cookie", "/?token=s3cret", nil, http.StatusSeeOther},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := as.get(tc.path, tc.header...)
			if w.Code != tc.want {
				t.Fatalf("GET %s = %d, want %d: %s", tc.path, w.Code, tc.want, w.Body)
			}
			switch w.Code {
			case 401:
				if got := w.Header().Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
					t.Errorf("WWW-Authenticate = %q, want a Bearer challenge", got)
				}
				if strings.Contains(w.Body.String(), "s3cret") {
					t.Errorf("the refusal shows the token: %s", w.Body)
				}
			case http.StatusSeeOther:
				if loc := w.Header().Get("Location"); loc != "/" {
					t.Errorf("Location = %q, want / (without the token)", loc)
				}
				c := w.Result().Cookies()
				if len(c) != 1 || c[0].Name != admin.Cookie || c[0].Value != "s3cret" || !c[0].HttpOnly || c[0].SameSite != http.SameSiteStrictMode {
					t.Errorf("cookies = %v, want one HttpOnly SameSite=Strict %s", c, admin.Cookie)
				}
			}
		})
	}
}

func TestAdminWithoutToken(t *testing.T) {
	t.Parallel()
	as := newAdminServer(t, testConfig, "")
	for _, path := range []string{"/", "/app.js", "/app.css", "/uplot/uPlot.iife.min.js", "/api/v1/config", "/api/v1/rates",
		"/api/v1/denied", "/api/v1/health", "/api/v1/leases", "/metrics", "/debug/pprof/"} {
		if w := as.get(path); w.Code != 200 {
			t.Errorf("GET %s = %d, want 200", path, w.Code)
		}
	}
	if w := as.get("/nope"); w.Code != 404 || !strings.Contains(w.Header().Get("Content-Type"), "problem+json") {
		t.Errorf("GET /nope = %d %q, want a 404 problem", w.Code, w.Header().Get("Content-Type"))
	}
}

// TestPublicHandlerServesNoView checks that none of the admin view is on the
// public listener.
func TestPublicHandlerServesNoView(t *testing.T) {
	t.Parallel()
	as := newAdminServer(t, testConfig, "")
	for _, path := range []string{"/", "/app.js", "/uplot/uPlot.iife.min.js", "/api/v1/config", "/api/v1/rates",
		"/api/v1/denied", "/api/v1/health", "/api/v1/leases", "/debug/pprof/", "/debug/pprof/heap"} {
		if w := as.do("GET", path, ""); w.Code != 404 {
			t.Errorf("public GET %s = %d, want 404", path, w.Code)
		}
	}
	if w := as.do("POST", "/api/v1/inspect", `{"policy":"notify"}`); w.Code != 404 {
		t.Errorf("public POST /api/v1/inspect = %d, want 404", w.Code)
	}
}

// counterValues reads a counter family from the server's registry, by its
// labels joined with "|".
func counterValues(t *testing.T, reg *prometheus.Registry, name string, labels ...string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[labelKey(m, labels)] += m.GetCounter().GetValue()
		}
	}
	return out
}

func labelKey(m *dto.Metric, labels []string) string {
	vals := make([]string, len(labels))
	for i, l := range labels {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == l {
				vals[i] = lp.GetValue()
			}
		}
	}
	return strings.Join(vals, "|")
}

func TestAdminRatesMatchCounters(t *testing.T) {
	t.Parallel()
	as := newAdminServer(t, testConfig, "")
	for i := range 9 {
		as.do("POST", "/v1/decide", fmt.Sprintf(`{"policy":"notify","attributes":{"category":"c%d"}}`, i%3))
		as.do("POST", "/v1/decide", `{"policy":"shadowed"}`)
		if i%4 == 0 {
			as.clock.Advance(time.Second)
		}
	}
	as.do("POST", "/v1/peek", `{"policy":"notify","attributes":{"category":"c0"}}`) // not counted
	var r admin.RatesJSON
	as.getJSON("/api/v1/rates?seconds=60", &r)
	if r.Seconds != 60 || r.Start != as.clock.Now().Unix()-59 {
		t.Errorf("seconds %d from %d, want 60 from %d", r.Seconds, r.Start, as.clock.Now().Unix()-59)
	}
	want := counterValues(t, as.reg, "sluice_decisions_total", "policy", "rule", "outcome")
	if len(want) == 0 {
		t.Fatal("the server counted no decisions")
	}
	got := map[string]float64{}
	for _, s := range r.Series {
		var sum int64
		for _, c := range s.PerSecond {
			sum += c
		}
		if sum != s.Total {
			t.Errorf("%s/%s/%s: the last 60 s hold %d, the total is %d (all the traffic is in them)", s.Policy, s.Rule, s.Outcome, sum, s.Total)
		}
		got[s.Policy+"|"+s.Rule+"|"+s.Outcome] = float64(s.Total)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: the view counts %v, sluice_decisions_total %v", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("the view has series %v, the counter %v", got, want)
	}
	if got["notify|global|denied"] == 0 || got["shadowed|one|shadowed"] == 0 || got["notify||allowed"] == 0 {
		t.Errorf("series %v lack a denial, a shadow denial or an allowed decision", got)
	}
	if w := as.get("/api/v1/rates?seconds=0"); w.Code != 400 {
		t.Errorf("?seconds=0 = %d, want 400", w.Code)
	}
}

func TestAdminDeniedWaitDecreases(t *testing.T) {
	t.Parallel()
	as := newAdminServer(t, testConfig, "")
	for range 3 {
		as.do("POST", "/v1/decide", `{"policy":"edge","attributes":{"ip":"203.0.113.9","user":"ann"}}`)
	}
	find := func() admin.DeniedKeyJSON {
		t.Helper()
		var d admin.DeniedJSON
		as.getJSON("/api/v1/denied", &d)
		for _, r := range d.Rules {
			if r.Policy == "edge" && r.Rule == "per-ip" && len(r.Keys) == 1 {
				if r.Capacity != admin.DeniedPerRule || len(r.By) != 1 || r.By[0] != "ip" {
					t.Errorf("rule table %+v", r)
				}
				return r.Keys[0]
			}
		}
		t.Fatalf("no denied key for edge/per-ip in %+v", d)
		return admin.DeniedKeyJSON{}
	}
	k := find()
	if k.Values[0] != "203.0.113.9" || k.Count != 1 || k.WaitMS != 60000 {
		t.Errorf("denied key %+v, want 203.0.113.9 denied once, let through in 60 s", k)
	}
	as.clock.Advance(1500 * time.Millisecond)
	if k2 := find(); k2.WaitMS != k.WaitMS-1500 || !k2.LetThroughAt.Equal(k.LetThroughAt) {
		t.Errorf("1.5 s later: wait %d ms, want %d", k2.WaitMS, k.WaitMS-1500)
	}
	as.clock.Advance(time.Minute)
	if k3 := find(); k3.WaitMS != 0 {
		t.Errorf("a minute later: wait %d ms, want 0", k3.WaitMS)
	}
	as.clock.Advance(admin.DeniedStale)
	var d admin.DeniedJSON
	as.getJSON("/api/v1/denied", &d)
	for _, r := range d.Rules {
		if len(r.Keys) > 0 {
			t.Errorf("%s/%s still shows %d keys denied more than %v ago", r.Policy, r.Rule, len(r.Keys), admin.DeniedStale)
		}
	}
}

func TestAdminInspectMemory(t *testing.T) {
	t.Parallel()
	as := newAdminServer(t, testConfig, "")
	as.do("POST", "/v1/decide", `{"policy":"notify","attributes":{"category":"a"}}`)
	as.do("POST", "/v1/decide", `{"policy":"notify","attributes":{"category":"a"}}`)
	post := func(body string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/api/v1/inspect", strings.NewReader(body))
		w := httptest.NewRecorder()
		as.admin.ServeHTTP(w, r)
		return w
	}
	w := post(`{"policy":"notify","attributes":{"category":"a"}}`)
	if w.Code != 200 {
		t.Fatalf("inspect = %d %s", w.Code, w.Body)
	}
	var got admin.InspectJSON
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Next == nil || got.Next.Allowed || got.Next.DeniedBy != "category" || len(got.Windows) != 2 || got.Windows[1].Used != 2 || got.EntriesShown {
		t.Errorf("inspect = %s", w.Body)
	}
	for _, tc := range []struct{ body, code string }{
		{`{"policy":"nope"}`, "unknown_policy"},
		{`{"policy":"notify"}`, "missing_attribute"},
		{`{}`, "bad_request"},
		{`{"policy":"notify","schedule":"carrier"}`, "bad_request"},
		{`{"schedule":"nope"}`, "unknown_schedule"},
		{`{"policy":"notify","extra":1}`, "malformed_json"},
	} {
		w := post(tc.body)
		if w.Code != 400 || !strings.Contains(w.Body.String(), `"code":"`+tc.code+`"`) {
			t.Errorf("inspect %s = %d %s, want 400 %s", tc.body, w.Code, w.Body, tc.code)
		}
	}
	w = post(`{"schedule":"carrier","attributes":{"carrier":"1"}}`)
	if w.Code != 200 || !strings.Contains(w.Body.String(), "queued slots on Redis") {
		t.Errorf("inspect a schedule on memory = %d %s", w.Code, w.Body)
	}
}

func TestAdminConfigShowsReloadError(t *testing.T) {
	t.Parallel()
	as := newAdminServer(t, testConfig, "")
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(path, []byte("policies:\n  - name: x\n    limits:\n      - {name: r, limit: -1, window: 1m}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := as.srv.ReloadFile(path); err == nil {
		t.Fatal("a negative limit reloaded")
	}
	var c admin.ConfigJSON
	as.getJSON("/api/v1/config", &c)
	if c.Reload == nil || c.Reload.OK || !strings.Contains(c.Reload.Error, "limit") || c.Reload.File != path {
		t.Errorf("reload = %+v, want the failure", c.Reload)
	}
	if len(c.Policies) != 3 || c.Policies[0].Name != "notify" || len(c.Policies[0].Rules) != 2 || c.Store != "memory" || len(c.Schedules) != 1 {
		t.Errorf("config = %+v", c)
	}
	if by := c.Policies[1].By; len(by) != 2 || by[0] != "ip" || by[1] != "user" {
		t.Errorf("edge's attributes = %v, want [ip user]", by)
	}
}

func TestAdminHealth(t *testing.T) {
	t.Parallel()
	as := newAdminServer(t, testConfig, "")
	as.do("POST", "/v1/decide", `{"policy":"notify","attributes":{"category":"a"}}`)
	var h admin.HealthJSON
	as.getJSON("/api/v1/health?seconds=10", &h)
	if h.Store != "memory" || h.Breaker != "closed" || h.PingError != "" || len(h.Latency) != 10 || h.Latency[9].Calls < 1 {
		t.Errorf("health = %+v", h)
	}
}

// leaseConfig is a policy with a rate rule and a concurrency rule.
const leaseConfig = `
policies:
  - name: llm
    limits:
      - {name: tokens, by: [user], limit: 100000, window: 1m}
      - {name: in-flight, by: [user], concurrency: 3, lease: 30s}
  - name: notify
    limits:
      - {name: global, limit: 5, window: 30m}
`

// acquire takes a lease of body's policy through the public API and returns
// its id.
func (as *adminServer) acquire(body string) string {
	as.t.Helper()
	w := as.do("POST", "/v1/acquire", body)
	var a struct {
		Allowed bool   `json:"allowed"`
		Lease   string `json:"lease"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &a); err != nil || w.Code != 200 || !a.Allowed || a.Lease == "" {
		as.t.Fatalf("acquire %s = %d %s", body, w.Code, w.Body)
	}
	return a.Lease
}

// inspect posts body to the admin handler's key inspector.
func (as *adminServer) inspect(body string) admin.InspectJSON {
	as.t.Helper()
	r := httptest.NewRequest("POST", "/api/v1/inspect", strings.NewReader(body))
	w := httptest.NewRecorder()
	as.admin.ServeHTTP(w, r)
	var got admin.InspectJSON
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || w.Code != 200 {
		as.t.Fatalf("inspect %s = %d %s", body, w.Code, w.Body)
	}
	return got
}

// TestAdminLeasesMemory checks GET /api/v1/leases, the leases this server
// granted of each concurrency rule that are in flight and those that
// expired unreleased, against the server's own metrics, and the key
// inspector's figures of a concurrency rule on memory (no leases listed:
// the memory store shows figures only, as for every window).
func TestAdminLeasesMemory(t *testing.T) {
	t.Parallel()
	as := newAdminServer(t, leaseConfig, "")
	leases := func() admin.LeasesJSON {
		t.Helper()
		var l admin.LeasesJSON
		as.getJSON("/api/v1/leases", &l)
		if len(l.Rules) != 1 || l.Rules[0].Policy != "llm" || l.Rules[0].Rule != "in-flight" || l.Rules[0].Concurrency != 3 ||
			l.Rules[0].LeaseMS != 30000 || len(l.Rules[0].By) != 1 {
			t.Fatalf("leases = %+v, want llm's in-flight rule alone", l)
		}
		// The figures are the metrics'.
		gauges := map[string]float64{}
		mfs, err := as.reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				gauges[mf.GetName()+"|"+labelKey(m, []string{"policy", "rule"})] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
		r := l.Rules[0]
		if float64(r.InFlight) != gauges["sluice_leases_in_flight|llm|in-flight"] || float64(r.Expired) != gauges["sluice_leases_expired_total|llm|in-flight"] {
			t.Errorf("leases = %+v, the metrics say %v", r, gauges)
		}
		return l
	}
	if l := leases(); l.Rules[0].InFlight != 0 || l.Rules[0].Expired != 0 {
		t.Errorf("before any lease: %+v", l.Rules[0])
	}
	a := as.acquire(`{"policy":"llm","attributes":{"user":"ann"},"cost":100}`)
	as.clock.Advance(time.Second)
	as.acquire(`{"policy":"llm","attributes":{"user":"ann"},"cost":100}`)
	as.acquire(`{"policy":"llm","attributes":{"user":"bob"},"cost":100}`)
	if l := leases(); l.Rules[0].InFlight != 3 || l.Rules[0].Expired != 0 {
		t.Errorf("three taken: %+v, want 3 in flight", l.Rules[0])
	}
	in := as.inspect(`{"policy":"llm","attributes":{"user":"ann"}}`)
	if len(in.Windows) != 2 || in.EntriesShown {
		t.Fatalf("inspect = %+v", in)
	}
	// The peek's figures count the lease it would grant; alive does not.
	if w := in.Windows[1]; w.Algorithm != "concurrency" || w.Alive == nil || *w.Alive != 2 || w.Used != 3 || w.Limit != 3 || w.Remaining != 0 ||
		w.WindowMS != 30000 || w.RetryAfterMS != 0 || w.ResetAfterMS != 30000 || w.Cause != "" || w.Leases != nil {
		t.Errorf("ann's in-flight window = %+v, want 2 of 3 leases alive (3 with the peek's), none listed", w)
	}
	if w := as.do("POST", "/v1/release", `{"lease":"`+a+`"}`); w.Code != 200 || !strings.Contains(w.Body.String(), `"held":true`) {
		t.Fatalf("release = %d %s", w.Code, w.Body)
	}
	if l := leases(); l.Rules[0].InFlight != 2 || l.Rules[0].Expired != 0 {
		t.Errorf("one released: %+v, want 2 in flight", l.Rules[0])
	}
	// Ann's third fills her window: retry_after is until her earliest lease
	// (taken at 1 s) expires.
	as.acquire(`{"policy":"llm","attributes":{"user":"ann"},"cost":100}`)
	as.clock.Advance(10 * time.Second)
	if w := as.inspect(`{"policy":"llm","attributes":{"user":"ann"}}`).Windows[1]; w.Alive == nil || *w.Alive != 2 {
		t.Errorf("ann's window after a release and one more = %+v, want 2 alive", w)
	}
	as.acquire(`{"policy":"llm","attributes":{"user":"ann"},"cost":100}`)
	// Full: the peek is denied, and its figures are the window's.
	if w := as.inspect(`{"policy":"llm","attributes":{"user":"ann"}}`).Windows[1]; w.Alive == nil || *w.Alive != 3 || w.Used != 3 || w.Remaining != 0 ||
		w.Cause != "concurrency" || w.RetryAfterMS != 20000 || w.ResetAfterMS != 30000 {
		t.Errorf("ann's full window = %+v, want 3 alive, retry after 20 s (her lease taken at 1 s expires at 31 s), the last expiring in 30 s", w)
	}
	// 30 s after the last lease, every lease has expired unreleased.
	as.clock.Advance(30 * time.Second)
	if l := leases(); l.Rules[0].InFlight != 0 || l.Rules[0].Expired != 4 {
		t.Errorf("all expired: %+v, want 0 in flight, 4 expired", l.Rules[0])
	}
	if w := as.inspect(`{"policy":"llm","attributes":{"user":"ann"}}`).Windows[1]; w.Alive == nil || *w.Alive != 0 || w.Used != 1 {
		t.Errorf("ann's window once all expired = %+v, want none alive", w)
	}
}
