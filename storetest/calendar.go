package storetest

import (
	"fmt"
	"time"

	"github.com/sluicerate/sluice/store"
)

// Calendar cases: store.Periodic checks, quotas per calendar period in a
// time zone, decided by the store directly (a store.Request per decision),
// on stores that keep their history (store.Historian); the others skip
// them. Every figure is exact on the manual clock: a period's bounds are
// local midnights, across daylight saving changes and month lengths.

// calendared wraps a calendar case: it skips stores that keep no history
// of calendar quotas, as a store that does not decide them keeps none.
func calendared(run func(e *env)) func(e *env) {
	return func(e *env) {
		if _, ok := e.target.Store.(store.Historian); !ok {
			e.t.Skipf("store %T keeps no calendar quotas (store.Historian)", e.target.Store)
		}
		run(e)
	}
}

// zone loads the IANA time zone name, failing the case when the system
// has no zone database.
func (e *env) zone(name string) *time.Location {
	e.t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		e.t.Fatalf("time zone %s: %v", name, err)
	}
	return loc
}

// quota is a Periodic check of rule with key value, at most limit per
// period of cal, keeping history periods' totals, of cost 1.
func quota(rule, value string, limit int64, cal store.Calendar, history int) store.Check {
	return store.Check{Rule: rule, Values: []string{value}, Limit: limit, Window: store.MaxPeriodLength,
		Algorithm: store.Periodic, Calendar: cal, History: history, Cost: 1}
}

// costing returns c with cost.
func costing(c store.Check, cost int64) store.Check {
	c.Cost = cost
	return c
}

// shadowed returns c as a Shadow check.
func shadowed(c store.Check) store.Check {
	c.Shadow = true
	return c
}

// checks is a request's checks, in order.
func checks(c ...store.Check) []store.Check { return c }

// admitted reports whether a decision with results admits its request:
// every check fits, is Shadow, or is a Periodic check whose covering
// Credits check fits (store.Check.Covers).
func admitted(cs []store.Check, results []store.Result) bool {
	for i := range cs {
		if !results[i].Fits && !cs[i].Shadow && !covered(cs, results, i) {
			return false
		}
	}
	return true
}

// covered reports whether a Credits check that fits covers check k.
func covered(cs []store.Check, results []store.Result, k int) bool {
	for i := range cs {
		if cs[i].Algorithm == store.Credits && cs[i].Covers == k+1 && results[i].Fits {
			return true
		}
	}
	return false
}

// decideChecks decides the checks of policy in mode (a dry run when dry) by the
// store, checks whether the request is admitted, and compares each
// result with want's, RetryAfter only when the request is denied (a
// store may leave it set on an admitted one). It returns the results.
func (e *env) decideChecks(what, policy string, mode store.Mode, dry bool, cs []store.Check, allowed bool, want ...store.Result) []store.Result {
	e.t.Helper()
	got := e.decideRaw(what, policy, mode, dry, cs)
	if a := admitted(cs, got); a != allowed {
		e.t.Errorf("%s at %v: admitted %v, want %v; results %+v", what, e.clock.Now(), a, allowed, got)
	}
	for i := range want {
		g := got[i]
		if allowed {
			g.RetryAfter = want[i].RetryAfter
		}
		if g != want[i] {
			e.t.Errorf("%s at %v: check %q (%v):\n got %+v\nwant %+v", what, e.clock.Now(), cs[i].Rule, cs[i].Algorithm, g, want[i])
		}
	}
	return got
}

// decideRaw decides the checks of policy in mode by the store and returns
// the results, failing the case on error.
func (e *env) decideRaw(what, policy string, mode store.Mode, dry bool, cs []store.Check) []store.Result {
	e.t.Helper()
	req := store.Request{Policy: policy, Checks: append([]store.Check(nil), cs...), Mode: mode, DryRun: dry}
	if err := e.target.Store.Decide(e.ctx, &req); err != nil {
		e.t.Fatalf("%s at %v: Decide: %v", what, e.clock.Now(), err)
	}
	if len(req.Results) != len(cs) {
		e.t.Fatalf("%s at %v: %d results for %d checks", what, e.clock.Now(), len(req.Results), len(cs))
	}
	return req.Results
}

