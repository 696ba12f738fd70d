package edge

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/edge/edgetest"
	"github.com/sluicerate/sluice/internal/outage"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/store"
	"github.com/sluicerate/sluice/storetest"
)

func TestStoreFailure(t *testing.T) {
	t.Parallel()
	fallback := memstore.New(memstore.Config{Clock: storetest.NewClock(storetest.T0).Now})
	t.Cleanup(func() { _ = fallback.Close() })
	shadow := newPolicy("shadow", 1)
	shadow.Shadow = true
	cases := []struct {
		name   string
		cfg    sluice.Config
		policy *sluice.Policy
		want   []Kind // of successive requests
		log    string
	}{
		{"fail closed", sluice.Config{}, newPolicy("p", 1), []Kind{Unavailable}, "allowed=false fallback=false"},
		{"fail open", sluice.Config{OnError: sluice.Allow}, newPolicy("p", 1), []Kind{Allowed}, "allowed=true fallback=false"},
		{"fallback store", sluice.Config{Fallback: fallback, Breaker: sluice.Breaker{Failures: -1}}, newPolicy("p", 1), []Kind{Allowed, Denied}, "fallback=true"},
		{"shadow", sluice.Config{}, shadow, []Kind{Allowed}, "allowed=true"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var logs bytes.Buffer
			e := mustNew(t, sluice.NewLimiter(edgetest.FailingStore{}, c.cfg), &logs, c.policy)
			for i, want := range c.want {
				o := e.DecideAttrs(context.Background(), nil, Call{Cost: 1, Tag: slog.String("api", "test")})
				if o.Kind != want || !o.Decision().Degraded {
					t.Errorf("request %d: %+v, want %v and degraded", i, o, want)
				}
				if want == Unavailable && (o.Err == nil || o.Class() != (Class{http.StatusServiceUnavailable, "unavailable"})) {
					t.Errorf("request %d: err %v, class %+v; want the store's error, 503", i, o.Err, o.Class())
				}
			}
			line := `level=WARN msg="test: rate limiter store failed; failure policy applied" api=test policy=` + c.policy.Name
			if !strings.Contains(logs.String(), line) || !strings.Contains(logs.String(), c.log) || !strings.Contains(logs.String(), `err="redis: connection refused to 10.1.2.3:6379"`) {
				t.Errorf("logs %q, want %q with %s", logs.String(), line, c.log)
			}
		})
	}
}

// switchStore is a memory store that fails while down is set, as a store
// whose server stops and comes back. It is not a store.Local, so the
// Limiter applies its deadline and circuit breaker to it.
type switchStore struct {
	mem  *memstore.Store
	down atomic.Bool
}

func (s *switchStore) Decide(ctx context.Context, req *store.Request) error {
	if s.down.Load() {
		return edgetest.ErrStore
	}
	return s.mem.Decide(ctx, req)
}

func (s *switchStore) Close() error { return s.mem.Close() }

// TestStoreOutageLogs: an outage of the store is logged as its first
// failure, the circuit opening and the end, not a line per request; the
// edge's outcomes are the same for every request.
func TestStoreOutageLogs(t *testing.T) {
	t.Parallel()
	clock := storetest.NewClock(storetest.T0)
	s := &switchStore{mem: memstore.New(memstore.Config{Clock: clock.Now})}
	t.Cleanup(func() { _ = s.Close() })
	lim := sluice.NewLimiter(s, sluice.Config{Clock: clock})
	var logs bytes.Buffer
	log := PackageLog(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey && len(groups) == 0 {
			return slog.Attr{}
		}
		return a
	}})), "test", "request")
	log.Outage = outage.New(outage.Config{Logger: log.Logger, Now: clock.Now, Circuit: lim.Circuit, Prefix: log.Prefix})
	e, err := New(Config[request]{Limiter: lim, Policies: []*sluice.Policy{newPolicy("p", 1000)}, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	decide := func(n int, want Kind) {
		t.Helper()
		for range n {
			clock.Advance(time.Millisecond)
			if o := e.DecideAttrs(context.Background(), nil, Call{Cost: 1, Tag: slog.String("api", "test")}); o.Kind != want {
				t.Fatalf("outcome %+v, want %v", o, want)
			}
		}
	}
	decide(3, Allowed)
	s.down.Store(true)
	decide(1000, Unavailable) // 5 failures open the circuit for 1 s
	clock.Advance(time.Second)
	decide(1000, Unavailable) // one probe fails and opens it again
	s.down.Store(false)
	clock.Advance(time.Second)
	decide(10, Allowed) // the probe succeeds
	want := `level=WARN msg="test: rate limiter store failed; failure policy applied" api=test policy=p allowed=false fallback=false err="redis: connection refused to 10.1.2.3:6379" summary_every=10s
level=WARN msg="test: store circuit breaker open: the store is not called until a probe succeeds" outage=4ms failed=5 last_err="redis: connection refused to 10.1.2.3:6379"
level=INFO msg="test: store answers again" outage=4s failed=2000 policies=[p] last_err="redis: connection refused to 10.1.2.3:6379" circuit=closed
`
	if got := logs.String(); got != want {
		t.Errorf("logged\n%swant\n%s", got, want)
	}
}

// TestStoreOutageDefault: a Log without a Reporter gets one, shared by
// the edges of a Set: a failing store logs one line for many requests.
func TestStoreOutageDefault(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	lim := sluice.NewLimiter(edgetest.FailingStore{}, sluice.Config{Breaker: sluice.Breaker{Failures: -1}})
	set, err := NewSet(Config[request]{Limiter: lim, Policies: []*sluice.Policy{newPolicy("a", 1), newPolicy("b", 1)},
		Log: PackageLog(slog.New(slog.NewTextHandler(&logs, nil)), "test", "request")})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		if o := set.DecideAttrs(context.Background(), []string{"a", "b"}[i%2], nil, Call{Cost: 1}); o.Kind != Unavailable {
			t.Fatalf("outcome %+v", o)
		}
	}
	if n := strings.Count(logs.String(), "\n"); n != 1 || !strings.Contains(logs.String(), "policy=a") {
		t.Errorf("logged %d lines for 100 failed requests, want the first one:\n%s", n, logs.String())
	}
}

