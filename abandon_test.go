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

// lossyStore keeps leases in memory and fails as told: an Acquire that
// fails may have run first (its reply lost, as a Redis's is when the
// deadline passes before it answers), and a Finish may fail at once or
// wait for its deadline (a frozen server). It is no store.Local, so that
// the Limiter's calls go as a Redis store's do. It counts the abandons it
// was sent, answered or not, and keeps each Acquire's request and id.
type lossyStore struct {
	m *memstore.Store

	mu       sync.Mutex
	acquire  error // what Acquire returns
	ran      bool  // and whether it ran the call first
	finish   error // what Finish returns, without running the call
	hang     bool  // Finish waits for its deadline
	abandons int   // abandons sent to it
	acquired []acquired
}

type acquired struct {
	req store.Request
	id  string
}

func (s *lossyStore) set(f func(s *lossyStore)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

func (s *lossyStore) sent() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.abandons
}

func (s *lossyStore) Decide(ctx context.Context, req *store.Request) error {
	return s.m.Decide(ctx, req)
}

func (s *lossyStore) Acquire(ctx context.Context, req *store.Request, lease *store.LeaseGrant) error {
	if err := ctx.Err(); err != nil {
		return err // sends nothing, as a Redis store does
	}
	s.mu.Lock()
	fail, ran := s.acquire, s.ran
	r := *req
	r.Checks = slices.Clone(req.Checks)
	s.acquired = append(s.acquired, acquired{r, lease.ID})
	s.mu.Unlock()
	if fail == nil || ran {
		if err := s.m.Acquire(ctx, req, lease); err != nil {
			return err
		}
	}
	return fail
}

func (s *lossyStore) Finish(ctx context.Context, req *store.FinishRequest) (store.LeaseState, error) {
	if err := ctx.Err(); err != nil {
		return store.LeaseState{}, err
	}
	s.mu.Lock()
	if req.Op == store.LeaseAbandon {
		s.abandons++
	}
	fail, hang := s.finish, s.hang
	s.mu.Unlock()
	if hang {
		<-ctx.Done()
		return store.LeaseState{}, ctx.Err()
	}
	if fail != nil {
		return store.LeaseState{}, fail
	}
	return s.m.Finish(ctx, req)
}

func (s *lossyStore) Close() error { return s.m.Close() }

// lossySetup returns a clock, a lossyStore on it and a Limiter over it
// (OnError Deny, no breaker) on the same clock.
func lossySetup() (*storetest.Clock, *lossyStore, *sluice.Limiter) {
	clock := storetest.NewClock(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))
	s := &lossyStore{m: memstore.New(memstore.Config{Clock: clock.Now})}
	lim := sluice.NewLimiter(s, sluice.Config{Clock: clock, OnError: sluice.Deny, Breaker: sluice.Breaker{Failures: -1}})
	return clock, s, lim
}

// failAcquire acquires a lease of llm (cost 10) and fails the test unless
// it is the failure policy's degraded denial with the store's error.
func failAcquire(t *testing.T, lim *sluice.Limiter) {
	t.Helper()
	x, d, err := lim.Acquire(context.Background(), llm, nil, 10)
	if !errors.Is(err, errStoreDown) || d.Allowed || !d.Degraded || x != nil {
		t.Fatalf("acquire on the failing store: %+v, lease %v, %v; want a degraded denial with its error", d, x, err)
	}
}

// expectAbandons checks the Limiter's AbandonStats.
func expectAbandons(t *testing.T, what string, lim *sluice.Limiter, want sluice.AbandonStats) {
	t.Helper()
	if got := lim.AbandonStats(); got != want {
		t.Errorf("%s: abandon stats %+v, want %+v", what, got, want)
	}
}

// used returns what llm's rules count on s (tokens, then leases in
// flight), as a peek of cost 1 sees them, less the peek's own unit.
func used(t *testing.T, s store.Store) (tokens, leases int64) {
	t.Helper()
	d, err := sluice.NewLimiter(s, sluice.Config{}).Peek(context.Background(), llm, nil, 1)
	if err != nil || len(d.Limits()) != 2 || !d.Allowed {
		t.Fatalf("peek: %+v, %v; want it to fit", d, err)
	}
	return d.Limits()[0].Used - 1, d.Limits()[1].Used - 1
}

