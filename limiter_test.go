package sluice_test

import (
	"context"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/memstore"
)

// TestAllowAllocations checks what Limiter.Allow allocates for a warm key
// of the memory store: nothing but a block of rule statuses shared by the
// decisions after it, so at most one allocation per 15 decisions of one
// rule. A GCRA rule keeps one time per key, so the store allocates
// nothing either.
func TestAllowAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop scratches: allocations are not counted")
	}
	lim := sluice.NewLimiter(memstore.New(memstore.Config{}), sluice.Config{})
	p := &sluice.Policy{Name: "api", Rules: []sluice.Rule{
		{Name: "per-user", Limit: 1_000_000, Window: time.Second, By: []string{"user"}, Algorithm: sluice.GCRA},
	}}
	ctx := context.Background()
	attrs := map[string]string{"user": "ann"}
	fifteen := func() {
		for range 15 {
			if d, err := lim.Allow(ctx, p, attrs); err != nil || !d.Allowed || len(d.Limits()) != 1 {
				t.Fatalf("Allow = %+v, %v; want allowed with one status", d, err)
			}
		}
	}
	fifteen() // the key, the compiled policy, a scratch and a block
	if got := testing.AllocsPerRun(100, fifteen); got > 1 {
		t.Errorf("%v allocations per 15 decisions, want at most 1 (a block of statuses)", got)
	}
}
