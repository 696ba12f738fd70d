package sluice

import (
	"testing"
	"time"

	"github.com/sluicerate/sluice/store"
)

// TestUntakeAfterTheLeaseEnded holds a request that took a unit from a
// slice while its other rule was at the store: another request's ask ends
// that lease (returning it with the unit counted as used) and a new lease
// is installed before the denial gives the unit back. The unit must stay
// with the ended lease: given to the slice, it would be one the store
// counts in no lease.
func TestUntakeAfterTheLeaseEnded(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := store.Check{Rule: "global", Limit: 1000, Window: time.Minute, Budget: time.Second, Cost: 1}
	var b budgets
	sl := b.get(appendBudgetKey(nil, "p", &c), "p", nil, &c, t0)
	grant := func(n int64) {
		t.Helper()
		sl.leasing = true
		sl.install(&b, &c, &store.Grant{Granted: n, Life: time.Second, Result: store.Result{Remaining: 1000 - n}}, "id", t0, true)
	}
	left := func() int64 {
		sl.mu.Lock()
		defer sl.mu.Unlock()
		return sl.granted - sl.used
	}
	var r store.Result

	grant(1)
	gen, ok := sl.take(&c, t0, &r)
	if !ok {
		t.Fatal("take from a fresh slice of 1 failed")
	}
	want, ret, has, _ := sl.ask(&b, &c, t0)
	if want == 0 || !has || ret.Used != 1 {
		t.Fatalf("ask of an empty slice: want %d, return %v (used %d); want an ask and a return with used 1", want, has, ret.Used)
	}
	sl.untake(1, gen)
	if got := left(); got != 0 {
		t.Fatalf("after the ended lease's untake, %d units left; want 0 (no lease)", got)
	}
	if _, ok := sl.take(&c, t0, &r); ok {
		t.Fatal("a take succeeded with no lease")
	}

	grant(5)
	gen2, _ := sl.take(&c, t0, &r)
	sl.untake(1, gen) // the first lease's, late
	if got := left(); got != 4 {
		t.Fatalf("a late untake of an ended lease changed the new one: %d left, want 4", got)
	}
	sl.untake(1, gen2)
	if got := left(); got != 5 {
		t.Fatalf("untake of the live lease: %d left, want 5", got)
	}
}