// TestAbandonLostReply: an acquire that the store ran but whose reply was
// lost holds a slot and 10 tokens that nobody holds; the Limiter abandons
// it, retrying every 50 ms doubling while the store fails, and once the
// store answers the slot is free and the tokens refunded.
func TestAbandonLostReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, s, lim := lossySetup()
		s.set(func(s *lossyStore) { s.acquire, s.ran, s.finish = errStoreDown, true, errStoreDown })
		failAcquire(t, lim)
		if tokens, leases := used(t, s.m); tokens != 10 || leases != 1 {
			t.Fatalf("after the lost reply the store counts %d tokens and %d leases, want 10 and 1 (the call ran)", tokens, leases)
		}
		// Sent at once, then after 50, 100, 200, 400 and 800 ms: 6 within
		// 2 s, the next at 2.55 s.
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if n := s.sent(); n != 6 {
			t.Errorf("abandons sent in 2 s of a failing store: %d, want 6 (at 0, 50, 150, 350, 750 and 1550 ms)", n)
		}
		expectAbandons(t, "while the store fails", lim, sluice.AbandonStats{Pending: 1})
		s.set(func(s *lossyStore) { s.finish = nil })
		time.Sleep(time.Second)
		synctest.Wait()
		expectAbandons(t, "once the store answers", lim, sluice.AbandonStats{Abandoned: 1, Held: 1})
		if n := s.sent(); n != 7 {
			t.Errorf("abandons sent: %d, want 7", n)
		}
		if tokens, leases := used(t, s.m); tokens != 0 || leases != 0 {
			t.Errorf("after the abandon the store counts %d tokens and %d leases, want none", tokens, leases)
		}
	})
}

// TestAbandonNoTimeout: a Limiter whose calls have no deadline but their
// callers' (Timeout negative) sends its abandons with one of 1 s.
func TestAbandonNoTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock, s, _ := lossySetup()
		s.set(func(s *lossyStore) { s.acquire, s.ran, s.hang = errStoreDown, true, true })
		lim := sluice.NewLimiter(s, sluice.Config{Clock: clock, Timeout: -1, Breaker: sluice.Breaker{Failures: -1}})
		failAcquire(t, lim)
		time.Sleep(time.Second + time.Millisecond)
		synctest.Wait()
		if n := s.sent(); n != 1 {
			t.Errorf("abandons sent in the first second of a store not answering: %d, want 1 (its deadline 1 s)", n)
		}
		s.set(func(s *lossyStore) { s.hang = false })
		time.Sleep(2 * time.Second)
		synctest.Wait()
		expectAbandons(t, "once the store answers", lim, sluice.AbandonStats{Abandoned: 1, Held: 1})
	})
}

// TestAbandonBeforeAcquire: an acquire that has not run when its abandon
// does (it reaches the store later) takes nothing when it runs, until its
// lease time has passed.
func TestAbandonBeforeAcquire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock, s, lim := lossySetup()
		s.set(func(s *lossyStore) { s.acquire = errStoreDown })
		failAcquire(t, lim)
		synctest.Wait()
		expectAbandons(t, "abandoned before the acquire ran", lim, sluice.AbandonStats{Abandoned: 1})
		late := func() (store.Request, time.Time) {
			s.mu.Lock()
			a := s.acquired[0]
			s.mu.Unlock()
			req := a.req
			req.Checks = slices.Clone(a.req.Checks)
			grant := store.LeaseGrant{ID: a.id, TTL: time.Minute}
			if err := s.m.Acquire(context.Background(), &req, &grant); err != nil {
				t.Fatal(err)
			}
			return req, grant.Expires
		}
		req, exp := late()
		if !exp.IsZero() || req.Results[0].Fits || req.Results[1].Cause != store.CauseConcurrency {
			t.Errorf("the acquire run after its abandon: expires %v, results %+v; want nothing taken, denied", exp, req.Results)
		}
		if tokens, leases := used(t, s.m); tokens != 0 || leases != 0 {
			t.Errorf("after the late acquire the store counts %d tokens and %d leases, want none", tokens, leases)
		}
		clock.Advance(time.Minute) // the tombstone's lease time
		if _, exp := late(); exp.IsZero() {
			t.Errorf("the acquire of the id a lease time after its abandon was denied; the tombstone should be gone")
		}
	})
}

// TestAbandonExpires: an abandon that the store never answers is given up
// once the lease time has passed on the Limiter's clock (a lease the store
// took has expired by then), and nothing more is sent.
func TestAbandonExpires(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock, s, lim := lossySetup()
		s.set(func(s *lossyStore) { s.acquire, s.finish = errStoreDown, errStoreDown })
		failAcquire(t, lim)
		time.Sleep(time.Second)
		clock.Advance(time.Minute - time.Microsecond)
		time.Sleep(time.Second)
		expectAbandons(t, "1µs before the lease time", lim, sluice.AbandonStats{Pending: 1})
		clock.Advance(time.Microsecond)
		time.Sleep(time.Second)
		synctest.Wait()
		expectAbandons(t, "at the lease time", lim, sluice.AbandonStats{Expired: 1})
		n := s.sent()
		time.Sleep(time.Minute)
		if s.sent() != n {
			t.Errorf("abandons sent after it was given up: %d, want none", s.sent()-n)
		}
	})
}

