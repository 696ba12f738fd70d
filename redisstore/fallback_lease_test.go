package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/storetest"
)

// TestFallbackLeasesRedisDown freezes Redis (SIGSTOP): Acquire takes its
// leases on the memory fallback store, at most the concurrency divided by
// the share (8/4) in flight; released while Redis is down or after it is
// back, they end on the fallback store and leave what Redis holds as it
// was, and the lease Redis granted before ends on Redis. The acquire that
// timed out is abandoned on Redis once it wakes: whether or not it ran
// there, Redis then holds the lease granted before alone.
func TestFallbackLeasesRedisDown(t *testing.T) {
	srv, s := openOwn(t, redisstore.Config{Prefix: newPrefix()})
	clock := storetest.NewClock(storetest.T0)
	fb := memstore.New(memstore.Config{Clock: clock.Now})
	defer fb.Close()
	lim := sluice.NewLimiter(s, sluice.Config{Fallback: fb, FallbackShare: 4, Timeout: 100 * time.Millisecond,
		Breaker: sluice.Breaker{Failures: 1}, Clock: clock})
	p := &sluice.Policy{Name: "llm", Rules: []sluice.Rule{
		{Name: "tokens", Limit: 1000, Window: time.Minute},
		{Name: "in-flight", Concurrency: 8, Lease: time.Minute},
	}}
	ctx := context.Background()
	// inFlight returns the leases alive on st, as a peek sees them.
	inFlight := func(what string, lim *sluice.Limiter) int64 {
		t.Helper()
		d, err := lim.Peek(ctx, p, nil, 1)
		if err != nil || !d.Allowed || len(d.Limits()) != 2 {
			t.Fatalf("peek of %s: %+v, %v; want it to fit", what, d, err)
		}
		return d.Limits()[1].Used - 1 // the peeked request counts
	}
	onRedis := sluice.NewLimiter(s, sluice.Config{Timeout: 10 * time.Second})
	onFallback := sluice.NewLimiter(fb, sluice.Config{})

	first, d, err := lim.Acquire(ctx, p, nil, 10)
	if err != nil || !d.Allowed || d.Degraded || first.Degraded() {
		t.Fatalf("acquire on Redis: %+v, %v", d, err)
	}

	thaw := freeze(t, srv)
	var held []*sluice.Lease
	for i := range 3 {
		x, d, err := lim.Acquire(ctx, p, nil, 10)
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, sluice.ErrCircuitOpen) {
			t.Fatalf("acquire #%d with Redis frozen: err %v, want the deadline's or ErrCircuitOpen", i+1, err)
		}
		if i == 2 {
			if x != nil || d.Allowed || !d.Degraded || d.Cause != sluice.CauseConcurrency {
				t.Fatalf("acquire #3 with 2 of 8/4 in flight: %v, %+v; want a degraded denial by in-flight, no lease", x, d)
			}
			break
		}
		if !d.Allowed || !d.Degraded || d.Limits()[1].Limit != 2 || x == nil || !x.Degraded() {
			t.Fatalf("acquire #%d with Redis frozen: %+v, %+v; want allowed by the fallback, in flight limit 8/4", i+1, x, d)
		}
		held = append(held, x)
	}
	if ok, err := held[0].Release(ctx); err != nil || !ok {
		t.Fatalf("release of a fallback lease with Redis frozen: %v, %v; want held", ok, err)
	}
	x, d, err := lim.Acquire(ctx, p, nil, 10)
	if err == nil || !d.Allowed || !x.Degraded() {
		t.Fatalf("acquire after the release: %+v, %v; want allowed by the fallback", d, err)
	}
	held[0] = x

	thaw()
	// The acquire that timed out may have run once Redis woke (its reply
	// was lost); its abandon ends it, or keeps it from taking anything.
	st := abandoned(t, lim, "after Redis woke")
	if st.Abandoned != 1 || st.Expired != 0 || st.Dropped != 0 {
		t.Errorf("abandons: %+v, want the one acquire that timed out (the others met the open circuit) answered", st)
	}
	const before = 1
	if n := inFlight("Redis", onRedis); n != before {
		t.Fatalf("Redis: %d in flight after it woke and the abandon was answered, want %d (the lease granted before)", n, before)
	}
	t.Logf("the acquire that timed out had run once Redis woke: %v (its abandon found it held, and ended it)", st.Held == 1)
	clock.Advance(2 * time.Second) // past the breaker's cool-down
	y, d, err := lim.Acquire(ctx, p, nil, 10)
	if err != nil || !d.Allowed || d.Degraded || y.Degraded() {
		t.Fatalf("acquire with Redis back: %+v, %v; want allowed by Redis", d, err)
	}
	if ok, err := held[0].Settle(ctx, 3); err != nil || !ok {
		t.Errorf("settle of a fallback lease with Redis back: %v, %v; want held", ok, err)
	}
	if ok, err := held[1].Release(ctx); err != nil || !ok {
		t.Errorf("release of a fallback lease with Redis back: %v, %v; want held", ok, err)
	}
	if n := inFlight("the fallback", onFallback); n != 0 {
		t.Errorf("fallback store: %d in flight, want 0", n)
	}
	if n := inFlight("Redis", onRedis); n != before+1 {
		t.Errorf("Redis: %d in flight after the fallback leases ended, want %d: they changed what Redis holds", n, before+1)
	}
	for _, x := range []*sluice.Lease{first, y} {
		if ok, err := x.Release(ctx); err != nil || !ok {
			t.Errorf("release of a lease of Redis: %v, %v; want held", ok, err)
		}
	}
	if n := inFlight("Redis", onRedis); n != before-1 {
		t.Errorf("Redis: %d in flight after its leases ended, want %d", n, before-1)
	}
}
