package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/store"
	"github.com/sluicerate/sluice/storetest"
)

// fakeStore fails or answers as told, and counts its calls.
type fakeStore struct {
	mu       sync.Mutex
	err      error // returned by Decide when set
	calls    int
	deadline time.Duration   // the deadline left in the last call's context
	ctx      context.Context // the last call's context
}

var errStoreDown = errors.New("store down")

func (s *fakeStore) Decide(ctx context.Context, req *store.Request) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	s.ctx, s.deadline = ctx, -1
	if d, ok := ctx.Deadline(); ok {
		s.deadline = time.Until(d)
	}
	if s.err != nil {
		return s.err
	}
	for i := range req.ResultsBuffer() { // every window fits, one unit left
		req.Results[i] = store.Result{Fits: true, Used: req.Checks[i].Limit - 1, Remaining: 1}
	}
	return nil
}

func (s *fakeStore) Close() error { return nil }

func (s *fakeStore) set(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
}

func (s *fakeStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

var one = &sluice.Policy{Name: "p", Rules: []sluice.Rule{{Name: "r", Limit: 8, Window: time.Minute}}}

func TestFailurePolicy(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		onError sluice.OnError
		allowed bool
	}{
		{"deny", sluice.Deny, false},
		{"allow", sluice.Allow, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &fakeStore{err: errStoreDown}
			l := sluice.NewLimiter(s, sluice.Config{OnError: tc.onError})
			d, err := l.Allow(ctx, one, nil)
			if !errors.Is(err, errStoreDown) {
				t.Errorf("err = %v, want the store's", err)
			}
			if d.Allowed != tc.allowed || !d.Degraded {
				t.Errorf("decision %+v, want allowed=%v degraded", d, tc.allowed)
			}
		})
	}
}

func TestTimeout(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		timeout time.Duration
		want    time.Duration // -1: no deadline
	}{
		{0, sluice.DefaultTimeout},
		{200 * time.Millisecond, 200 * time.Millisecond},
		{-1, -1},
	} {
		s := &fakeStore{}
		l := sluice.NewLimiter(s, sluice.Config{Timeout: tc.timeout})
		if _, err := l.Allow(ctx, one, nil); err != nil {
			t.Fatal(err)
		}
		got := s.deadline
		if tc.want < 0 && got != -1 || tc.want >= 0 && (got > tc.want || got < tc.want-20*time.Millisecond) {
			t.Errorf("Timeout %v: store saw a deadline %v away, want %v", tc.timeout, got, tc.want)
		}
	}
}

// TestTimeoutCallerSooner: a caller's deadline nearer than Config.Timeout
// is the store call's as it stands (no context of the Limiter's own); a
// later one is cut to the timeout.
func TestTimeoutCallerSooner(t *testing.T) {
	s := &fakeStore{}
	l := sluice.NewLimiter(s, sluice.Config{})
	soon, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := l.Allow(soon, one, nil); err != nil {
		t.Fatal(err)
	}
	if s.ctx != soon {
		t.Errorf("caller's deadline 10ms away: the store got another context (deadline %v away), want the caller's", s.deadline)
	}
	late, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if _, err := l.Allow(late, one, nil); err != nil {
		t.Fatal(err)
	}
	if s.ctx == late || s.deadline > sluice.DefaultTimeout {
		t.Errorf("caller's deadline an hour away: the store saw a deadline %v away, want at most %v", s.deadline, sluice.DefaultTimeout)
	}
}

func TestBadInputIsNotAFailure(t *testing.T) {
	s := &fakeStore{err: errStoreDown}
	l := sluice.NewLimiter(s, sluice.Config{OnError: sluice.Allow})
	d, err := l.AllowN(context.Background(), one, nil, 9)
	if !errors.Is(err, sluice.ErrCostExceedsLimit) || d.Allowed || d.Degraded || s.count() != 0 {
		t.Errorf("AllowN over the limit = %+v, %v after %d store calls; want ErrCostExceedsLimit, no call", d, err, s.count())
	}
}

func TestFallbackDividesLimits(t *testing.T) {
	s := &fakeStore{err: errStoreDown}
	fb := memstore.New(memstore.Config{})
	defer fb.Close()
	l := sluice.NewLimiter(s, sluice.Config{Fallback: fb, FallbackShare: 4})
	ctx := context.Background()
	var admitted int
	for range 5 {
		d, err := l.Allow(ctx, one, nil)
		if !errors.Is(err, errStoreDown) && !errors.Is(err, sluice.ErrCircuitOpen) {
			t.Fatalf("err = %v, want the store's or ErrCircuitOpen", err)
		}
		if !d.Degraded || len(d.Limits()) != 1 || d.Limits()[0].Limit != 2 {
			t.Fatalf("decision %+v, want a degraded decision of the fallback, limit 8/4 = 2", d)
		}
		if d.Allowed {
			admitted++
		}
	}
	if admitted != 2 {
		t.Errorf("fallback admitted %d of 5, want 2 (limit 8 shared by 4)", admitted)
	}
}

