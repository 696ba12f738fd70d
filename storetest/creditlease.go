package storetest

import (
	"time"

	"github.com/sluicerate/sluice/store"
)

// Credits under leases: a lease draws its estimate from a balance at the
// Acquire; a settle applies the difference with the real cost, a release
// gives the draw back, as long as the balance the draw came from is the
// one the key still has. A refill To in between sets a new balance that
// owes nothing to the period before: the draw, and what a settle or a
// release would change of it, is then moot. A refill Add carries the
// balance over, so a draw before it counts after it.

var creditLeaseCases = []testCase{
	{"CreditsLease", credited(func(e *env) {
		// A lease draws its estimate at the Acquire; a settle applies the
		// difference, even below 0 (a settle records work that happened);
		// a release gives the estimate back.
		e.leaser()
		c := balance("credits", "lease", 10, store.Calendar{}, store.Refill{})
		e.clock.Set(time.Date(2027, 4, 2, 8, 0, 0, 0, time.UTC))
		ok, res := e.acquireChecks("acquire 6", "cr", "a", checks(costing(c, 6)))
		if !ok || res[0] != has(10, 4) {
			e.t.Fatalf("acquire 6: granted %v, %+v; want granted, %+v", ok, res, has(10, 4))
		}
		e.finishChecks("settle 13", "cr", "a", checks(costing(c, 6)), store.LeaseSettle, 13)
		e.get("after settle 13", "cr", c, -3)
		e.allowChecks("1 of -3", "cr", checks(c), false, short(10, -3, store.MaxRetry))
		e.credit("set 10", "cr", c, store.CreditSet, 10, "", 10, true)
		if ok, _ := e.acquireChecks("acquire 4", "cr", "b", checks(costing(c, 4))); !ok {
			e.t.Fatal("acquire 4 of 10: not granted")
		}
		e.get("held", "cr", c, 6)
		e.finishChecks("release", "cr", "b", checks(costing(c, 4)), store.LeaseRelease, 0)
		e.get("released", "cr", c, 10)
		if ok, res := e.acquireChecks("acquire 11", "cr", "c", checks(costing(c, 11))); ok || res[0] != short(10, 10, store.MaxRetry) {
			e.t.Errorf("acquire 11 of 10: granted %v, %+v; want denied, %+v", ok, res, short(10, 10, store.MaxRetry))
		}
		if ok, _ := e.acquireChecks("acquire 5", "cr", "d", checks(costing(c, 5))); !ok {
			e.t.Fatal("acquire 5 of 10: not granted")
		}
		e.finishChecks("settle 2", "cr", "d", checks(costing(c, 5)), store.LeaseSettle, 2)
		e.get("settled lower", "cr", c, 8)
	})},

	{"CreditsLeaseAcrossRefillTo", credited(func(e *env) {
		// A balance refilled to 10 each day (UTC). A lease taken on one
		// day and ended on a later one changes nothing of the new day's
		// balance: a release or an abandon gives nothing back (the
		// refill already set 10), a settle neither refunds nor draws
		// more (a settle a moment before midnight would have been undone
		// by the refill too). Units added above 10 on the new day stay.
		// Ended 1µs before midnight, the same lease acts in full.
		e.leaser()
		c := balance("credits", "to", 10, store.Calendar{Period: store.Day}, store.Refill{To: 10})
		day := func(d int) time.Time { return time.Date(2027, 4, d, 0, 0, 0, 0, time.UTC) }
		acquire := func(id string, at time.Time, cost, left int64) {
			e.t.Helper()
			e.clock.Set(at)
			if ok, res := e.acquireChecks("acquire "+id, "cr", id, checks(costing(c, cost))); !ok || res[0] != has(10, left) {
				e.t.Fatalf("acquire %s at %v: granted %v, %+v; want granted, %+v", id, at, ok, res, has(10, left))
			}
		}
		end := func(id string, at time.Time, op store.LeaseOp, est, cost, bal int64) {
			e.t.Helper()
			e.clock.Set(at)
			e.finishChecks(id, "cr", id, checks(costing(c, est)), op, cost)
			e.get("after "+id, "cr", c, bal)
		}
		acquire("a", day(2).Add(20*time.Hour), 6, 4)
		end("a", day(3).Add(time.Hour), store.LeaseRelease, 6, 0, 10)

		acquire("b", day(3).Add(12*time.Hour), 4, 6)
		e.clock.Set(day(4).Add(time.Hour))
		e.credit("add 50 on the 4th", "cr", c, store.CreditAdd, 50, "order-1", 60, true)
		end("b", day(4).Add(2*time.Hour), store.LeaseRelease, 4, 0, 60)

		acquire("c", day(4).Add(3*time.Hour), 5, 55)
		end("c", day(5).Add(time.Hour), store.LeaseSettle, 5, 2, 10)
		acquire("d", day(5).Add(2*time.Hour), 3, 7)
		end("d", day(6).Add(time.Hour), store.LeaseSettle, 3, 9, 10)
		acquire("e", day(6).Add(2*time.Hour), 3, 7)
		end("e", day(7), store.LeaseAbandon, 3, 0, 10)

		acquire("f", day(7).Add(2*time.Hour), 3, 7)
		end("f", day(8).Add(-time.Microsecond), store.LeaseRelease, 3, 0, 10)
		acquire("g", day(8).Add(time.Hour), 4, 6)
		end("g", day(9).Add(-time.Microsecond), store.LeaseSettle, 4, 7, 3)
		acquire("h", day(9).Add(-2*time.Hour), 3, 0)
		end("h", day(9).Add(-time.Microsecond), store.LeaseSettle, 3, 12, -9)
		e.clock.Set(day(9)) // the refill sets 10 whatever was settled before it
		e.get("the 9th", "cr", c, 10)
	})},

	{"CreditsLeaseAcrossRefillAdd", credited(func(e *env) {
		// A balance that gains 5 a day (UTC) carries over: a lease taken
		// on one day and ended on a later one gives back, or draws, the
		// difference on top of the refills, as on the same day.
		e.leaser()
		c := balance("credits", "add", 5, store.Calendar{Period: store.Day}, store.Refill{Add: 5})
		day := func(d int) time.Time { return time.Date(2027, 4, d, 0, 0, 0, 0, time.UTC) }
		e.clock.Set(day(2).Add(20 * time.Hour))
		if ok, res := e.acquireChecks("acquire a", "cr", "a", checks(costing(c, 4))); !ok || res[0] != has(5, 1) {
			e.t.Fatalf("acquire a: granted %v, %+v; want granted, %+v", ok, res, has(5, 1))
		}
		e.clock.Set(day(3).Add(time.Hour))
		e.get("the 3rd", "cr", c, 6)
		e.finishChecks("release a", "cr", "a", checks(costing(c, 4)), store.LeaseRelease, 0)
		e.get("after release a", "cr", c, 10)
		if ok, _ := e.acquireChecks("acquire b", "cr", "b", checks(costing(c, 4))); !ok {
			e.t.Fatal("acquire b: not granted")
		}
		e.clock.Set(day(4).Add(30 * time.Minute))
		e.get("the 4th", "cr", c, 11)
		e.finishChecks("settle b at 9", "cr", "b", checks(costing(c, 4)), store.LeaseSettle, 9)
		e.get("after settle b", "cr", c, 6)
	})},
}
