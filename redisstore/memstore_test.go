package redisstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/store"
	"github.com/sluicerate/sluice/storetest"
)

// TestMatchesMemstore drives the Redis store and the memory store, the
// reference, through the same random requests on one manual clock and
// requires identical decisions. Clock steps are multiples of 10s so that
// entries often sit exactly on a window's edge or a gap's end.
func TestMatchesMemstore(t *testing.T) {
	policies := differentialPolicies()
	steps := []time.Duration{0, 0, 0, time.Microsecond, 10 * time.Second, 10 * time.Second, 20 * time.Second, 30 * time.Second, time.Minute - time.Microsecond}
	modes := requestModes

	for _, b := range backends {
		for seed := range uint64(4) {
			t.Run(fmt.Sprintf("%s/seed%d", b.name, seed), func(t *testing.T) {
				t.Parallel()
				ctx := context.Background()
				clock := storetest.NewClock(storetest.T0)
				rs := b.open(t, redisstore.Config{Prefix: newPrefix(), Clock: clock.Now})
				ms := memstore.New(memstore.Config{Clock: clock.Now})
				defer ms.Close()
				rng := rand.New(rand.NewPCG(seed, 42))
				for i := range 400 {
					clock.Advance(steps[rng.IntN(len(steps))])
					req := randomRequest(t, rng, policies, modes)
					mreq := *req
					mreq.Results = nil
					if err := ms.Decide(ctx, &mreq); err != nil {
						t.Fatal(err)
					}
					if err := rs.Decide(ctx, req); err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(req.Results, mreq.Results) {
						t.Fatalf("step %d at T0+%v: %s %+v %v dry %v:\nredis  %+v\nmemory %+v",
							i, clock.Now().Sub(storetest.T0), req.Policy, req.Checks, req.Mode, req.DryRun, req.Results, mreq.Results)
					}
				}
			})
		}
	}
}

// TestBatchMatchesMemstore sends random requests in batches of up to 16,
// each batch at one instant, and requires the decisions the memory store
// makes of the same requests one after the other at that instant: a batch
// that reads its own writes, grows entries in its state and flushes them
// decides as the requests would alone.
func TestBatchMatchesMemstore(t *testing.T) {
	policies := differentialPolicies()
	steps := []time.Duration{time.Microsecond, 10 * time.Second, 10 * time.Second, 20 * time.Second, 30 * time.Second, time.Minute - time.Microsecond}
	modes := requestModes
	for seed := range uint64(4) {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			clock := storetest.NewClock(storetest.T0)
			rs := openRueidis(t, redisstore.Config{Prefix: newPrefix(), Clock: clock.Now})
			ms := memstore.New(memstore.Config{Clock: clock.Now})
			defer ms.Close()
			c := admin(t)
			rng := rand.New(rand.NewPCG(seed, 7))
			for round := range 60 {
				clock.Advance(steps[rng.IntN(len(steps))])
				now := clock.Now().UnixMicro()
				reqs := make([]*store.Request, 1+rng.IntN(16))
				keys := make([][]string, len(reqs))
				for i := range reqs {
					reqs[i] = randomRequest(t, rng, policies, modes)
					keys[i] = rs.Keys(reqs[i])
				}
				errs := redisstore.DecideBatch(c, keys, reqs, now)
				for i, req := range reqs {
					mreq := *req
					mreq.Results = nil
					if err := ms.Decide(ctx, &mreq); err != nil {
						t.Fatal(err)
					}
					if errs[i] != nil {
						t.Fatalf("round %d, request %d: %v", round, i+1, errs[i])
					}
					if !reflect.DeepEqual(req.Results, mreq.Results) {
						t.Fatalf("round %d at T0+%v, request %d of %d: %s %+v %v dry %v:\nredis  %+v\nmemory %+v",
							round, clock.Now().Sub(storetest.T0), i+1, len(reqs), req.Policy, req.Checks, req.Mode, req.DryRun, req.Results, mreq.Results)
					}
				}
			}
		})
	}
}

// differentialPolicies are the policies the differential tests draw from:
// a hierarchy, gaps longer and shorter than windows, and costs.
func differentialPolicies() []*sluice.Policy {
	return []*sluice.Policy{
		{Name: "notify", Rules: []sluice.Rule{
			{Name: "global", Limit: 7, Window: time.Minute},
			{Name: "category", Limit: 3, Window: 30 * time.Second, By: []string{"category"}},
		}},
		{Name: "push", Rules: []sluice.Rule{
			{Name: "per-user", Limit: 4, Window: 40 * time.Second, MinGap: 10 * time.Second, By: []string{"user"}},
			{Name: "gap-longer", Limit: 6, Window: 20 * time.Second, MinGap: 30 * time.Second, By: []string{"user", "category"}},
			{Name: "global", Limit: 9, Window: 2 * time.Minute},
		}},
		{Name: "bytes", Rules: []sluice.Rule{{Name: "r", Limit: 10, Window: time.Minute, By: []string{"user"}}}},
		{Name: "blocked", Rules: []sluice.Rule{
			{Name: "per-user", Limit: 5, Window: time.Minute, By: []string{"user"}},
			{Name: "u1-blocked", Limit: 3, Window: time.Minute, By: []string{"user"},
				Overrides: []sluice.Override{{Match: map[string]string{"user": "u1"}, Limit: 0}}},
		}},
	}
}

// requestMode is a request's Mode and DryRun.
type requestMode struct {
	mode store.Mode
	dry  bool
}

// requestModes are the modes random requests are drawn from: mostly Allow,
// and peeks and records of both kinds.
var requestModes = []requestMode{{store.ModeAllow, false}, {store.ModeAllow, false}, {store.ModeAllow, false},
	{store.ModeAllow, true}, {store.ModeRecord, false}, {store.ModeRecord, true}}

// randomRequest draws a request of one of policies, with a cost that fits
// every rule's limit, some of its checks in shadow mode.
func randomRequest(t testing.TB, rng *rand.Rand, policies []*sluice.Policy, modes []requestMode) *store.Request {
	p := policies[rng.IntN(len(policies))]
	maxCost := int64(1 << 62)
	for _, r := range p.Rules {
		if r.Limit > 0 {
			maxCost = min(maxCost, r.Limit)
		}
	}
	attrs := map[string]string{
		"category": fmt.Sprintf("c%d", rng.IntN(3)),
		"user":     fmt.Sprintf("u%d", rng.IntN(2)),
	}
	req := request(t, p, attrs, 1+rng.Int64N(maxCost))
	for i := range req.Checks {
		req.Checks[i].Shadow = rng.IntN(8) == 0
	}
	m := modes[rng.IntN(len(modes))]
	req.Mode, req.DryRun = m.mode, m.dry
	return req
}
