package sluice_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/store"
	"github.com/sluicerate/sluice/storetest"
)

// Every test here runs in a synctest bubble: time.Now and timers are fake
// and advance only when every goroutine is blocked, so Wait's sleeps take no
// wall-clock time and the instants are exact.

func fourPerSecond(maxDelay time.Duration) *sluice.Schedule {
	return &sluice.Schedule{Name: "carrier", By: []string{"carrier"},
		Rate: sluice.Rate{Events: 4, Per: time.Second}, MaxDelay: maxDelay}
}

var c45 = map[string]string{"carrier": "45"}

func newLimiter() *sluice.Limiter {
	return sluice.NewLimiter(memstore.New(memstore.Config{}), sluice.Config{})
}

func TestWaitSleepsUntilTheSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim, s := newLimiter(), fourPerSecond(2*time.Second)
		start := time.Now()
		for i := range 3 {
			r, err := lim.Wait(t.Context(), s, c45, 1)
			if err != nil || !r.OK {
				t.Fatalf("Wait %d: %+v, %v", i+1, r, err)
			}
			if got, want := time.Since(start), time.Duration(i)*250*time.Millisecond; got != want {
				t.Errorf("Wait %d returned at +%v, want +%v", i+1, got, want)
			}
			if !r.Slot.Equal(time.Now()) {
				t.Errorf("Wait %d returned at %v, before or after its slot %v", i+1, time.Now(), r.Slot)
			}
		}
	})
}

func TestWaitConcurrent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim, s := newLimiter(), fourPerSecond(2*time.Second)
		start := time.Now()
		var (
			wg  sync.WaitGroup
			mu  sync.Mutex
			got []time.Duration
		)
		for range 8 {
			wg.Go(func() {
				if _, err := lim.Wait(t.Context(), s, c45, 1); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				got = append(got, time.Since(start))
				mu.Unlock()
			})
		}
		wg.Wait()
		slices.Sort(got)
		for i, d := range got {
			if want := time.Duration(i) * 250 * time.Millisecond; d != want {
				t.Errorf("call %d left at +%v, want +%v", i+1, d, want)
			}
		}
	})
}

func TestWaitCancelledGivesTheSlotBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim, s := newLimiter(), fourPerSecond(2*time.Second)
		if _, err := lim.Reserve(t.Context(), s, c45, 1); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		time.AfterFunc(100*time.Millisecond, cancel)
		start := time.Now()
		r, err := lim.Wait(ctx, s, c45, 1)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait: %+v, %v; want context.Canceled", r, err)
		}
		if got := time.Since(start); got != 100*time.Millisecond {
			t.Errorf("Wait returned after %v, want 100ms", got)
		}
		// Its slot, T+250ms, is free again: 150ms from now, second in line
		// after the first reservation, whose time runs until then.
		next, err := lim.Reserve(t.Context(), s, c45, 1)
		if err != nil || !next.OK || next.Delay != 150*time.Millisecond || next.Queue != 2 {
			t.Errorf("after the cancelled Wait: %+v, %v; want OK in 150ms, queue 2", next, err)
		}
	})
}

func TestWaitDeadlineBeforeSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim, s := newLimiter(), fourPerSecond(2*time.Second)
		for range 2 {
			if _, err := lim.Reserve(t.Context(), s, c45, 1); err != nil {
				t.Fatal(err)
			}
		}
		// The next slot is 500ms away.
		for _, timeout := range []time.Duration{400 * time.Millisecond, 500 * time.Millisecond} {
			ctx, cancel := context.WithTimeout(t.Context(), timeout)
			start := time.Now()
			r, err := lim.Wait(ctx, s, c45, 1)
			cancel()
			if !errors.Is(err, sluice.ErrDeadlineBeforeSlot) || r.OK || r.Reason != sluice.ReasonDeadline || r.Delay != 500*time.Millisecond {
				t.Errorf("timeout %v: %+v, %v; want ErrDeadlineBeforeSlot, reason deadline, delay 500ms", timeout, r, err)
			}
			if time.Since(start) != 0 {
				t.Errorf("timeout %v: Wait slept %v before failing", timeout, time.Since(start))
			}
		}
		// Nothing was reserved: the next slot is still 500ms away, and a
		// deadline after it is met.
		ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond+time.Microsecond)
		defer cancel()
		start := time.Now()
		r, err := lim.Wait(ctx, s, c45, 1)
		if err != nil || !r.OK || time.Since(start) != 500*time.Millisecond || r.Queue != 3 {
			t.Errorf("deadline 1µs after the slot: %+v, %v after %v; want OK at 500ms, queue 3", r, err, time.Since(start))
		}
		// A deadline that has passed fails at once.
		past, cancel2 := context.WithDeadline(context.WithoutCancel(t.Context()), time.Now().Add(-time.Second))
		defer cancel2()
		if _, err := lim.Wait(past, s, c45, 1); err == nil {
			t.Error("Wait with a past deadline: no error")
		}
	})
}

