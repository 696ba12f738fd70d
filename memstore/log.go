package memstore

import (
	"time"

	"github.com/sluicerate/sluice/store"
)

// The log: every event of the window, in a ring (window.go).

// logCheck sets res's Used, Fits and Cause for check c before the decision
// at now, given its window (nil: none).
func logCheck(res *store.Result, c *store.Check, w *window, now int64) {
	if w == nil {
		if c.Cost > c.Limit {
			res.Fits, res.Cause = false, store.CauseLimit
		}
		return
	}
	res.Used = w.used
	full := w.used+c.Cost > c.Limit
	early := c.MinGap > 0 && !w.empty() && now-w.newest < c.MinGap.Microseconds()
	switch {
	case full && early:
		res.Fits = false
		// The cause is the condition that takes longer to clear.
		res.Cause = store.CauseLimit
		if limit, gap := logWaits(c, w, false, now); gap > limit {
			res.Cause = store.CauseGap
		}
	case full:
		res.Fits, res.Cause = false, store.CauseLimit
	case early:
		res.Fits, res.Cause = false, store.CauseGap
	}
}

// logWaits returns how long, from now, until c's window w (nil: none) has
// room for c's cost, and until its minimum gap has passed, once c's cost is
// recorded at now (pending) or not.
func logWaits(c *store.Check, w *window, pending bool, now int64) (limit, gap int64) {
	window := c.Window.Microseconds()
	at := now // when the pending entry is recorded: never before the newest
	var used, p int64
	if w != nil {
		used = w.used
		at = logAt(c, w, now)
	}
	if pending {
		p = min(c.Cost, store.MaxCost-used) // what the window takes of it
	}
	if need := used + p + c.Cost - c.Limit; need > 0 {
		freed := int64(-1)
		if w != nil && need <= used {
			freed = w.freedAt(need, window)
		}
		if freed < 0 {
			freed = at + window // only the pending entry's leaving makes room
			if w != nil && w.n > 0 {
				freed = max(at, w.newest) + window // and a slice's future entry's
			}
		}
		limit = freed - now
	}
	if g := c.MinGap.Microseconds(); g > 0 {
		last := int64(-1)
		switch {
		case pending:
			last = at
		case w != nil && !w.empty():
			last = w.newest
		}
		if last >= 0 {
			gap = max(0, last+g-now)
		}
	}
	return limit, gap
}

// logReport sets res's Used, Remaining and ResetAfter as c's window w
// (nil: none) holds them at now.
func logReport(res *store.Result, c *store.Check, w *window, now int64) {
	if w != nil {
		res.Used = w.used
		if w.n > 0 { // then the newest entry is in the window
			res.ResetAfter = time.Duration(w.newest+c.Window.Microseconds()-now) * time.Microsecond
		}
	}
	res.Remaining = max(0, c.Limit-res.Used)
}

// logPretend sets res's figures to what recording c at now would leave:
// the cost counted, and the window ending a window after the entry.
func logPretend(res *store.Result, c *store.Check, w *window, now int64) {
	logReport(res, c, w, now)
	if res.Used >= store.MaxCost {
		return // a full window records nothing (window.add)
	}
	at := now
	if w != nil {
		at = logAt(c, w, now)
	}
	res.Used = min(res.Used+c.Cost, store.MaxCost)
	res.Remaining = max(0, c.Limit-res.Used)
	res.ResetAfter = max(res.ResetAfter, time.Duration(at+c.Window.Microseconds()-now)*time.Microsecond)
}

// logAt returns the time an event of c decided at now is recorded at in
// w: never before the newest entry, but in a budgeted window at now, among
// its slices' future entries (see budget.go).
func logAt(c *store.Check, w *window, now int64) int64 {
	if c.Budget > 0 {
		return now
	}
	return max(now, w.newest)
}
