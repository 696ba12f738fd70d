package memstore

import (
	"math"
	"time"

	"github.com/sluicerate/sluice/store"
)

// The sliding counter: the counts of the current fixed window (a bucket of
// length Window, aligned to multiples of it) and the previous one; the
// sliding window's count is estimated as the current count plus the
// previous one weighted by the part of the previous bucket the sliding
// window still covers, floor(prev * (Window - elapsed) / Window) in float64,
// the same arithmetic as the Redis store's. A counter window keeps its
// bucket's index in oldest, the previous count in first and the current one
// in used; it expires when the bucket after the current one ends.

// counterRoll moves w's buckets to the one now falls in.
func counterRoll(w *window, c *store.Check, now int64) {
	idx := now / c.Window.Microseconds()
	switch {
	case idx == w.oldest:
	case idx == w.oldest+1:
		w.oldest, w.first, w.used = idx, w.used, 0
	default:
		w.oldest, w.first, w.used = idx, 0, 0
	}
}

// counterEstimate returns the estimated count at now of buckets whose
// current one, of index idx, holds curr and the previous one prev.
func counterEstimate(c *store.Check, idx, prev, curr, now int64) int64 {
	win := c.Window.Microseconds()
	elapsed := now - idx*win
	return curr + int64(math.Floor(float64(prev)*float64(win-elapsed)/float64(win)))
}

// counterAt returns w's buckets (nil: none) at t, after pending more cost
// was recorded at now in the bucket of now.
func counterAt(c *store.Check, w *window, pending, now, t int64) (idx, prev, curr int64) {
	win := c.Window.Microseconds()
	idx = now / win
	if w != nil {
		prev, curr = w.first, w.used // rolled to now by live
	}
	curr = min(curr+pending, store.MaxCost)
	switch next := t / win; {
	case next == idx+1:
		idx, prev, curr = next, curr, 0
	case next > idx+1:
		idx, prev, curr = next, 0, 0
	}
	return idx, prev, curr
}

func counterFits(c *store.Check, w *window, pending, now, t int64) bool {
	idx, prev, curr := counterAt(c, w, pending, now, t)
	return counterEstimate(c, idx, prev, curr, t)+c.Cost <= c.Limit
}

func counterCheck(res *store.Result, c *store.Check, w *window, now int64) {
	if !counterFits(c, w, 0, now, now) {
		res.Fits, res.Cause = false, store.CauseLimit
	}
}

// counterWait returns how long from now until c fits, after the decision
// recorded its cost (pending) or not: the least t at which the estimate
// has room (it never grows as time passes), at most when the bucket after
// the current one ends; a window for a limit of 0, and until both buckets
// are empty for a cost above the limit (recorded in ModeRecord, it never
// fits: stepping to a fit would not end). It solves
// floor(prev*(W-e)/W) <= room for the elapsed e in the bucket of now, then
// in the next, and steps to where the fit changes, since float64 may put
// the solution a µs off: the Redis store's counter.lua does the same.
func counterWait(c *store.Check, w *window, pending bool, now int64) int64 {
	var p int64
	if pending {
		p = c.Cost
	}
	win := c.Window.Microseconds()
	if c.Limit == 0 {
		return win
	}
	b := now / win
	if c.Cost > c.Limit {
		return (b+2)*win - now
	}
	if counterFits(c, w, p, now, now) {
		return 0
	}
	_, prev, curr := counterAt(c, w, p, now, now)
	t := (b + 2) * win
	if room := c.Limit - c.Cost - curr; room >= 0 && prev > 0 {
		t = b*win + counterSolve(win, prev, room)
	}
	if t >= (b+1)*win {
		t = (b + 1) * win
		if curr > 0 {
			t += max(0, counterSolve(win, curr, c.Limit-c.Cost))
		}
	}
	t = min(max(t, now+1), (b+2)*win)
	for t-1 > now && counterFits(c, w, p, now, t-1) {
		t--
	}
	for !counterFits(c, w, p, now, t) {
		t++
	}
	return t - now
}

// counterSolve returns about the least e at which a previous bucket of
// count prev, weighted by (win-e)/win, counts at most room.
func counterSolve(win, prev, room int64) int64 {
	return int64(math.Floor(float64(win)-float64(room+1)*float64(win)/float64(prev))) + 1
}

func counterAdd(w *window, c *store.Check, now int64) {
	counterRoll(w, c, now)
	w.used = min(w.used+c.Cost, store.MaxCost)
	w.expires = (w.oldest + 2) * c.Window.Microseconds()
}

// counterReport sets res's figures as w's buckets (nil: none) hold them at
// now, with pending more cost recorded: the estimate (Used), Limit minus it
// (Remaining), and the time until the estimate falls to 0 (ResetAfter).
func counterReport(res *store.Result, c *store.Check, w *window, pending, now int64) {
	idx, prev, curr := counterAt(c, w, pending, now, now)
	res.Used = min(counterEstimate(c, idx, prev, curr, now), store.MaxCost)
	res.Remaining = max(0, c.Limit-res.Used)
	win := c.Window.Microseconds()
	switch {
	case curr > 0:
		res.ResetAfter = time.Duration((idx+2)*win-now) * time.Microsecond
	case prev > 0:
		res.ResetAfter = time.Duration((idx+1)*win-now) * time.Microsecond
	default:
		res.ResetAfter = 0
	}
}