func TestWaitRejected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim, s := newLimiter(), fourPerSecond(250*time.Millisecond)
		for range 2 {
			if _, err := lim.Wait(t.Context(), s, c45, 1); err != nil {
				t.Fatal(err)
			}
		}
		// Now at +250ms with the next slot at +500ms: two more fit, the
		// third would wait 500ms. With a far deadline, the schedule's
		// MaxDelay is what rejects it.
		ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
		defer cancel()
		for range 2 {
			if _, err := lim.Reserve(ctx, s, c45, 1); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		r, err := lim.Wait(ctx, s, c45, 1)
		if !errors.Is(err, sluice.ErrRejected) || r.OK || r.Reason != sluice.ReasonDelay || r.Delay != 500*time.Millisecond {
			t.Errorf("Wait over MaxDelay: %+v, %v; want ErrRejected, reason delay, delay 500ms", r, err)
		}
		if time.Since(start) != 0 {
			t.Errorf("Wait slept %v before being rejected", time.Since(start))
		}
		s.MaxQueue, s.MaxDelay = 2, time.Hour
		if r, err := lim.Wait(ctx, s, c45, 1); !errors.Is(err, sluice.ErrRejected) || r.Reason != sluice.ReasonQueue {
			t.Errorf("Wait on a full queue: %+v, %v; want ErrRejected, reason queue", r, err)
		}
	})
}

func TestWaitContextAlreadyDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim, s := newLimiter(), fourPerSecond(2*time.Second)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if _, err := lim.Wait(ctx, s, c45, 1); !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait: %v, want context.Canceled", err)
		}
		if r, _ := lim.Reserve(t.Context(), s, c45, 1); r.Delay != 0 || r.Queue != 1 {
			t.Errorf("a Wait on a done context reserved a slot: next %+v", r)
		}
	})
}

