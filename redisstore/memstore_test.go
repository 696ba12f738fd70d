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
	"github.com/sluicerate/sluice/storetest"
)

// TestMatchesMemstore drives the Redis store and the memory store, the
// reference, through the same random requests on one manual clock and
// requires identical decisions. Clock steps are multiples of 10s so that
// entries often sit exactly on a window's edge or a gap's end.
func TestMatchesMemstore(t *testing.T) {
	policies := []*sluice.Policy{
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
	}
	steps := []time.Duration{0, 0, 0, time.Microsecond, 10 * time.Second, 10 * time.Second, 20 * time.Second, 30 * time.Second, time.Minute - time.Microsecond}
	modes := []sluice.Mode{sluice.ModeAllow, sluice.ModeAllow, sluice.ModeAllow, sluice.ModePeek, sluice.ModeRecord}

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
					p := policies[rng.IntN(len(policies))]
					maxCost := p.Rules[0].Limit
					for _, r := range p.Rules {
						maxCost = min(maxCost, r.Limit)
					}
					req := &sluice.Request{
						Policy: p,
						Attributes: map[string]string{
							"category": fmt.Sprintf("c%d", rng.IntN(3)),
							"user":     fmt.Sprintf("u%d", rng.IntN(2)),
						},
						Cost: 1 + rng.Int64N(maxCost),
						Mode: modes[rng.IntN(len(modes))],
					}
					want, err := ms.Decide(ctx, req)
					if err != nil {
						t.Fatal(err)
					}
					got, err := rs.Decide(ctx, req)
					if err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(got, want) {
						t.Fatalf("step %d at T0+%v: %s %v cost %d %v:\nredis  %+v\nmemory %+v",
							i, clock.Now().Sub(storetest.T0), p.Name, req.Attributes, req.Cost, req.Mode, got, want)
					}
				}
			})
		}
	}
}