func TestBreaker(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := &fakeStore{err: errStoreDown}
	l := sluice.NewLimiter(s, sluice.Config{Clock: clock, Breaker: sluice.Breaker{Failures: 3, CoolDown: 2 * time.Second}})

	circuit := func(when, want string) {
		t.Helper()
		if got := l.Circuit(); got != want {
			t.Errorf("%s: circuit %s, want %s", when, got, want)
		}
	}
	for i := range 3 {
		circuit(fmt.Sprintf("after %d failures", i), "closed")
		if _, err := l.Allow(ctx, one, nil); !errors.Is(err, errStoreDown) {
			t.Fatalf("failure %d: err = %v", i+1, err)
		}
	}
	circuit("after 3 failures", "open")
	// Open: answered at once, the store is not called.
	for range 10 {
		d, err := l.Allow(ctx, one, nil)
		if !errors.Is(err, sluice.ErrCircuitOpen) || d.Allowed || !d.Degraded {
			t.Fatalf("open circuit: %+v, %v; want a degraded denial with ErrCircuitOpen", d, err)
		}
	}
	if got := s.count(); got != 3 {
		t.Fatalf("store called %d times, want 3", got)
	}
	// A probe after the cool-down fails: open for another cool-down.
	clock.Advance(2 * time.Second)
	circuit("after the cool-down", "half_open")
	if _, err := l.Allow(ctx, one, nil); !errors.Is(err, errStoreDown) {
		t.Fatalf("probe: err = %v, want the store's", err)
	}
	if _, err := l.Allow(ctx, one, nil); !errors.Is(err, sluice.ErrCircuitOpen) {
		t.Fatalf("after a failed probe: err = %v, want ErrCircuitOpen", err)
	}
	if got := s.count(); got != 4 {
		t.Fatalf("store called %d times, want 4", got)
	}
	// The store recovers: the next probe closes the circuit.
	s.set(nil)
	clock.Advance(time.Second)
	if _, err := l.Allow(ctx, one, nil); !errors.Is(err, sluice.ErrCircuitOpen) {
		t.Fatalf("mid cool-down: err = %v, want ErrCircuitOpen", err)
	}
	clock.Advance(time.Second)
	for i := range 3 {
		if d, err := l.Allow(ctx, one, nil); err != nil || !d.Allowed || d.Degraded {
			t.Fatalf("call %d after recovery: %+v, %v", i+1, d, err)
		}
	}
	if got := s.count(); got != 7 {
		t.Fatalf("store called %d times, want 7", got)
	}
	circuit("after a good probe", "closed")
}

// A store that answers with a refusal (store.ErrRefused) is answering: the
// failure policy decides each request, and the circuit stays closed, so the
// store is called again the moment it stands by its calls.
func TestBreakerIgnoresRefusals(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	refused := fmt.Errorf("replicas missing: %w", store.ErrRefused)
	s := &fakeStore{err: refused}
	l := sluice.NewLimiter(s, sluice.Config{Clock: clock, Breaker: sluice.Breaker{Failures: 3, CoolDown: 2 * time.Second}})
	for i := range 10 {
		d, err := l.Allow(ctx, one, nil)
		if !errors.Is(err, store.ErrRefused) || d.Allowed || !d.Degraded {
			t.Fatalf("refusal %d: %+v, %v; want a degraded denial with the store's refusal", i+1, d, err)
		}
	}
	if got := l.Circuit(); got != "closed" {
		t.Errorf("after 10 refusals: circuit %s, want closed", got)
	}
	s.set(nil)
	if d, err := l.Allow(ctx, one, nil); err != nil || !d.Allowed {
		t.Fatalf("the store stands by its calls again: %+v, %v; want admitted", d, err)
	}
	if got := s.count(); got != 11 {
		t.Errorf("store called %d times, want 11", got)
	}
}

// shardedStore is a store.Sharded of two fakeStores: a request goes to the
// shard named by its first check's first value.
type shardedStore struct{ shards map[string]*fakeStore }

func (s *shardedStore) Shard(req *store.Request) string { return req.Checks[0].Values[0] }
func (s *shardedStore) QueueShard(q store.Queue) string { return "" }
func (s *shardedStore) Close() error                    { return nil }
func (s *shardedStore) Decide(ctx context.Context, req *store.Request) error {
	return s.shards[s.Shard(req)].Decide(ctx, req)
}