func TestWaitUsesTheConfiguredClock(t *testing.T) {
	clock := storetest.NewClock(storetest.T0)
	store := memstore.New(memstore.Config{Clock: clock.Now})
	lim := sluice.NewLimiter(store, sluice.Config{Clock: clock})
	s := fourPerSecond(2 * time.Second)
	if r, err := lim.Wait(context.Background(), s, c45, 2); err != nil || r.Delay != 0 {
		t.Fatalf("first Wait: %+v, %v", r, err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := lim.Wait(context.Background(), s, c45, 1)
		done <- err
	}()
	clock.AwaitTimers(1)
	if at := clock.Timers(); len(at) != 1 || !at[0].Equal(storetest.T0.Add(500*time.Millisecond)) {
		t.Errorf("Wait sleeps until %v, want T0+500ms (cost 2 takes two intervals)", at)
	}
	clock.Advance(499 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Wait returned before its timer fired: %v", err)
	default:
	}
	clock.Advance(time.Millisecond)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// failingStore is a store whose scheduler fails, optionally only on Cancel.
type failingStore struct {
	*memstore.Store
	failReserve bool
}

var errDown = errors.New("store down")

func (s failingStore) Reserve(ctx context.Context, req *store.ReserveRequest) (store.Reservation, error) {
	if s.failReserve {
		return store.Reservation{}, errDown
	}
	return s.Store.Reserve(ctx, req)
}

func (s failingStore) Cancel(context.Context, *store.CancelRequest) (bool, error) {
	return false, errDown
}

func TestWaitStoreFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := fourPerSecond(2 * time.Second)
		for _, onError := range []sluice.OnError{sluice.Deny, sluice.Allow} {
			lim := sluice.NewLimiter(failingStore{memstore.New(memstore.Config{}), true}, sluice.Config{OnError: onError})
			start := time.Now()
			r, err := lim.Wait(t.Context(), s, c45, 1)
			if !errors.Is(err, errDown) || !r.Degraded || r.OK != (onError == sluice.Allow) || time.Since(start) != 0 {
				t.Errorf("OnError %v: %+v, %v; want the store's error and a degraded reservation at once", onError, r, err)
			}
			r, err = lim.Reserve(t.Context(), s, c45, 1)
			if !errors.Is(err, errDown) || !r.Degraded || r.OK != (onError == sluice.Allow) || r.Delay != 0 {
				t.Errorf("Reserve, OnError %v: %+v, %v; want the store's error and a degraded reservation", onError, r, err)
			}
		}
		// A Wait whose context ends and whose Cancel fails reports both.
		lim := sluice.NewLimiter(failingStore{memstore.New(memstore.Config{}), false}, sluice.Config{})
		if _, err := lim.Reserve(t.Context(), s, c45, 1); err != nil {
			t.Fatal(err)
		}
		ctx, stop := context.WithCancel(t.Context())
		time.AfterFunc(50*time.Millisecond, stop)
		_, err := lim.Wait(ctx, s, c45, 1)
		if !errors.Is(err, context.Canceled) || !errors.Is(err, errDown) {
			t.Errorf("Wait with a failing Cancel: %v; want context.Canceled joined with the store's error", err)
		}
	})
}

// slowReply is a memory store whose reservations reach the caller d after
// the store decided them, as a reply from Redis does.
type slowReply struct {
	*memstore.Store
	d time.Duration
}

func (s slowReply) Reserve(ctx context.Context, req *store.ReserveRequest) (store.Reservation, error) {
	r, err := s.Store.Reserve(ctx, req)
	time.Sleep(s.d)
	return r, err
}

func TestWaitSlotPastTheDeadlineOnArrival(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := sluice.NewLimiter(slowReply{memstore.New(memstore.Config{}), 100 * time.Millisecond}, sluice.Config{})
		s := fourPerSecond(2 * time.Second)
		start := time.Now()
		for range 2 { // slots T+0 and T+250ms, decided at T+0 and T+100ms
			if _, err := lim.Reserve(t.Context(), s, c45, 1); err != nil {
				t.Fatal(err)
			}
		}
		// Asked at T+200ms with a deadline at T+550ms, the store places the
		// slot at T+500ms, 300ms from its decision and within the deadline.
		// The reply arrives at T+300ms, from when the 300ms end after the
		// deadline: Wait gives the slot back and says so at once, rather
		// than sleep until the deadline.
		ctx, cancel := context.WithDeadline(t.Context(), start.Add(550*time.Millisecond))
		defer cancel()
		r, err := lim.Wait(ctx, s, c45, 1)
		if !errors.Is(err, sluice.ErrDeadlineBeforeSlot) || r.OK || r.Reason != sluice.ReasonDeadline || r.Delay != 300*time.Millisecond {
			t.Errorf("Wait: %+v, %v; want ErrDeadlineBeforeSlot, reason deadline, delay 300ms", r, err)
		}
		if got := time.Since(start); got != 300*time.Millisecond {
			t.Errorf("Wait returned at T+%v, want T+300ms, when the reply arrived", got)
		}
		// The slot was given back: the next one is T+500ms again.
		next, err := lim.Reserve(t.Context(), s, c45, 1)
		if err != nil || !next.OK || !next.Slot.Equal(start.Add(500*time.Millisecond)) {
			t.Errorf("after the slot was given back: %+v, %v; want the slot at T+500ms", next, err)
		}
	})
}
