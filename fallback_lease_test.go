package sluice_test

import (
	"context"
	"encoding/base64"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/store"
	"github.com/sluicerate/sluice/storetest"
)

// leaseStore keeps leases in memory and fails every call while down,
// counting the calls it answered: the main store of the tests of leases on
// the fallback store. It is no store.Local, so that its calls go through
// the Limiter's deadline and breaker as a Redis store's do. The abandons
// the Limiter sends for the acquires that failed (abandon.go) are not
// counted among the finishes.
type leaseStore struct {
	m *memstore.Store

	mu                 sync.Mutex
	down               bool
	acquires, finishes int // calls answered
}

func newLeaseStore(clock *storetest.Clock) *leaseStore {
	return &leaseStore{m: memstore.New(memstore.Config{Clock: clock.Now}), down: true}
}

func (s *leaseStore) up() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.down
}

func (s *leaseStore) setDown(down bool) {
	s.mu.Lock()
	s.down = down
	s.mu.Unlock()
}

func (s *leaseStore) calls() (acquires, finishes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.acquires, s.finishes
}

func (s *leaseStore) Decide(ctx context.Context, req *store.Request) error {
	if !s.up() {
		return errStoreDown
	}
	return s.m.Decide(ctx, req)
}

func (s *leaseStore) Acquire(ctx context.Context, req *store.Request, lease *store.LeaseGrant) error {
	if !s.up() {
		return errStoreDown
	}
	s.mu.Lock()
	s.acquires++
	s.mu.Unlock()
	return s.m.Acquire(ctx, req, lease)
}

func (s *leaseStore) Finish(ctx context.Context, req *store.FinishRequest) (store.LeaseState, error) {
	if !s.up() {
		return store.LeaseState{}, errStoreDown
	}
	if req.Op != store.LeaseAbandon {
		s.mu.Lock()
		s.finishes++
		s.mu.Unlock()
	}
	return s.m.Finish(ctx, req)
}

func (s *leaseStore) Close() error { return s.m.Close() }

// llm is an LLM gateway's policy: tokens per minute, and at most 8
// requests in flight, each holding its slot at most a minute.
var llm = &sluice.Policy{Name: "llm", Rules: []sluice.Rule{
	{Name: "tokens", Limit: 1000, Window: time.Minute},
	{Name: "in-flight", Concurrency: 8, Lease: time.Minute},
}}

// inFlight returns the leases alive in the in-flight window of llm on s,
// as a peek sees them (its Used counts the peeked request when it fits).
func inFlight(t *testing.T, s store.Store) int64 {
	t.Helper()
	d, err := sluice.NewLimiter(s, sluice.Config{}).Peek(context.Background(), llm, nil, 1)
	if err != nil || len(d.Limits()) != 2 || !d.Allowed {
		t.Fatalf("peek: %+v, %v; want it to fit (fewer than 8 in flight)", d, err)
	}
	return d.Limits()[1].Used - 1
}

// failed reports whether err is a store failure the failure policy
// answered: the store's error, or the open circuit's.
func failed(err error) bool {
	return errors.Is(err, errStoreDown) || errors.Is(err, sluice.ErrCircuitOpen)
}