// TestAbandonDeadlineExtends: an abandon that meets its deadline (the
// store does not answer: it may not have run the acquire, and would run
// it, with a full lease time, when it wakes) is kept for a lease time from
// then.
func TestAbandonDeadlineExtends(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock, s, lim := lossySetup()
		s.set(func(s *lossyStore) { s.acquire, s.hang = errStoreDown, true })
		failAcquire(t, lim)
		clock.Advance(50 * time.Second)
		time.Sleep(5 * time.Second) // a few abandons meet their deadline: kept until T+110s
		clock.Advance(30 * time.Second)
		time.Sleep(5 * time.Second)
		expectAbandons(t, "past the lease time from the acquire, within it from the last deadline", lim, sluice.AbandonStats{Pending: 1})
		s.set(func(s *lossyStore) { s.hang = false })
		time.Sleep(5 * time.Second)
		synctest.Wait()
		expectAbandons(t, "once the store answers", lim, sluice.AbandonStats{Abandoned: 1})
	})
}

// TestAbandonDeadlineKeepsAll: while abandons meet their deadline, every
// lease queued is kept, not only the one just sent: with 10 queued and one
// sent about every second, each is sent once in 10 s, while the Limiter's
// clock moves 20 s a second, 200 s in 10, past their lease time of a
// minute (and an abandon meets its deadline at least every 2 s: 40 s).
func TestAbandonDeadlineKeepsAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock, s, lim := lossySetup()
		s.set(func(s *lossyStore) { s.acquire, s.hang = errStoreDown, true })
		for range 10 {
			failAcquire(t, lim)
		}
		for range 30 {
			clock.Advance(20 * time.Second)
			time.Sleep(time.Second)
		}
		expectAbandons(t, "10 minutes of a store not answering", lim, sluice.AbandonStats{Pending: 10})
		s.set(func(s *lossyStore) { s.hang = false })
		time.Sleep(5 * time.Second)
		synctest.Wait()
		expectAbandons(t, "once the store answers", lim, sluice.AbandonStats{Abandoned: 10})
	})
}

// TestAbandonBounded: the queue holds 10,000 leases; one more drops the
// oldest.
func TestAbandonBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock, s, lim := lossySetup()
		s.set(func(s *lossyStore) { s.acquire, s.finish = errStoreDown, errStoreDown })
		for range 10_001 {
			failAcquire(t, lim)
		}
		synctest.Wait()
		expectAbandons(t, "10,001 failed acquires", lim, sluice.AbandonStats{Pending: 10_000, Dropped: 1})
		clock.Advance(time.Minute)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		expectAbandons(t, "a lease time later", lim, sluice.AbandonStats{Expired: 10_000, Dropped: 1})
	})
}

// TestAbandonNotSent: an acquire that never reached the store (an open
// circuit, a caller's context already done, a closed store) queues
// nothing, and neither does one on a store.Local.
func TestAbandonNotSent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock, s, _ := lossySetup()
		s.set(func(s *lossyStore) { s.acquire = errStoreDown })
		lim := sluice.NewLimiter(s, sluice.Config{Clock: clock, Breaker: sluice.Breaker{Failures: 1, CoolDown: time.Hour}})
		failAcquire(t, lim) // opens the circuit
		synctest.Wait()
		expectAbandons(t, "the failed acquire", lim, sluice.AbandonStats{Abandoned: 1})
		if _, _, err := lim.Acquire(context.Background(), llm, nil, 1); !errors.Is(err, sluice.ErrCircuitOpen) {
			t.Fatalf("acquire with the circuit open: %v", err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		open := sluice.NewLimiter(s, sluice.Config{Clock: clock, Breaker: sluice.Breaker{Failures: -1}})
		if _, _, err := open.Acquire(ctx, llm, nil, 1); !errors.Is(err, context.Canceled) {
			t.Fatalf("acquire with a done context: %v", err)
		}
		s.set(func(s *lossyStore) { s.acquire = store.ErrClosed })
		if _, _, err := open.Acquire(context.Background(), llm, nil, 1); !errors.Is(err, store.ErrClosed) {
			t.Fatalf("acquire on a closed store: %v", err)
		}
		synctest.Wait()
		expectAbandons(t, "the circuit open", lim, sluice.AbandonStats{Abandoned: 1})
		expectAbandons(t, "a done context, a closed store", open, sluice.AbandonStats{})
		s.set(func(s *lossyStore) { s.acquire = errStoreDown })
		local := sluice.NewLimiter(localLossy{s}, sluice.Config{Clock: clock})
		failAcquire(t, local)
		synctest.Wait()
		expectAbandons(t, "a store.Local", local, sluice.AbandonStats{})
	})
}

// localLossy is a lossyStore that says it is a store.Local.
type localLossy struct{ *lossyStore }

func (localLossy) Local() {}
