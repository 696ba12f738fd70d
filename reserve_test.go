package sluice_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/store"
)

// windowsOnly is a store that keeps no schedules.
type windowsOnly struct{}

func (windowsOnly) Decide(context.Context, *store.Request) error { return nil }
func (windowsOnly) Close() error                                 { return nil }

func TestReserveNeedsAScheduler(t *testing.T) {
	lim := sluice.NewLimiter(windowsOnly{}, sluice.Config{OnError: sluice.Allow})
	s := &sluice.Schedule{Name: "s", Rate: sluice.Rate{Events: 1, Per: time.Second}}
	r, err := lim.Reserve(context.Background(), s, nil, 1)
	if err == nil || !strings.Contains(err.Error(), "keeps no schedules") || r.OK || r.Degraded {
		t.Errorf("Reserve on a store without schedules: %+v, %v; want an error and no degraded reservation", r, err)
	}
	if _, err := lim.Cancel(context.Background(), s, nil, "1"); err == nil {
		t.Error("Cancel on a store without schedules: no error")
	}
}

// downStore fails every scheduler call and counts them; deadlines records
// the time left before each call's deadline.
type downStore struct {
	windowsOnly
	mu        sync.Mutex
	calls     int
	deadlines []time.Duration
}

func (s *downStore) Reserve(ctx context.Context, _ *store.ReserveRequest) (store.Reservation, error) {
	s.note(ctx)
	return store.Reservation{}, errDown
}

func (s *downStore) Cancel(ctx context.Context, _ *store.CancelRequest) (bool, error) {
	s.note(ctx)
	return false, errDown
}

func (s *downStore) note(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if d, ok := ctx.Deadline(); ok {
		s.deadlines = append(s.deadlines, time.Until(d))
	}
}

func TestReserveTimeoutAndBreaker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &downStore{}
		lim := sluice.NewLimiter(store, sluice.Config{Breaker: sluice.Breaker{Failures: 2, CoolDown: time.Second}})
		s := fourPerSecond(time.Second)
		for range 2 {
			if r, err := lim.Reserve(t.Context(), s, c45, 1); !errors.Is(err, errDown) || !r.Degraded || r.OK {
				t.Fatalf("Reserve on a failing store: %+v, %v", r, err)
			}
		}
		if !slices.Equal(store.deadlines, []time.Duration{sluice.DefaultTimeout, sluice.DefaultTimeout}) {
			t.Errorf("store calls had deadlines %v away, want the default timeout", store.deadlines)
		}
		// Two failures open the circuit: neither Reserve nor Cancel calls
		// the store until the cool-down ends.
		r, err := lim.Reserve(t.Context(), s, c45, 1)
		if !errors.Is(err, sluice.ErrCircuitOpen) || !r.Degraded || r.OK {
			t.Errorf("Reserve with the circuit open: %+v, %v; want ErrCircuitOpen", r, err)
		}
		if ok, err := lim.Cancel(t.Context(), s, c45, "1"); ok || !errors.Is(err, sluice.ErrCircuitOpen) {
			t.Errorf("Cancel with the circuit open: %v, %v; want ErrCircuitOpen", ok, err)
		}
		if store.calls != 2 {
			t.Errorf("the store was called %d times, want 2", store.calls)
		}
		time.Sleep(time.Second)
		if _, err := lim.Reserve(t.Context(), s, c45, 1); !errors.Is(err, errDown) || store.calls != 3 {
			t.Errorf("after the cool-down: %v with %d calls; want the store probed once more", err, store.calls)
		}
	})
}

func TestReserveFallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fallback := memstore.New(memstore.Config{})
		lim := sluice.NewLimiter(&downStore{}, sluice.Config{Fallback: fallback, FallbackShare: 2, Breaker: sluice.Breaker{Failures: -1}})
		s := fourPerSecond(time.Second)
		// The fallback keeps the schedule at 4/s divided by 2: 500ms apart.
		for i, want := range []time.Duration{0, 500 * time.Millisecond, time.Second} {
			r, err := lim.Reserve(t.Context(), s, c45, 1)
			if !errors.Is(err, errDown) || !r.OK || !r.Degraded || r.Delay != want {
				t.Errorf("reservation %d: %+v, %v; want a degraded OK in %v with the store's error", i+1, r, err, want)
			}
		}
		r, err := lim.Reserve(t.Context(), s, c45, 1)
		if !errors.Is(err, errDown) || r.OK || r.Reason != sluice.ReasonDelay || !r.Degraded {
			t.Errorf("fourth: %+v, %v; want rejected by the fallback's delay", r, err)
		}
		// Cancel reaches the fallback when the store fails.
		last, _ := lim.Reserve(t.Context(), fourPerSecond(2*time.Second), c45, 1)
		if ok, err := lim.Cancel(t.Context(), s, c45, last.ID); !ok || !errors.Is(err, errDown) {
			t.Errorf("Cancel of a fallback reservation: %v, %v; want true with the store's error", ok, err)
		}
		// Wait sleeps until a fallback slot (the cancelled one, 1.5s away),
		// and reports the store's error.
		start := time.Now()
		r, err = lim.Wait(t.Context(), fourPerSecond(2*time.Second), c45, 1)
		if !errors.Is(err, errDown) || !r.OK || time.Since(start) != 1500*time.Millisecond {
			t.Errorf("Wait on the fallback: %+v, %v after %v; want OK after 1.5s with the store's error", r, err, time.Since(start))
		}
	})
}