// fallbackSetup returns a main store that is down, a memory fallback store
// and a Limiter over them with FallbackShare 4, all on clock.
func fallbackSetup(t *testing.T, cfg sluice.Config) (*storetest.Clock, *leaseStore, *memstore.Store, *sluice.Limiter) {
	t.Helper()
	clock := storetest.NewClock(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	main := newLeaseStore(clock)
	fb := memstore.New(memstore.Config{Clock: clock.Now})
	t.Cleanup(func() { main.Close(); fb.Close() })
	cfg.Fallback, cfg.FallbackShare, cfg.Clock = fb, 4, clock
	return clock, main, fb, sluice.NewLimiter(main, cfg)
}

// TestFallbackLeases: while the store fails, Acquire takes leases on the
// fallback store with the limits divided by the share (8 in flight shared
// by 4: 2 here), marked Degraded; their release, settle and extension go
// to the fallback store, even after the store is back, and never change
// what the store holds.
func TestFallbackLeases(t *testing.T) {
	clock, main, fb, l := fallbackSetup(t, sluice.Config{})
	ctx := context.Background()
	var held []*sluice.Lease
	for i := range 2 {
		x, d, err := l.Acquire(ctx, llm, nil, 10)
		if !failed(err) {
			t.Fatalf("acquire #%d: err %v, want the store's or ErrCircuitOpen", i+1, err)
		}
		if !d.Allowed || !d.Degraded || len(d.Limits()) != 2 || d.Limits()[0].Limit != 250 || d.Limits()[1].Limit != 2 || d.Limits()[1].Used != int64(i+1) {
			t.Fatalf("acquire #%d: %+v; want allowed, degraded, by the fallback's limits 1000/4 and 8/4, %d in flight", i+1, d, i+1)
		}
		if x == nil || x.ID() == "" || !x.Degraded() || x.TTL() != time.Minute || !x.Expires().Equal(clock.Now().Add(time.Minute)) {
			t.Fatalf("acquire #%d: lease %+v; want one of the fallback store for a minute", i+1, x)
		}
		held = append(held, x)
	}
	x, d, err := l.Acquire(ctx, llm, nil, 10)
	if !failed(err) || x != nil || d.Allowed || !d.Degraded || d.DeniedBy != "in-flight" || d.Cause != sluice.CauseConcurrency {
		t.Fatalf("third acquire with 2 of 8/4 in flight: %v, %+v, %v; want a degraded denial by in-flight, no lease", x, d, err)
	}
	if n := inFlight(t, fb); n != 2 {
		t.Errorf("fallback store: %d in flight, want 2", n)
	}

	// Release frees the fallback's slot: one more fits.
	if ok, err := held[0].Release(ctx); err != nil || !ok {
		t.Fatalf("release of a fallback lease while the store is down: %v, %v; want held", ok, err)
	}
	x, d, err = l.Acquire(ctx, llm, nil, 10)
	if !failed(err) || !d.Allowed || !x.Degraded() {
		t.Fatalf("acquire after a release: %+v, %v; want allowed by the fallback", d, err)
	}
	held[0] = x
	if ok, err := held[1].Extend(ctx); err != nil || !ok {
		t.Errorf("extend of a fallback lease while the store is down: %v, %v; want held", ok, err)
	}

	// The store comes back (the breaker's cool-down passes): new leases
	// are the store's; those of the fallback end there.
	main.setDown(false)
	clock.Advance(2 * time.Second)
	y, d, err := l.Acquire(ctx, llm, nil, 10)
	if err != nil || !d.Allowed || d.Degraded || y.Degraded() || d.Limits()[1].Limit != 8 {
		t.Fatalf("acquire with the store back: %+v, %v; want allowed by the store", d, err)
	}
	if ok, err := held[0].Settle(ctx, 4); err != nil || !ok {
		t.Errorf("settle of a fallback lease after the store is back: %v, %v; want held", ok, err)
	}
	if ok, err := held[1].Release(ctx); err != nil || !ok {
		t.Errorf("release of a fallback lease after the store is back: %v, %v; want held", ok, err)
	}
	if ok, err := held[1].Release(ctx); err != nil || ok {
		t.Errorf("second release of a fallback lease: %v, %v; want not held", ok, err)
	}
	if a, f := main.calls(); a != 1 || f != 0 {
		t.Errorf("the store answered %d acquires and %d finishes, want 1 and none: fallback leases end on the fallback", a, f)
	}
	if n := inFlight(t, main.m); n != 1 {
		t.Errorf("store: %d in flight, want 1 (its own lease)", n)
	}
	if n := inFlight(t, fb); n != 0 {
		t.Errorf("fallback store: %d in flight, want 0", n)
	}
	if ok, err := y.Release(ctx); err != nil || !ok {
		t.Errorf("release of the store's lease: %v, %v; want held", ok, err)
	}
	if _, f := main.calls(); f != 1 {
		t.Errorf("the store answered %d finishes, want 1 (its own lease's)", f)
	}
}

// TestFallbackLeasesExpire: a fallback lease not released expires on the
// fallback store's clock after its lease time, freeing its slot.
func TestFallbackLeasesExpire(t *testing.T) {
	clock, _, _, l := fallbackSetup(t, sluice.Config{})
	ctx := context.Background()
	var first *sluice.Lease
	for i := range 2 {
		x, d, err := l.Acquire(ctx, llm, nil, 1)
		if !failed(err) || !d.Allowed || !x.Degraded() {
			t.Fatalf("acquire #%d: %+v, %v", i+1, d, err)
		}
		if i == 0 {
			first = x
		}
	}
	clock.Advance(time.Minute - time.Microsecond)
	if _, d, _ := l.Acquire(ctx, llm, nil, 1); d.Allowed {
		t.Fatalf("acquire just before the leases expire: %+v, want denied", d)
	}
	clock.Advance(time.Microsecond)
	if x, d, err := l.Acquire(ctx, llm, nil, 1); !failed(err) || !d.Allowed || !x.Degraded() {
		t.Fatalf("acquire once the leases expired: %+v, %v; want allowed by the fallback", d, err)
	}
	if ok, err := first.Extend(ctx); err != nil || ok {
		t.Errorf("extend of an expired fallback lease: %v, %v; want not held", ok, err)
	}
}

// TestFallbackLeasesBound: goroutines acquiring and releasing on the
// fallback store never hold more than the divided concurrency.
func TestFallbackLeasesBound(t *testing.T) {
	_, _, _, l := fallbackSetup(t, sluice.Config{})
	ctx := context.Background()
	var alive, most, admitted atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				x, d, err := l.Acquire(ctx, llm, nil, 1)
				if !failed(err) || !d.Degraded {
					t.Errorf("acquire: %+v, %v; want degraded", d, err)
					return
				}
				if !d.Allowed {
					continue
				}
				admitted.Add(1)
				n := alive.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				alive.Add(-1)
				if ok, err := x.Release(ctx); err != nil || !ok {
					t.Errorf("release: %v, %v; want held", ok, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if most.Load() > 2 {
		t.Errorf("%d leases of the fallback store alive at once, want at most 8/4 = 2", most.Load())
	}
	if admitted.Load() == 0 {
		t.Error("no acquire was admitted by the fallback store")
	}
}

// TestFallbackLeaseResume: the id of a fallback lease is resumed on the
// fallback store of the Limiter that took it, and holds nothing anywhere
// else; it never reaches the store, and a store lease's id altered to name
// the fallback names nothing.
func TestFallbackLeaseResume(t *testing.T) {
	clock, main, fb, l := fallbackSetup(t, sluice.Config{})
	ctx := context.Background()
	x, _, err := l.Acquire(ctx, llm, nil, 1)
	if !failed(err) || !x.Degraded() {
		t.Fatalf("acquire: %+v, %v; want a fallback lease", x, err)
	}

	// Another process (its own fallback store), and Limiters without a
	// fallback that keeps leases: not held, nothing sent to the store.
	other := memstore.New(memstore.Config{Clock: clock.Now})
	defer other.Close()
	main.setDown(false)
	for name, cfg := range map[string]sluice.Config{
		"another process":             {Fallback: other, FallbackShare: 4},
		"no fallback":                 {},
		"a fallback keeping no lease": {Fallback: &fakeStore{}},
	} {
		y, err := sluice.NewLimiter(main, cfg).ResumeLease(llm, x.ID())
		if err != nil {
			t.Fatalf("%s: ResumeLease: %v", name, err)
		}
		if ok, err := y.Extend(ctx); err != nil || ok {
			t.Errorf("%s: extend of a resumed fallback lease: %v, %v; want not held", name, ok, err)
		}
		if ok, err := y.Release(ctx); err != nil || ok {
			t.Errorf("%s: release of a resumed fallback lease: %v, %v; want not held", name, ok, err)
		}
	}
	if _, f := main.calls(); f != 0 {
		t.Errorf("the store answered %d finishes, want none", f)
	}
	if n := inFlight(t, fb); n != 1 {
		t.Fatalf("fallback store: %d in flight, want 1", n)
	}

	// The same Limiter resumes it on its fallback store.
	y, err := l.ResumeLease(llm, x.ID())
	if err != nil || !y.Degraded() {
		t.Fatalf("ResumeLease in the process that took it: %+v, %v; want a fallback lease", y, err)
	}
	if ok, err := y.Release(ctx); err != nil || !ok {
		t.Errorf("release of the resumed fallback lease: %v, %v; want held", ok, err)
	}
	if ok, err := x.Release(ctx); err != nil || ok {
		t.Errorf("release of the lease after its resumed copy's: %v, %v; want not held", ok, err)
	}
	if n := inFlight(t, fb); n != 0 {
		t.Errorf("fallback store: %d in flight after the release, want 0", n)
	}

	// A store lease's id with the fallback's version byte names nothing.
	clock.Advance(2 * time.Second) // past the breaker's cool-down
	z, d, err := l.Acquire(ctx, llm, nil, 1)
	if err != nil || !d.Allowed || z.Degraded() {
		t.Fatalf("acquire with the store up: %+v, %v", d, err)
	}
	raw, err := base64.RawURLEncoding.DecodeString(z.ID())
	if err != nil || raw[0] != 1 {
		t.Fatalf("a store lease's id %q: version %v, %v; want 1", z.ID(), raw, err)
	}
	raw[0] = 2
	w, err := l.ResumeLease(llm, base64.RawURLEncoding.EncodeToString(raw))
	if err != nil || !w.Degraded() {
		t.Fatalf("ResumeLease of the altered id: %+v, %v", w, err)
	}
	if ok, err := w.Release(ctx); err != nil || ok {
		t.Errorf("release of a store lease's id altered to the fallback's: %v, %v; want not held", ok, err)
	}
	if n := inFlight(t, main.m); n != 1 {
		t.Errorf("store: %d in flight, want 1: the altered id freed the store's lease", n)
	}
	if ok, err := z.Release(ctx); err != nil || !ok {
		t.Errorf("release of the store's lease: %v, %v; want held", ok, err)
	}
}

// TestFallbackLeaseOnError: without a fallback store that keeps leases,
// when the caller gave up, or when the cost exceeds a divided limit, the
// failure of Acquire is decided by OnError as before: Allow admits with a
// lease that holds nothing, Deny denies with none.
func TestFallbackLeaseOnError(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tc := range []struct {
		name     string
		fallback store.Store
		ctx      context.Context
		cost     int64
	}{
		{"no fallback", nil, context.Background(), 1},
		{"fallback keeping no leases", &fakeStore{}, context.Background(), 1},
		{"caller gave up", memstore.New(memstore.Config{}), cancelled, 1},
		{"cost over the divided limit", memstore.New(memstore.Config{}), context.Background(), 251},
	} {
		for _, onError := range []sluice.OnError{sluice.Deny, sluice.Allow} {
			clock := storetest.NewClock(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
			main := newLeaseStore(clock)
			l := sluice.NewLimiter(main, sluice.Config{Fallback: tc.fallback, FallbackShare: 4, OnError: onError, Clock: clock})
			x, d, err := l.Acquire(tc.ctx, llm, nil, tc.cost)
			if !failed(err) || !d.Degraded || d.Allowed != (onError == sluice.Allow) || len(d.Limits()) != 0 {
				t.Errorf("%s, OnError %v: %+v, %v; want the failure policy's degraded decision", tc.name, onError, d, err)
			}
			switch {
			case onError == sluice.Deny && x != nil:
				t.Errorf("%s, OnError Deny: lease %+v, want none", tc.name, x)
			case onError == sluice.Allow && (x == nil || x.ID() != "" || x.Degraded()):
				t.Errorf("%s, OnError Allow: lease %+v, want one that holds nothing", tc.name, x)
			case onError == sluice.Allow:
				if ok, err := x.Release(context.Background()); ok || err != nil {
					t.Errorf("%s: release of a lease that holds nothing: %v, %v", tc.name, ok, err)
				}
			}
			if fb, ok := tc.fallback.(*memstore.Store); ok {
				if n := inFlight(t, fb); n != 0 {
					t.Errorf("%s: %d in flight on the fallback, want 0", tc.name, n)
				}
			}
			main.Close()
		}
		if tc.fallback != nil {
			tc.fallback.Close()
		}
	}
}

// TestFallbackLeaseShadow: a shadow policy's would-be denial on the
// fallback store is admitted with a lease that holds nothing.
func TestFallbackLeaseShadow(t *testing.T) {
	_, _, fb, l := fallbackSetup(t, sluice.Config{})
	shadow := *llm
	shadow.Shadow = true
	ctx := context.Background()
	for i := range 2 {
		if x, d, err := l.Acquire(ctx, &shadow, nil, 1); !failed(err) || !d.Allowed || d.Shadowed || !x.Degraded() {
			t.Fatalf("shadow acquire #%d: %+v, %v; want allowed by the fallback", i+1, d, err)
		}
	}
	x, d, err := l.Acquire(ctx, &shadow, nil, 1)
	if !failed(err) || !d.Allowed || !d.Shadowed || !d.Degraded || d.DeniedBy != "in-flight" || x == nil || x.ID() != "" || x.Degraded() {
		t.Errorf("shadow acquire over the divided concurrency: %+v, %+v, %v; want shadowed, a lease that holds nothing", x, d, err)
	}
	if n := inFlight(t, fb); n != 2 {
		t.Errorf("fallback store: %d in flight, want 2", n)
	}
}

// concurrencyOverride sets every in-flight rule's concurrency.
type concurrencyOverride struct{ n atomic.Int64 }

func (o *concurrencyOverride) Override(_, rule string, _ []string) (sluice.Override, bool) {
	if rule != "in-flight" || o.n.Load() == 0 {
		return sluice.Override{}, false
	}
	return sluice.Override{Limit: o.n.Load()}, true
}

// TestFallbackLeaseOverride: the fallback divides the concurrency a
// runtime override sets (12/4: 3 in flight here), and its leases still end
// there once the override is dropped.
func TestFallbackLeaseOverride(t *testing.T) {
	o := &concurrencyOverride{}
	o.n.Store(12)
	_, main, fb, l := fallbackSetup(t, sluice.Config{Overrides: o})
	ctx := context.Background()
	var held []*sluice.Lease
	for i := range 4 {
		x, d, err := l.Acquire(ctx, llm, nil, 1)
		if !failed(err) || d.Allowed != (i < 3) || d.Limits()[1].Limit != 3 {
			t.Fatalf("acquire #%d under an override of 12 shared by 4: %+v, %v; want allowed while under 3", i+1, d, err)
		}
		if x != nil {
			held = append(held, x)
		}
	}
	o.n.Store(0)
	main.setDown(false)
	for i, x := range held {
		if ok, err := x.Release(ctx); err != nil || !ok {
			t.Errorf("release #%d after the override was dropped: %v, %v; want held", i+1, ok, err)
		}
	}
	if n := inFlight(t, fb); n != 0 {
		t.Errorf("fallback store: %d in flight, want 0", n)
	}
	if _, f := main.calls(); f != 0 {
		t.Errorf("the store answered %d finishes, want none", f)
	}
}
