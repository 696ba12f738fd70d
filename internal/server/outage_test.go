package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/store"
	"github.com/sluicerate/sluice/storetest"
)

// switchStore is a memory store that fails while down is set, as a Redis
// that stops and comes back. It is not a store.Local, so the Limiter
// applies its circuit breaker to it.
type switchStore struct {
	mem  *memstore.Store
	down atomic.Bool
}

var errRefused = errors.New("redis: connection refused to 10.1.2.3:6379")

func (s *switchStore) Decide(ctx context.Context, req *store.Request) error {
	if s.down.Load() {
		return errRefused
	}
	return s.mem.Decide(ctx, req)
}

func (s *switchStore) Reserve(ctx context.Context, req *store.ReserveRequest) (store.Reservation, error) {
	if s.down.Load() {
		return store.Reservation{}, errRefused
	}
	return s.mem.Reserve(ctx, req)
}

func (s *switchStore) Cancel(ctx context.Context, req *store.CancelRequest) (bool, error) {
	if s.down.Load() {
		return false, errRefused
	}
	return s.mem.Cancel(ctx, req)
}

func (s *switchStore) Close() error { return s.mem.Close() }

// TestStoreOutageLogs: a store outage is logged once per kind of call
// (decisions, schedules, Envoy domains), then summarized, then its end,
// whichever API failed; the metrics count every call.
func TestStoreOutageLogs(t *testing.T) {
	clock := storetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st := &switchStore{mem: memstore.New(memstore.Config{Clock: clock.Now})}
	t.Cleanup(func() { _ = st.Close() })
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey && len(groups) == 0 {
			return slog.Attr{}
		}
		return a
	}}))
	srv := serverFor(t, st, testConfig, Options{Logger: log, Clock: clock, OutageInterval: 5 * time.Second})
	loadEnvoy(t, srv, EnvoyOptions{}, map[string]string{"mail.yaml": "domain: mail\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 2}\n"})
	h := srv.Handler()
	post := func(path, body string) string {
		t.Helper()
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("POST", path, strings.NewReader(body)))
		return w.Body.String()
	}
	envoy := func() { post("/json", `{"domain":"mail","descriptors":[{"entries":[{"key":"user","value":"u"}]}]}`) }
	var res struct {
		OK bool   `json:"ok"`
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(post("/v1/reserve", `{"schedule":"carrier","attributes":{"carrier":"1"}}`)), &res); err != nil || !res.OK {
		t.Fatalf("reserve before the outage: %+v %v", res, err)
	}

	// A short outage: its first failure, then its end.
	st.down.Store(true)
	post("/v1/decide", `{"policy":"notify","attributes":{"category":"a"}}`)
	st.down.Store(false)
	clock.Advance(300 * time.Millisecond)
	post("/v1/decide", `{"policy":"notify","attributes":{"category":"a"}}`)
	post("/v1/decide", `{"policy":"notify","attributes":{"category":"a"}}`)

	// A longer one, on every API.
	st.down.Store(true)
	clock.Advance(10 * time.Second)
	post("/v1/decide", `{"policy":"notify","attributes":{"category":"a"}}`)
	post("/v1/reserve", `{"schedule":"carrier","attributes":{"carrier":"1"}}`)
	post("/v1/cancel", `{"schedule":"carrier","attributes":{"carrier":"1"},"id":"`+res.ID+`"}`)
	envoy()
	clock.Advance(5 * time.Second)
	post("/v1/decide", `{"policy":"notify","attributes":{"category":"b"}}`) // the fifth failure opens the circuit
	for range 100 {
		post("/v1/decide", `{"policy":"edge","attributes":{"ip":"1","user":"u"}}`)
	}
	const refused = `"redis: connection refused to 10.1.2.3:6379"`
	want := []string{
		`level=WARN msg="store failed; decided by on_error" api=decide policy=notify allowed=false fallback=false err=` + refused + ` summary_every=5s`,
		`level=INFO msg="store answers again" outage=300ms failed=1 policies=[notify] last_err=` + refused,
		`level=WARN msg="store failed; decided by on_error" api=decide policy=notify allowed=false fallback=false err=` + refused + ` summary_every=5s`,
		`level=WARN msg="store failed; reservation decided by on_error" api=reserve schedule=carrier ok=false err=` + refused + ` summary_every=5s`,
		`level=WARN msg="store failed; decided by on_error" api=envoy domain=mail allowed=false err="envoy: the store is unavailable: ` + strings.Trim(refused, `"`) + `" summary_every=5s`,
		`level=WARN msg="store circuit breaker open: the store is not called until a probe succeeds" outage=5s failed=5 last_err=` + refused,
		`level=WARN msg="store still failing" failed=5 period=5s policies=[notify] schedules=[carrier] domains=[mail] first_err=` + refused + ` last_err=` + refused + ` circuit=open outage=5s total=5`,
	}
	if got := strings.Split(strings.TrimSpace(logs.String()), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("logged\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	m := w.Body.String()
	for _, line := range []string{
		`sluice_degraded_decisions_total{outcome="denied",policy="edge"} 100`,
		`sluice_degraded_decisions_total{outcome="denied",policy="notify"} 3`,
		`sluice_reservations_total{outcome="degraded",schedule="carrier"} 1`,
	} {
		if !strings.Contains(m, line) {
			t.Errorf("/metrics lacks %q", line)
		}
	}
}

func (s *switchStore) Acquire(ctx context.Context, req *store.Request, lease *store.LeaseGrant) error {
	if s.down.Load() {
		return errRefused
	}
	return s.mem.Acquire(ctx, req, lease)
}

func (s *switchStore) Finish(ctx context.Context, req *store.FinishRequest) (store.LeaseState, error) {
	if s.down.Load() {
		return store.LeaseState{}, errRefused
	}
	return s.mem.Finish(ctx, req)
}

// switchServer returns a switchStore, up, and a test server over it with
// the configuration file.
func switchServer(t *testing.T, file string) (*switchStore, *testServer) {
	t.Helper()
	st := &switchStore{mem: memstore.New(memstore.Config{})}
	t.Cleanup(func() { _ = st.Close() })
	return st, testServerFor(t, st, file, Options{Logger: slog.New(slog.DiscardHandler)})
}

// metric returns the value of the sample name (with its labels) that
// /metrics shows, or "absent".
func (ts *testServer) metric(name string) string {
	ts.t.Helper()
	for line := range strings.SplitSeq(ts.do("GET", "/metrics", "").Body.String(), "\n") {
		if strings.HasPrefix(line, name+" ") {
			return strings.Fields(line)[1]
		}
	}
	return "absent"
}

// TestFallbackLeaseMetrics: a lease the fallback store grants while the
// store fails (on_error: fallback) counts in sluice_leases_in_flight as the
// store's do, and its release ends it there.
func TestFallbackLeaseMetrics(t *testing.T) {
	st, ts := switchServer(t, "store: {on_error: fallback}\n"+leaseConfig)
	inFlight := func() string {
		t.Helper()
		return ts.metric(`sluice_leases_in_flight{policy="llm",rule="in-flight"}`)
	}
	const ann = `{"policy":"llm","attributes":{"user":"ann"},"cost":10}`
	stored := ts.acquire(ann)
	st.down.Store(true)
	fallback := ts.acquire(ann)
	if !stored.Allowed || !fallback.Allowed || stored.Degraded || !fallback.Degraded {
		t.Fatalf("acquires = %+v (store up), %+v (store down): want both granted, the second degraded", stored, fallback)
	}
	if got := inFlight(); got != "2" {
		t.Errorf("in flight with one lease of each store = %s, want 2", got)
	}
	if l := ts.lease("/v1/release", `{"lease":"`+fallback.Lease+`"}`); !l.Held {
		t.Errorf("release of the fallback's lease = %+v, want held", l)
	}
	if got := inFlight(); got != "1" {
		t.Errorf("in flight after the fallback's lease was released = %s, want 1", got)
	}
	st.down.Store(false)
	if l := ts.lease("/v1/release", `{"lease":"`+stored.Lease+`"}`); !l.Held {
		t.Errorf("release of the store's lease = %+v, want held", l)
	}
	if got := inFlight(); got != "0" {
		t.Errorf("in flight after both releases = %s, want 0", got)
	}
}

// TestAbandonMetrics: an acquire whose store call failed is abandoned once
// the store answers again, and the metrics say so: pending while the store
// fails, then ended or nothing_taken, summed over a reload that swapped
// out the Limiter that sent them.
func TestAbandonMetrics(t *testing.T) {
	st, ts := switchServer(t, leaseConfig)
	metric := ts.metric
	const ann = `{"policy":"llm","attributes":{"user":"ann"},"cost":10}`
	st.down.Store(true)
	if a := ts.acquire(ann); a.Allowed || !a.Degraded {
		t.Fatalf("acquire on the failing store = %+v, want a degraded denial", a)
	}
	if got := metric("sluice_lease_abandons_pending"); got != "1" {
		t.Errorf("pending while the store fails = %s, want 1", got)
	}
	// A reload swaps the Limiter out; its abandon is still counted.
	if err := ts.srv.Swap(ts.srv.Config()); err != nil {
		t.Fatal(err)
	}
	st.down.Store(false)
	deadline := time.Now().Add(5 * time.Second)
	for metric(`sluice_lease_abandons_total{outcome="nothing_taken"}`) != "1" {
		if time.Now().After(deadline) {
			t.Fatalf("abandon not answered 5 s after the store came back: pending %s, nothing_taken %s",
				metric("sluice_lease_abandons_pending"), metric(`sluice_lease_abandons_total{outcome="nothing_taken"}`))
		}
		time.Sleep(10 * time.Millisecond)
	}
	for name, want := range map[string]string{
		"sluice_lease_abandons_pending":                        "0",
		`sluice_lease_abandons_total{outcome="ended"}`:         "0",
		`sluice_lease_abandons_total{outcome="expired"}`:       "0",
		`sluice_lease_abandons_total{outcome="dropped"}`:       "0",
		`sluice_lease_abandons_total{outcome="nothing_taken"}`: "1",
	} {
		if got := metric(name); got != want {
			t.Errorf("%s = %s after the abandon was answered, want %s", name, got, want)
		}
	}
}