// leaseSwitchStore is a switchStore that keeps leases.
type leaseSwitchStore struct{ switchStore }

func (s *leaseSwitchStore) Acquire(ctx context.Context, req *store.Request, lease *store.LeaseGrant) error {
	if s.down.Load() {
		return edgetest.ErrStore
	}
	return s.mem.Acquire(ctx, req, lease)
}

func (s *leaseSwitchStore) Finish(ctx context.Context, req *store.FinishRequest) (store.LeaseState, error) {
	if s.down.Load() {
		return store.LeaseState{}, edgetest.ErrStore
	}
	return s.mem.Finish(ctx, req)
}

// TestFallbackLeaseFinish: while the store is down, an acquire at the edge
// holds a lease of the fallback store, which Finish ends there; that the
// fallback answered does not end the outage the reporter logs.
func TestFallbackLeaseFinish(t *testing.T) {
	t.Parallel()
	clock := storetest.NewClock(storetest.T0)
	s := &leaseSwitchStore{switchStore{mem: memstore.New(memstore.Config{Clock: clock.Now})}}
	fb := memstore.New(memstore.Config{Clock: clock.Now})
	t.Cleanup(func() { _ = s.Close(); _ = fb.Close() })
	lim := sluice.NewLimiter(s, sluice.Config{Clock: clock, Fallback: fb, FallbackShare: 2})
	var logs bytes.Buffer
	log := PackageLog(slog.New(slog.NewTextHandler(&logs, nil)), "test", "request")
	log.Outage = outage.New(outage.Config{Logger: log.Logger, Now: clock.Now, Circuit: lim.Circuit, Prefix: log.Prefix})
	p := &sluice.Policy{Name: "llm", Rules: []sluice.Rule{{Name: "in-flight", Concurrency: 2, Lease: time.Minute}}}
	set, err := NewSet(Config[request]{Limiter: lim, Policies: []*sluice.Policy{p}, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	s.down.Store(true)
	call := Call{Op: OpAcquire, Cost: 1, Tag: slog.String("api", "test")}
	var ids []string
	for i, want := range []Kind{Allowed, Denied} {
		clock.Advance(time.Millisecond)
		o := set.DecideAttrs(context.Background(), "llm", nil, call)
		if o.Kind != want || !o.Decision().Degraded {
			t.Fatalf("acquire %d with the store down: %+v, want %v and degraded (2 in flight shared by 2)", i+1, o, want)
		}
		for _, x := range o.Leases {
			ids = append(ids, x.ID())
		}
	}
	if len(ids) != 1 {
		t.Fatalf("lease ids %q, want one", ids)
	}
	for range 20 { // past the reporter's interval, 10 s
		clock.Advance(time.Second)
		if f := set.Finish(context.Background(), ids[0], Extend, 0, call); f.Kind != Allowed || !f.Held || f.Err != nil {
			t.Fatalf("extend of the fallback lease: %+v, want held", f)
		}
	}
	if f := set.Finish(context.Background(), ids[0], Release, 0, call); f.Kind != Allowed || !f.Held || f.Err != nil {
		t.Fatalf("release of the fallback lease: %+v, want held", f)
	}
	if o := set.DecideAttrs(context.Background(), "llm", nil, call); o.Kind != Allowed || len(o.Leases) != 1 || !o.Leases[0].Degraded() {
		t.Fatalf("acquire after the release: %+v, want allowed by the fallback", o)
	}
	if strings.Contains(logs.String(), "answers again") {
		t.Errorf("the fallback's answers ended the store's outage:\n%s", logs.String())
	}
}
