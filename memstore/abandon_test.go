package memstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/resolve"
	"github.com/sluicerate/sluice/store"
)

// TestAbandonRacesAcquire: an abandon and the acquire of its id sent at
// once, 2,000 times: whichever runs first, the lease is granted exactly
// when the abandon finds it held (and ends it), and in the end no slot and
// no cost is left.
func TestAbandonRacesAcquire(t *testing.T) {
	s := New(Config{})
	defer s.Close()
	p := &sluice.Policy{Name: "race", Rules: []sluice.Rule{
		{Name: "tokens", Limit: 1 << 40, Window: time.Hour},
		{Name: "in-flight", Concurrency: 1 << 20, Lease: time.Hour},
	}}
	ctx := context.Background()
	granted, held := 0, 0
	for i := range 2000 {
		req, err := resolve.Request(p, nil, 10)
		if err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprintf("lease-%d", i)
		grant := store.LeaseGrant{ID: id, TTL: time.Hour}
		abandon := store.FinishRequest{Policy: req.Policy, Checks: append([]store.Check(nil), req.Checks...), ID: id, Op: store.LeaseAbandon, TTL: time.Hour}
		var (
			wg   sync.WaitGroup
			st   store.LeaseState
			aErr error
			fErr error
		)
		// Started in either order: a goroutine started last tends to
		// run first.
		acq := func() { aErr = s.Acquire(ctx, req, &grant) }
		fin := func() { st, fErr = s.Finish(ctx, &abandon) }
		if i%2 == 1 {
			acq, fin = fin, acq
		}
		wg.Go(acq)
		wg.Go(fin)
		wg.Wait()
		if aErr != nil || fErr != nil {
			t.Fatal(aErr, fErr)
		}
		if ok := !grant.Expires.IsZero(); ok != st.Held {
			t.Fatalf("pair %d: acquire granted %v, abandon found it held %v", i, ok, st.Held)
		}
		if !grant.Expires.IsZero() {
			granted++
		}
		if st.Held {
			held++
		}
	}
	req, err := resolve.Request(p, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	req.DryRun = true
	if err := s.Decide(ctx, req); err != nil {
		t.Fatal(err)
	}
	if req.Results[0].Used != 1 || req.Results[1].Used != 1 {
		t.Errorf("after 2,000 abandons raced with their acquires: tokens used %d, leases %d, want only the peek's 1 each", req.Results[0].Used, req.Results[1].Used)
	}
	t.Logf("2,000 pairs: %d acquires ran first (granted, then ended by the abandon), %d after the abandon (denied)", granted, 2000-granted)
}