// TestBreakerPerShard: over a store.Sharded, the failures of one shard
// open its circuit alone; the other shard's requests still reach it.
func TestBreakerPerShard(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	down, up := &fakeStore{err: errStoreDown}, &fakeStore{}
	s := &shardedStore{shards: map[string]*fakeStore{"a": down, "b": up}}
	l := sluice.NewLimiter(s, sluice.Config{Clock: clock, Breaker: sluice.Breaker{Failures: 3, CoolDown: 2 * time.Second}})
	p := &sluice.Policy{Name: "per-user", Rules: []sluice.Rule{{Name: "user", By: []string{"user"}, Limit: 10, Window: time.Minute}}}
	for i := range 6 {
		// Interleaved: a success of shard b does not reset shard a's count.
		if _, err := l.Allow(ctx, p, map[string]string{"user": "a"}); err == nil {
			t.Fatalf("request %d of the shard that is down: no error", i+1)
		}
		if d, err := l.Allow(ctx, p, map[string]string{"user": "b"}); err != nil || d.Degraded || !d.Allowed {
			t.Fatalf("request %d of the shard that answers: %+v, %v; want admitted by the store", i+1, d, err)
		}
	}
	if got := down.count(); got != 3 {
		t.Errorf("the shard that is down was called %d times, want 3 (then its circuit opened)", got)
	}
	if got := up.count(); got != 6 {
		t.Errorf("the shard that answers was called %d times, want 6", got)
	}
	if got := l.Circuit(); got != "open" {
		t.Errorf("circuit %s with one shard's open, want open", got)
	}
	clock.Advance(2 * time.Second)
	down.set(nil)
	if d, err := l.Allow(ctx, p, map[string]string{"user": "a"}); err != nil || d.Degraded {
		t.Fatalf("the probe after the cool-down: %+v, %v; want the store's answer", d, err)
	}
	if got := l.Circuit(); got != "closed" {
		t.Errorf("circuit %s after the probe succeeded, want closed", got)
	}
}

// blockingStore holds every call until its context ends or release is
// closed.
type blockingStore struct {
	fakeStore
	entered chan struct{}
	release chan struct{}
}

func (s *blockingStore) Decide(ctx context.Context, req *store.Request) error {
	s.entered <- struct{}{}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-s.release:
		return s.fakeStore.Decide(ctx, req)
	}
}

func TestBreakerOneProbe(t *testing.T) {
	// While the probe is in flight, every other call is answered at once.
	ctx := context.Background()
	clock := storetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := &blockingStore{entered: make(chan struct{}, 1), release: make(chan struct{})}
	s.err = errStoreDown
	l := sluice.NewLimiter(s, sluice.Config{Clock: clock, Timeout: -1, Breaker: sluice.Breaker{Failures: 1, CoolDown: time.Second}})
	close(s.release)
	if _, err := l.Allow(ctx, one, nil); !errors.Is(err, errStoreDown) {
		t.Fatal(err)
	}
	<-s.entered
	clock.Advance(time.Second)
	s.release = make(chan struct{})
	s.set(nil)
	done := make(chan error, 1)
	go func() {
		_, err := l.Allow(ctx, one, nil)
		done <- err
	}()
	<-s.entered // the probe is in the store
	for range 5 {
		if _, err := l.Allow(ctx, one, nil); !errors.Is(err, sluice.ErrCircuitOpen) {
			t.Fatalf("during the probe: err = %v, want ErrCircuitOpen", err)
		}
	}
	close(s.release)
	if err := <-done; err != nil {
		t.Fatalf("probe: %v", err)
	}
	if _, err := l.Allow(ctx, one, nil); err != nil {
		t.Fatalf("after the probe: %v", err)
	}
}

func TestCallerCancelIsNotAFailure(t *testing.T) {
	clock := storetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := &fakeStore{err: context.Canceled}
	l := sluice.NewLimiter(s, sluice.Config{Clock: clock, Breaker: sluice.Breaker{Failures: 1}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 3 {
		if _, err := l.Allow(ctx, one, nil); !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	}
	if got := s.count(); got != 3 {
		t.Errorf("store called %d times, want 3: a caller's cancellation must not open the circuit", got)
	}
}

// A shadow policy never denies, not even by the failure policy; and a
// failure-policy denial is told apart from a quota denial by FailedClosed.
func TestShadowAndFailedClosed(t *testing.T) {
	ctx := context.Background()
	s := &fakeStore{err: errStoreDown}
	l := sluice.NewLimiter(s, sluice.Config{Breaker: sluice.Breaker{Failures: -1}})
	d, err := l.Allow(ctx, one, nil)
	if !errors.Is(err, errStoreDown) || !d.FailedClosed() {
		t.Errorf("store down: %+v, %v; want FailedClosed and the store's error", d, err)
	}
	shadow := *one
	shadow.Shadow = true
	d, err = l.Allow(ctx, &shadow, nil)
	if !errors.Is(err, errStoreDown) || !d.Allowed || !d.Degraded || d.Shadowed || d.FailedClosed() {
		t.Errorf("shadow, store down: %+v, %v; want allowed, degraded, not shadowed, the store's error", d, err)
	}

	// A fallback store's denial is a quota denial, not a failed-closed one.
	fb := sluice.NewLimiter(s, sluice.Config{Fallback: memstore.New(memstore.Config{}), Breaker: sluice.Breaker{Failures: -1}})
	tiny := &sluice.Policy{Name: "tiny", Rules: []sluice.Rule{{Name: "r", Limit: 1, Window: time.Minute}}}
	fb.Allow(ctx, tiny, nil)
	d, _ = fb.Allow(ctx, tiny, nil)
	if d.Allowed || !d.Degraded || d.FailedClosed() || d.DeniedBy != "r" {
		t.Errorf("fallback denial: %+v; want a degraded quota denial by r", d)
	}
}