// allowChecks decides cs in store.ModeAllow, recording them when the
// request is admitted.
func (e *env) allowChecks(what, policy string, cs []store.Check, allowed bool, want ...store.Result) []store.Result {
	e.t.Helper()
	return e.decideChecks(what, policy, store.ModeAllow, false, cs, allowed, want...)
}

// state returns what a dry run of each check alone, of cost 1, reports:
// the state of the windows, for comparing before and after a decision
// that must change nothing.
func (e *env) state(policy string, cs []store.Check) []store.Result {
	e.t.Helper()
	out := make([]store.Result, len(cs))
	for i, c := range cs {
		c.Cost, c.Covers, c.Shadow = 1, 0, false
		out[i] = e.decideRaw("state", policy, store.ModeAllow, true, checks(c))[0]
	}
	return out
}

// unchanged checks that the windows of cs report before.
func (e *env) unchanged(what, policy string, cs []store.Check, before []store.Result) {
	e.t.Helper()
	after := e.state(policy, cs)
	for i := range cs {
		if after[i] != before[i] {
			e.t.Errorf("%s at %v: check %q changed:\n got %+v\nwant %+v", what, e.clock.Now(), cs[i].Rule, after[i], before[i])
		}
	}
}

// fits is the result of a check that fits, leaving used counted of limit,
// with resetAfter.
func fits(limit, used int64, resetAfter time.Duration) store.Result {
	return store.Result{Fits: true, Used: used, Remaining: max(0, limit-used), ResetAfter: resetAfter}
}

// full is the result of a check denied for its limit.
func full(limit, used int64, retry, resetAfter time.Duration) store.Result {
	return store.Result{Cause: store.CauseLimit, Used: used, Remaining: max(0, limit-used), RetryAfter: retry, ResetAfter: resetAfter}
}

// leaser returns the store's store.Leaser, skipping the case when it has
// none.
func (e *env) leaser() store.Leaser {
	e.t.Helper()
	lr, ok := e.target.Store.(store.Leaser)
	if !ok {
		e.t.Skipf("store %T keeps no leases", e.target.Store)
	}
	return lr
}

// acquireChecks takes the lease id of cs (cost each check's Cost) and
// reports whether it was granted, with the results.
func (e *env) acquireChecks(what, policy, id string, cs []store.Check) (bool, []store.Result) {
	e.t.Helper()
	req := store.Request{Policy: policy, Checks: append([]store.Check(nil), cs...)}
	grant := store.LeaseGrant{ID: id, TTL: 24 * time.Hour}
	if err := e.leaser().Acquire(e.ctx, &req, &grant); err != nil {
		e.t.Fatalf("%s at %v: Acquire: %v", what, e.clock.Now(), err)
	}
	return !grant.Expires.IsZero(), req.Results
}

// finishChecks ends the lease id of cs by op (a settle at cost) and checks
// that it was held.
func (e *env) finishChecks(what, policy, id string, cs []store.Check, op store.LeaseOp, cost int64) {
	e.t.Helper()
	st, err := e.leaser().Finish(e.ctx, &store.FinishRequest{Policy: policy, Checks: cs, ID: id, Op: op, Cost: cost, TTL: 24 * time.Hour})
	if err != nil {
		e.t.Fatalf("%s at %v: Finish: %v", what, e.clock.Now(), err)
	}
	if !st.Held {
		e.t.Errorf("%s at %v: lease %s not held", what, e.clock.Now(), id)
	}
}

