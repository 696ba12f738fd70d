package sluice_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/storetest"
)

// TestLimiterSlices: Slices shows each live slice of a budgeted window with
// its size, its use and the time left, and none once it ended or was given
// back.
func TestLimiterSlices(t *testing.T) {
	clock := storetest.NewClock(storetest.T0)
	s := memstore.New(memstore.Config{Clock: clock.Now})
	lim := sluice.NewLimiter(s, sluice.Config{Clock: clock})
	p := &sluice.Policy{Name: "api", Rules: []sluice.Rule{{Name: "tenant", By: []string{"tenant"}, Limit: 1000, Window: time.Minute, Budget: 8 * time.Second}}}
	ctx := context.Background()
	if got := lim.Slices(); len(got) != 0 {
		t.Fatalf("Slices before any decision = %+v", got)
	}
	// Tenant b's first decision leases a slice, a's first leases one and
	// its second takes from it.
	var aLocal bool
	for i, tenant := range []string{"b", "a", "a"} {
		d, err := lim.Allow(ctx, p, map[string]string{"tenant": tenant})
		if err != nil || !d.Allowed || d.Local != (i == 2) {
			t.Fatalf("Allow %s = %+v, %v; want allowed, from the slice the third time", tenant, d, err)
		}
		aLocal = d.Local
	}
	got := lim.Slices()
	if len(got) != 2 || !slices.Equal(got[0].Values, []string{"a"}) || !slices.Equal(got[1].Values, []string{"b"}) || !aLocal {
		t.Fatalf("Slices = %+v, want one of tenant a's window, then b's", got)
	}
	for i, sl := range got {
		// The Limiter stops 1/32 of the budget before the store's end.
		if sl.Policy != "api" || sl.Rule != "tenant" || sl.Granted < 1 || sl.Used != int64(1-i) || sl.Left != 8*time.Second-8*time.Second/32 {
			t.Errorf("slice %+v, want %d used, 7.75s left", sl, 1-i)
		}
	}
	clock.Advance(time.Second)
	if got := lim.Slices(); len(got) != 2 || got[0].Left != 6750*time.Millisecond {
		t.Errorf("Slices a second later = %+v, want 6.75s left", got)
	}
	clock.Advance(7 * time.Second)
	if got := lim.Slices(); len(got) != 0 {
		t.Errorf("Slices after the slices' end = %+v, want none", got)
	}
	if _, err := lim.Allow(ctx, p, map[string]string{"tenant": "a"}); err != nil {
		t.Fatal(err)
	}
	if err := lim.Close(); err != nil {
		t.Fatal(err)
	}
	if got := lim.Slices(); len(got) != 0 {
		t.Errorf("Slices after Close = %+v, want none", got)
	}
}
