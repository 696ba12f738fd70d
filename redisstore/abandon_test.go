package redisstore_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/store"
)

// TestAbandonTombstoneKey: an abandon of a lease not taken leaves its
// tombstone at the lease's record key of each layout, on Redis's clock,
// expiring with the lease time; the acquire of its id that comes after
// takes nothing and writes nothing, and an abandon of a lease taken
// deletes its record and frees its slot.
func TestAbandonTombstoneKey(t *testing.T) {
	ctx := context.Background()
	p := &sluice.Policy{Name: "ab", Rules: []sluice.Rule{
		{Name: "in-flight", By: []string{"user"}, Concurrency: 2, Lease: 30 * time.Second},
	}}
	attrs := map[string]string{"user": "ann"}
	c := admin(t)
	for _, layout := range []struct {
		layout redisstore.Layout
		record string // the record key after the prefix, less the token
	}{{redisstore.Layout2, ":{ab,ann}2e:"}, {redisstore.Layout1, ":{ab,ann}:ab:@lease:"}} {
		prefix := newPrefix()
		s := openRueidis(t, redisstore.Config{Prefix: prefix, Layout: layout.layout})
		const id = "lease-abandoned-first"
		sum := sha256.Sum256([]byte(id))
		key := prefix + layout.record + hex.EncodeToString(sum[:16])
		finish := func(id string) bool {
			t.Helper()
			req := request(t, p, attrs, 1)
			st, err := s.Finish(ctx, &store.FinishRequest{Policy: req.Policy, Shared: req.Shared, Checks: req.Checks,
				ID: id, Op: store.LeaseAbandon, TTL: 30 * time.Second})
			if err != nil {
				t.Fatalf("layout %d: abandon: %v", layout.layout, err)
			}
			return st.Held
		}
		if finish(id) {
			t.Errorf("layout %d: an abandon of a lease never taken reports it held", layout.layout)
		}
		keys, err := ttls(ctx, c, prefix)
		if err != nil {
			t.Fatal(err)
		}
		if ttl, ok := keys[key]; len(keys) != 1 || !ok || ttl <= 29*time.Second || ttl > 30*time.Second+time.Millisecond {
			t.Fatalf("layout %d: keys after the abandon %v, want the tombstone %s alone, expiring within 30s (and the 1ms of PEXPIREAT)", layout.layout, keys, key)
		}
		req := request(t, p, attrs, 1)
		grant := store.LeaseGrant{ID: id, TTL: 30 * time.Second}
		if err := s.Acquire(ctx, req, &grant); err != nil {
			t.Fatal(err)
		}
		if !grant.Expires.IsZero() || req.Results[0] != (store.Result{Cause: store.CauseConcurrency}) {
			t.Errorf("layout %d: the acquire after its abandon: expires %v, result %+v; want denied, nothing taken", layout.layout, grant.Expires, req.Results[0])
		}
		after, err := ttls(ctx, c, prefix)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(slices.Sorted(maps.Keys(after)), []string{key}) {
			t.Errorf("layout %d: keys after the late acquire %v, want the tombstone alone", layout.layout, after)
		}
		// A lease taken, then abandoned: its record and slot are gone.
		lim := direct(s)
		x, d, err := lim.Acquire(ctx, p, attrs, 1)
		if err != nil || !d.Allowed {
			t.Fatalf("layout %d: acquire: %+v, %v", layout.layout, d, err)
		}
		if !finish(x.ID()) {
			t.Errorf("layout %d: an abandon of a lease taken reports it not held", layout.layout)
		}
		if d, err := lim.Peek(ctx, p, attrs, 1); err != nil || d.Limits()[0].Used != 1 {
			t.Errorf("layout %d: after the abandon: %+v, %v; want no lease alive", layout.layout, d, err)
		}
		if keys, err := ttls(ctx, c, prefix); err != nil || len(keys) != 1 {
			t.Errorf("layout %d: keys after the abandon of a lease taken: %v, %v; want the first tombstone alone", layout.layout, keys, err)
		}
	}
}

// TestNotLeasableQueuesNothing: a lease a store keeping each rule's windows
// in a slot of its own cannot hold (its rules go by different attributes)
// fails with store.ErrNotLeasable before anything is sent, on every
// Acquire, and the Limiter queues nothing to abandon for it.
func TestNotLeasableQueuesNothing(t *testing.T) {
	s := openRueidis(t, redisstore.Config{Prefix: newPrefix(), Slots: redisstore.SlotsPerRule})
	lim := sluice.NewLimiter(s, sluice.Config{OnError: sluice.Deny})
	p := &sluice.Policy{Name: "split", Rules: []sluice.Rule{
		{Name: "per-user", By: []string{"user"}, Limit: 100, Window: time.Minute},
		{Name: "per-model", By: []string{"model"}, Concurrency: 2, Lease: 30 * time.Second},
	}}
	for range 3 {
		x, d, err := lim.Acquire(context.Background(), p, map[string]string{"user": "ann", "model": "m1"}, 1)
		if !errors.Is(err, store.ErrNotLeasable) || x != nil || d.Allowed || !d.Degraded {
			t.Fatalf("acquire across slots: %+v, lease %v, %v; want a degraded denial with ErrNotLeasable", d, x, err)
		}
	}
	if st := lim.AbandonStats(); st != (sluice.AbandonStats{}) {
		t.Errorf("abandon stats after acquires the store could not send: %+v, want none queued", st)
	}
}
