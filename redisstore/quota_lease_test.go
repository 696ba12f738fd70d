package redisstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/store"
)

// TestQuotasLeaseAcrossSlots: with a slot group per rule (SlotsPerRule on
// the package's server, and the Cluster's default), a credits rule that
// covers a calendar quota of another slot group is refused by Acquire, for
// a settle-after lease and a concurrency lease alike, with the error Decide
// gives (which names the rules and the fix), matching store.ErrNotLeasable;
// Finish of such a lease says the same; and nothing is written. The same
// rules in one slot group are leased.
func TestQuotasLeaseAcrossSlots(t *testing.T) {
	loc := berlin(t)
	ctx := context.Background()
	for _, b := range quotaBackends[len(backends):] { // per-rule, cluster
		t.Run(b.name, func(t *testing.T) {
			prefix := newPrefix()
			s := b.open(t, redisstore.Config{Prefix: prefix, Clock: func() time.Time { return time.Date(2026, 6, 1, 12, 0, 0, 0, loc) }})
			cr := credits(loc, 4, store.Refill{})
			cr.Covers = 1
			split := cr
			split.Values = []string{"bob"} // another hash tag than the quota's ("ann")
			slots := store.Check{Rule: "slots", Values: []string{"ann"}, Limit: 2, Window: time.Minute, Algorithm: store.Concurrency, Cost: 1}
			for _, tc := range []struct {
				name   string
				checks []store.Check
			}{
				{"settle-after", []store.Check{monthly(loc, 10, 0), split}},
				{"concurrency", []store.Check{monthly(loc, 10, 0), split, slots}},
			} {
				dreq := &store.Request{Policy: "api", Checks: tc.checks[:2]}
				want := s.Decide(ctx, dreq)
				if want == nil {
					t.Fatalf("%s: Decide of covers across slot groups: no error", tc.name)
				}
				req := &store.Request{Policy: "api", Checks: append([]store.Check(nil), tc.checks...)}
				grant := &store.LeaseGrant{ID: "job-" + tc.name, TTL: time.Minute}
				err := s.Acquire(ctx, req, grant)
				if err == nil || err.Error() != want.Error() || !errors.Is(err, store.ErrNotLeasable) || !grant.Expires.IsZero() {
					t.Errorf("%s: Acquire: %v, expires %v;\nwant Decide's error, matching ErrNotLeasable, no lease:\n%v", tc.name, err, grant.Expires, want)
				}
				fin := &store.FinishRequest{Policy: "api", Checks: req.Checks, ID: grant.ID, Op: store.LeaseRelease}
				if st, err := s.Finish(ctx, fin); err == nil || err.Error() != want.Error() || st.Held {
					t.Errorf("%s: Finish: %+v, %v; want Decide's error", tc.name, st, err)
				}
			}
			if keys := keysUnder(t, b, prefix); len(keys) != 0 {
				t.Errorf("keys after the refusals: %s; want none", keyNames(keys))
			}

			// The quota and its credits in one slot group: leased, the
			// quota counting the estimate; released, nothing left held.
			req := &store.Request{Policy: "api", Checks: []store.Check{monthly(loc, 10, 0), cr, slots}}
			grant := &store.LeaseGrant{ID: "job-one-slot", TTL: time.Minute}
			if err := s.Acquire(ctx, req, grant); err != nil || grant.Expires.IsZero() || req.Results[0].Used != 1 {
				t.Fatalf("one slot group: %+v, expires %v, %v; want a lease, the quota at 1", req.Results, grant.Expires, err)
			}
			fin := &store.FinishRequest{Policy: "api", Checks: req.Checks, ID: grant.ID, Op: store.LeaseRelease}
			if st, err := s.Finish(ctx, fin); err != nil || !st.Held {
				t.Fatalf("release: %+v, %v; want it held", st, err)
			}
		})
	}
}

// keysUnder returns the keys under prefix on backend b's server (the
// package's, or every master of the package's Cluster) with their TTLs.
func keysUnder(t *testing.T, b backend, prefix string) map[string]time.Duration {
	t.Helper()
	var (
		keys map[string]time.Duration
		err  error
	)
	if b.name == "cluster" {
		keys, err = clusterTTLs(sharedCluster(t), prefix)
	} else {
		keys, err = ttls(context.Background(), admin(t), prefix)
	}
	if err != nil {
		t.Fatal(err)
	}
	return keys
}
