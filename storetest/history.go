package storetest

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/sluicerate/sluice/store"
)

// History cases: the totals of a calendar quota's past periods
// (store.Historian), checked against a count of the events that does not
// use store.Calendar.

// scripted is one event of a scripted year: its time and cost.
type scripted struct {
	at   time.Time
	cost int64
}

// month names a calendar month.
type month struct {
	y int
	m time.Month
}

// script returns events in loc in the n months from first on, on random
// days of each month (seed fixes them): some on a month's first and last
// µs, none in the month skip. It returns the total of each month, counted
// by the month each event was made in.
func script(loc *time.Location, seed uint64, first month, n int, skip month) ([]scripted, map[month]int64) {
	rng := rand.New(rand.NewPCG(seed, 2027))
	var events []scripted
	totals := map[month]int64{}
	for i := range n {
		start := time.Date(first.y, first.m+time.Month(i), 1, 0, 0, 0, 0, loc)
		y, m := start.Year(), start.Month()
		if (month{y, m}) == skip {
			continue
		}
		days := time.Date(y, m+1, 0, 0, 0, 0, 0, loc).Day()
		for k := range 3 + rng.IntN(6) {
			t := time.Date(y, m, 1+rng.IntN(days), rng.IntN(24), rng.IntN(60), rng.IntN(60), rng.IntN(1000)*1000, loc)
			switch {
			case k == 0 && i%3 == 0:
				t = time.Date(y, m, 1, 0, 0, 0, 0, loc) // the month's first µs
			case k == 1 && i%3 == 1:
				t = time.Date(y, m+1, 1, 0, 0, 0, 0, loc).Add(-time.Microsecond) // its last
			}
			cost := 1 + int64(rng.IntN(50))
			events = append(events, scripted{at: t, cost: cost})
			totals[month{y, m}] += cost
		}
	}
	slices.SortStableFunc(events, func(a, b scripted) int { return a.at.Compare(b.at) })
	return events, totals
}

// expectUsage checks periods against the months from first back, one a
// period, with their totals.
func (e *env) expectUsage(what string, got []store.PeriodUsage, loc *time.Location, first month, n int, totals map[month]int64) {
	e.t.Helper()
	if len(got) != n {
		e.t.Fatalf("%s: %d periods, want %d: %+v", what, len(got), n, got)
	}
	for i := range n {
		start := time.Date(first.y, first.m-time.Month(i), 1, 0, 0, 0, 0, loc)
		end := time.Date(first.y, first.m-time.Month(i)+1, 1, 0, 0, 0, 0, loc)
		mo := month{start.Year(), start.Month()}
		want := store.PeriodUsage{Index: int64(mo.y)*12 + int64(mo.m) - 1, Start: start.UnixMicro(), End: end.UnixMicro(), Used: totals[mo]}
		if got[i] != want {
			e.t.Errorf("%s: period %d (%d-%02d): got %+v, want %+v", what, i, mo.y, mo.m, got[i], want)
		}
	}
}

// play decides events in q's window, each at its time, all admitted.
func (e *env) play(q store.Check, events []scripted) {
	e.t.Helper()
	for _, ev := range events {
		e.clock.Set(ev.at)
		if got := e.decideRaw("scripted event", "usage", store.ModeAllow, false, checks(costing(q, ev.cost))); !got[0].Fits {
			e.t.Fatalf("event of %d at %v: denied: %+v", ev.cost, ev.at, got[0])
		}
	}
}

var historyCases = []testCase{
	{"HistoryScriptedYear", calendared(func(e *env) {
		// A monthly quota in Berlin keeping 12 periods, through a scripted
		// year: at the first instant of 2028, Usage lists January 2028 (0)
		// and the 12 months of 2027, newest first, July's 0 included, each
		// the total the script counts.
		berlin := e.zone("Europe/Berlin")
		month12 := store.Calendar{Period: store.Month, Location: berlin}
		q := quota("month", "year", 1_000_000, month12, 12)
		events, totals := script(berlin, 41, month{2027, time.January}, 12, month{2027, time.July})
		e.play(q, events)
		e.clock.Set(time.Date(2028, 1, 1, 0, 0, 0, 0, berlin))
		e.expectUsage("at 2028", e.usage("at 2028", "usage", q, 0), berlin, month{2028, time.January}, 13, totals)

		// At chooses the current period: June 2027 and the 12 before it.
		at := time.Date(2027, 6, 15, 12, 0, 0, 0, berlin).UnixMicro()
		e.expectUsage("at June 2027", e.usage("at June 2027", "usage", q, at), berlin, month{2027, time.June}, 13, totals)

		// History bounds what is kept: 13 months with events from December
		// 2026; once January 2028 has counted, December 2026 is the 13th
		// period before it, dropped, as Usage at December 2027 shows.
		b := quota("month", "bound", 1_000_000, month12, 12)
		events, totals = script(berlin, 42, month{2026, time.December}, 13, month{})
		e.play(b, events)
		e.clock.Set(time.Date(2028, 1, 1, 0, 0, 0, 0, berlin))
		e.decideRaw("January 2028", "usage", store.ModeAllow, false, checks(b))
		delete(totals, month{2026, time.December})
		totals[month{2028, time.January}] = 1
		e.expectUsage("January 2028", e.usage("January 2028", "usage", b, 0), berlin, month{2028, time.January}, 13, totals)
		dec := time.Date(2027, 12, 15, 0, 0, 0, 0, berlin).UnixMicro()
		e.expectUsage("at December 2027", e.usage("at December 2027", "usage", b, dec), berlin, month{2027, time.December}, 13, totals)

		// Without history, the current period alone.
		now := e.usage("no history", "usage", quota("month", "none", 5, store.Calendar{Period: store.Month, Location: berlin}, 0), 0)
		e.expectUsage("no history", now, berlin, month{2028, time.January}, 1, nil)

		// A check that is not a calendar quota has no usage.
		notQuota := q
		notQuota.Algorithm = store.Log
		if err := e.target.Store.(store.Historian).Usage(e.ctx, &store.UsageRequest{Policy: "usage", Check: notQuota}); err == nil {
			e.t.Error("Usage of a log rule: no error")
		}

		// A time before the Unix epoch is an error on every store, not
		// another store's current period.
		if err := e.target.Store.(store.Historian).Usage(e.ctx, &store.UsageRequest{Policy: "usage", Check: q, At: -1}); err == nil {
			e.t.Error("Usage at -1 µs: no error")
		}
	})},
}