var calendarCases = []testCase{
	{"CalendarMonthAcrossDST", calendared(func(e *env) {
		// A monthly quota of 3 in Berlin: March 2027 runs from midnight
		// CET of the 1st (23:00 UTC on 28 February) to midnight CEST of
		// 1 April (22:00 UTC on 31 March), 743 hours across the spring
		// change of 28 March.
		berlin := e.zone("Europe/Berlin")
		q := quota("month", "march", 3, store.Calendar{Period: store.Month, Location: berlin}, 0)
		end := time.Date(2027, 4, 1, 0, 0, 0, 0, berlin)
		e.clock.Set(time.Date(2027, 3, 1, 0, 0, 0, 0, berlin))
		for i := range int64(3) {
			left := end.Sub(e.clock.Now())
			e.allowChecks(fmt.Sprintf("#%d", i+1), "cal", checks(q), true, fits(3, i+1, left))
			e.clock.Advance(time.Hour)
		}
		left := end.Sub(e.clock.Now())
		e.allowChecks("#4", "cal", checks(q), false, full(3, 3, left, left))
		e.clock.Set(time.Date(2027, 3, 28, 12, 0, 0, 0, berlin)) // after the change
		left = end.Sub(e.clock.Now())
		e.allowChecks("after the change", "cal", checks(q), false, full(3, 3, left, left))
		// A µs before local midnight it is still March; at it, April.
		e.clock.Set(end.Add(-time.Microsecond))
		e.allowChecks("1µs before April", "cal", checks(q), false, full(3, 3, time.Microsecond, time.Microsecond))
		e.clock.Set(end)
		april := time.Date(2027, 5, 1, 0, 0, 0, 0, berlin).Sub(end)
		e.allowChecks("at April", "cal", checks(q), true, fits(3, 1, april))
		// Midnight UTC of 1 April, two hours later, is not a boundary.
		e.clock.Set(time.Date(2027, 4, 1, 0, 0, 0, 0, time.UTC))
		e.allowChecks("midnight UTC", "cal", checks(q), true, fits(3, 2, april-2*time.Hour))
	})},

	{"CalendarMonthFebruary", calendared(func(e *env) {
		// February in Berlin: 28 days in 2027, 29 in 2028. Its last day
		// counts in it to its last µs; the count resets at midnight of
		// 1 March.
		berlin := e.zone("Europe/Berlin")
		for _, y := range []int{2027, 2028} {
			last := 28
			if y == 2028 {
				last = 29
			}
			q := quota("month", fmt.Sprint("feb", y), 2, store.Calendar{Period: store.Month, Location: berlin}, 0)
			end := time.Date(y, 3, 1, 0, 0, 0, 0, berlin)
			e.clock.Set(time.Date(y, 2, 1, 0, 0, 0, 0, berlin))
			e.allowChecks(fmt.Sprint(y, " 1 Feb"), "cal", checks(q), true, fits(2, 1, end.Sub(e.clock.Now())))
			e.clock.Set(time.Date(y, 2, 28, 12, 0, 0, 0, berlin))
			e.allowChecks(fmt.Sprint(y, " 28 Feb"), "cal", checks(q), true, fits(2, 2, end.Sub(e.clock.Now())))
			if y == 2028 {
				e.clock.Set(time.Date(y, 2, 29, 0, 0, 0, 0, berlin))
				e.allowChecks("29 Feb 2028", "cal", checks(q), false, full(2, 2, 24*time.Hour, 24*time.Hour))
			}
			e.clock.Set(end.Add(-time.Microsecond))
			e.allowChecks(fmt.Sprintf("%d-02-%d, 1µs before March", y, last), "cal", checks(q), false,
				full(2, 2, time.Microsecond, time.Microsecond))
			e.clock.Set(end)
			march := 31*24*time.Hour - time.Hour // the spring change is in March
			e.allowChecks(fmt.Sprint(y, " 1 March"), "cal", checks(q), true, fits(2, 1, march))
		}
	})},

	{"CalendarDayAcrossDST", calendared(func(e *env) {
		// A daily quota of 2 in New York: 7 November 2027 lasts 25 hours
		// (from 04:00 UTC to 05:00 UTC of the 8th), 14 March 2027 23.
		ny := e.zone("America/New_York")
		day := store.Calendar{Period: store.Day, Location: ny}
		q := quota("day", "fall", 2, day, 0)
		start, end := time.Date(2027, 11, 7, 0, 0, 0, 0, ny), time.Date(2027, 11, 8, 0, 0, 0, 0, ny)
		if got := end.Sub(start); got != 25*time.Hour {
			e.t.Fatalf("the zone database gives 7 November 2027 in New York %v, want 25h", got)
		}
		e.clock.Set(start)
		e.allowChecks("#1", "cal", checks(q), true, fits(2, 1, 25*time.Hour))
		e.allowChecks("#2", "cal", checks(q), true, fits(2, 2, 25*time.Hour))
		e.allowChecks("#3", "cal", checks(q), false, full(2, 2, 25*time.Hour, 25*time.Hour))
		e.clock.Set(start.Add(24 * time.Hour)) // where a day of 24 hours would end
		e.allowChecks("24h later", "cal", checks(q), false, full(2, 2, time.Hour, time.Hour))
		e.clock.Set(end.Add(-time.Microsecond))
		e.allowChecks("1µs before midnight", "cal", checks(q), false, full(2, 2, time.Microsecond, time.Microsecond))
		e.clock.Set(end)
		e.allowChecks("at midnight", "cal", checks(q), true, fits(2, 1, 24*time.Hour))

		q = quota("day", "spring", 2, day, 0)
		e.clock.Set(time.Date(2027, 3, 14, 0, 0, 0, 0, ny))
		e.allowChecks("spring #1", "cal", checks(costing(q, 2)), true, fits(2, 2, 23*time.Hour))
		e.allowChecks("spring #2", "cal", checks(q), false, full(2, 2, 23*time.Hour, 23*time.Hour))
	})},

	{"CalendarClockBack", calendared(func(e *env) {
		// A daily quota of 1 counted at the first µs of 2 January; the
		// clock then set back a second, into 1 January: the count stays
		// in 2 January's period (nothing is lost), so the denial waits
		// for that period's end, and the figures are that period's.
		q := quota("day", "back", 1, store.Calendar{Period: store.Day}, 0)
		jan2 := time.Date(2027, 1, 2, 0, 0, 0, 0, time.UTC)
		e.clock.Set(jan2)
		e.allowChecks("2 January", "cal", checks(q), true, fits(1, 1, 24*time.Hour))
		e.clock.Set(jan2.Add(-time.Second))
		e.allowChecks("a second back", "cal", checks(q), false, full(1, 1, 24*time.Hour+time.Second, 24*time.Hour+time.Second))
		r := costing(q, 1)
		r.Rule = "day-record"
		e.clock.Set(jan2)
		e.decideRaw("2 January, recorded", "cal", store.ModeRecord, false, checks(r))
		e.clock.Set(jan2.Add(-time.Second))
		e.decideRaw("a second back, recorded", "cal", store.ModeRecord, false, checks(r))
		e.clock.Set(jan2.Add(time.Second)) // the records live until 3 January
		e.allowChecks("a second into 2 January", "cal", checks(r), false, full(1, 2, 24*time.Hour-time.Second, 24*time.Hour-time.Second))
	})},

	{"CalendarFigures", calendared(func(e *env) {
		// Used is the period's count, Remaining the limit less it,
		// ResetAfter the time to the period's end while the count is above
		// 0, RetryAfter of a denial the time to that end, to the µs, or
		// MaxRetry for a cost that no period admits.
		month := store.Calendar{Period: store.Month}
		q := quota("month", "figures", 5, month, 0)
		e.clock.Set(time.Date(2027, 6, 10, 7, 30, 0, 123456000, time.UTC))
		left := time.Date(2027, 7, 1, 0, 0, 0, 0, time.UTC).Sub(e.clock.Now())
		before := e.state("figures", checks(q))
		e.decideChecks("peek 2", "figures", store.ModeAllow, true, checks(costing(q, 2)), true, fits(5, 2, left))
		e.unchanged("after the peek", "figures", checks(q), before)
		e.allowChecks("cost 6 of 5", "figures", checks(costing(q, 6)), false,
			store.Result{Cause: store.CauseLimit, Remaining: 5, RetryAfter: store.MaxRetry})
		e.allowChecks("limit 0", "figures", checks(quota("zero", "figures", 0, month, 0)), false,
			store.Result{Cause: store.CauseLimit, RetryAfter: store.MaxRetry})
		e.allowChecks("cost 5", "figures", checks(costing(q, 5)), true, fits(5, 5, left))
		e.allowChecks("then 1", "figures", checks(q), false, full(5, 5, left, left))
		e.decideChecks("peek 1", "figures", store.ModeAllow, true, checks(q), false, full(5, 5, left, left))
		// Recorded past the limit (Limiter.Record): counted, and a denial
		// until the period ends.
		e.decideChecks("record 2", "figures", store.ModeRecord, false, checks(costing(q, 2)), false, full(5, 7, left, left))
		e.allowChecks("after the record", "figures", checks(q), false, full(5, 7, left, left))

		// A week from Monday in UTC: Sunday's last µs is in it.
		w := quota("week", "figures", 1, store.Calendar{Period: store.Week, WeekStart: time.Monday}, 0)
		mon := time.Date(2027, 6, 14, 0, 0, 0, 0, time.UTC) // a Monday
		e.clock.Set(mon.Add(-7 * 24 * time.Hour))
		e.allowChecks("week", "figures", checks(w), true, fits(1, 1, 7*24*time.Hour))
		e.clock.Set(mon.Add(-time.Microsecond))
		e.allowChecks("Sunday's last µs", "figures", checks(w), false, full(1, 1, time.Microsecond, time.Microsecond))
		e.clock.Set(mon)
		e.allowChecks("Monday", "figures", checks(w), true, fits(1, 1, 7*24*time.Hour))

		// A year in Tokyo: from local midnight of 1 January.
		tokyo := e.zone("Asia/Tokyo")
		y := quota("year", "figures", 1, store.Calendar{Period: store.Year, Location: tokyo}, 0)
		newYear := time.Date(2028, 1, 1, 0, 0, 0, 0, tokyo)
		e.clock.Set(newYear.Add(-time.Hour))
		e.allowChecks("year", "figures", checks(y), true, fits(1, 1, time.Hour))
		e.allowChecks("year full", "figures", checks(y), false, full(1, 1, time.Hour, time.Hour))
		e.clock.Set(newYear)
		e.allowChecks("new year", "figures", checks(y), true, fits(1, 1, 366*24*time.Hour))
	})},

	{"CalendarWithRateRules", calendared(func(e *env) {
		// A calendar quota decided with a rate rule (the log, then GCRA),
		// all or nothing: a request denied by the rate rule counts nothing
		// in the period, one denied by the quota records nothing in the
		// rate window; a dry run changes nothing; a Shadow quota does not
		// deny; ModeRecord records in both.
		for _, alg := range []store.Algorithm{store.Log, store.GCRA} {
			rate := store.Check{Rule: "rate", Values: []string{alg.String()}, Limit: 2, Window: time.Second, Algorithm: alg, Cost: 1}
			if alg == store.GCRA {
				rate.Burst = 2
			}
			q := quota("month", alg.String(), 3, store.Calendar{Period: store.Month}, 0)
			cs := checks(rate, q)
			e.clock.Set(time.Date(2027, 5, 10, 12, 0, 0, 0, time.UTC))
			left := time.Date(2027, 6, 1, 0, 0, 0, 0, time.UTC).Sub(e.clock.Now())
			for i := range int64(2) {
				got := e.allowChecks(fmt.Sprintf("%v #%d", alg, i+1), "mix", cs, true)
				if got[1] != fits(3, i+1, left) {
					e.t.Errorf("%v #%d: quota %+v, want %+v", alg, i+1, got[1], fits(3, i+1, left))
				}
			}
			before := e.state("mix", cs)
			got := e.allowChecks(fmt.Sprintf("%v #3", alg), "mix", cs, false)
			if got[0].Fits || got[0].Cause != store.CauseLimit || got[1] != fits(3, 2, left) {
				e.t.Errorf("%v #3: results %+v, want the rate rule denying, the quota fitting with 2 counted", alg, got)
			}
			e.unchanged(fmt.Sprintf("%v, denied by the rate rule", alg), "mix", cs, before)

			e.clock.Advance(time.Second)
			left -= time.Second
			e.allowChecks(fmt.Sprintf("%v #4", alg), "mix", cs, true)
			e.clock.Advance(time.Second)
			left -= time.Second
			before = e.state("mix", cs)
			got = e.allowChecks(fmt.Sprintf("%v #5", alg), "mix", cs, false)
			if !got[0].Fits || got[1] != full(3, 3, left, left) {
				e.t.Errorf("%v #5: results %+v, want the rate rule fitting, the quota denying", alg, got)
			}
			e.unchanged(fmt.Sprintf("%v, denied by the quota", alg), "mix", cs, before)
			e.decideChecks(fmt.Sprintf("%v, dry run", alg), "mix", store.ModeAllow, true, cs, false)
			e.unchanged(fmt.Sprintf("%v, after a dry run", alg), "mix", cs, before)

			// A Shadow quota is decided and reported but does not deny:
			// the request is recorded in both.
			got = e.allowChecks(fmt.Sprintf("%v, shadow quota", alg), "mix", checks(rate, shadowed(q)), true)
			if got[1] != full(3, 4, left, left) {
				e.t.Errorf("%v, shadow quota: %+v, want %+v", alg, got[1], full(3, 4, left, left))
			}
			// ModeRecord records in both, whatever they say: the rate
			// rule is full after it.
			got = e.decideChecks(fmt.Sprintf("%v, record", alg), "mix", store.ModeRecord, false, cs, false)
			if got[1] != full(3, 5, left, left) {
				e.t.Errorf("%v, record: quota %+v, want %+v", alg, got[1], full(3, 5, left, left))
			}
			if r := e.decideRaw("rate after the record", "mix", store.ModeAllow, true, checks(rate)); r[0].Fits {
				e.t.Errorf("%v: the rate rule after the record: %+v, want full", alg, r[0])
			}
		}
	})},

	{"CalendarLease", calendared(func(e *env) {
		// A lease holding a calendar quota: its estimate counts from the
		// Acquire; a settle replaces it with the real cost (more may go
		// past the limit: the work happened), in the period it was
		// counted in, even once a later one has begun; a release gives
		// the whole estimate back.
		e.leaser()
		q := quota("month", "lease", 10, store.Calendar{Period: store.Month}, 1)
		e.clock.Set(time.Date(2027, 8, 31, 23, 0, 0, 0, time.UTC))
		left := time.Hour
		ok, res := e.acquireChecks("acquire 4", "lease", "a", checks(costing(q, 4)))
		if !ok || res[0] != fits(10, 4, left) {
			e.t.Fatalf("acquire 4: granted %v, %+v; want granted, %+v", ok, res, fits(10, 4, left))
		}
		e.finishChecks("settle 7", "lease", "a", checks(costing(q, 4)), store.LeaseSettle, 7)
		e.decideChecks("after settle 7", "lease", store.ModeAllow, true, checks(q), true, fits(10, 8, left))
		ok, _ = e.acquireChecks("acquire 3", "lease", "b", checks(costing(q, 3)))
		if !ok {
			e.t.Fatal("acquire 3: not granted")
		}
		e.allowChecks("then 1 does not fit", "lease", checks(q), false, full(10, 10, left, left))
		e.finishChecks("release 3", "lease", "b", checks(costing(q, 3)), store.LeaseRelease, 0)
		e.decideChecks("after release", "lease", store.ModeAllow, true, checks(costing(q, 3)), true, fits(10, 10, left))
		ok, _ = e.acquireChecks("acquire 2", "lease", "c", checks(costing(q, 2)))
		if !ok {
			e.t.Fatal("acquire 2: not granted")
		}
		// Settled in September: August's total takes it.
		e.clock.Set(time.Date(2027, 9, 1, 0, 30, 0, 0, time.UTC))
		e.finishChecks("settle 1 in September", "lease", "c", checks(costing(q, 2)), store.LeaseSettle, 1)
		u := e.usage("usage", "lease", q, 0)
		if len(u) != 2 || u[0].Used != 0 || u[1].Used != 8 {
			e.t.Errorf("usage after the settle: %+v, want September 0 and August 8", u)
		}
	})},
}

// usage returns the totals of q's window (store.Historian), the current
// period that of at (0: the store's time).
func (e *env) usage(what, policy string, q store.Check, at int64) []store.PeriodUsage {
	e.t.Helper()
	req := store.UsageRequest{Policy: policy, Check: q, At: at}
	if err := e.target.Store.(store.Historian).Usage(e.ctx, &req); err != nil {
		e.t.Fatalf("%s at %v: Usage: %v", what, e.clock.Now(), err)
	}
	return req.Periods
}
