package memstore

import (
	"context"
	"time"

	"github.com/sluicerate/sluice/store"
)

// Periodic: a fixed-window counter whose windows are the periods of the
// check's Calendar. A periodic window keeps the index of its period in
// oldest and the period's count in used; its ring holds the totals of the
// periods before it that counted something (entry ts: the period's index,
// cost: its total), oldest first, at most History of them. A period's
// count moves to the ring when a later period starts (periodicRoll), so
// memory per window is bounded by History. A window without history
// expires at its period's end, when its count would reset anyway; with
// history, once every period it holds is more than History periods old.

// periodicRoll moves w to the period now falls in: a count of an earlier
// period goes to the history when the check keeps one. A clock set back
// to an earlier period leaves w as it is: nothing is lost, and the
// decision counts in the later period.
func periodicRoll(w *window, c *store.Check, now int64) {
	idx, _, _ := c.Calendar.At(now)
	if idx <= w.oldest {
		return
	}
	if w.used > 0 && c.History > 0 {
		periodicKeep(w, w.oldest, w.used, c.History)
	}
	w.oldest, w.used = idx, 0
}

// periodicKeep appends the total of period idx to w's history, dropping
// the oldest totals past the most the check keeps.
func periodicKeep(w *window, idx, total int64, history int) {
	for ; w.n >= history; w.n-- {
		if w.head++; w.head == len(w.ring) {
			w.head = 0
		}
	}
	if w.n == len(w.ring) {
		w.grow(int64(history))
	}
	*w.at(w.n) = entry{ts: idx, cost: total}
	w.n++
}

// periodicUsed returns what w (nil: none) counted in the period idx: the
// current count or a total of its history, 0 when it holds none.
func periodicUsed(w *window, idx int64) int64 {
	if w == nil {
		return 0
	}
	if idx == w.oldest {
		return w.used
	}
	for i := range w.n {
		if e := w.at(i); e.ts == idx {
			return e.cost
		}
	}
	return 0
}

// periodicCount returns w's (nil: none) count of the period now falls in:
// live has rolled it there.
func periodicCount(w *window) int64 {
	if w == nil {
		return 0
	}
	return w.used
}

func periodicCheck(res *store.Result, c *store.Check, w *window) {
	res.Used = periodicCount(w)
	if res.Used+c.Cost > c.Limit {
		res.Fits, res.Cause = false, store.CauseLimit
	}
}

// periodicWait returns how long from now until c fits, after the decision
// recorded its cost (pending) or not: until the period's end, when the
// count starts from 0; store.MaxRetry for a cost above the limit, which
// no period admits.
func periodicWait(c *store.Check, w *window, pending bool, now int64) int64 {
	if c.Cost > c.Limit {
		return store.MaxRetry.Microseconds()
	}
	used := periodicCount(w)
	if pending {
		used = min(used+c.Cost, store.MaxCost)
	}
	if used+c.Cost <= c.Limit {
		return 0
	}
	return periodicEnd(c, w, now) - now
}

// periodicEnd returns the end of the period w (nil: none) counts in at
// now: now's, or the later one a clock set back left w in (periodicRoll).
func periodicEnd(c *store.Check, w *window, now int64) int64 {
	idx, _, end := c.Calendar.At(now)
	if w != nil && w.oldest > idx {
		_, end = c.Calendar.Bounds(w.oldest)
	}
	return end
}

// periodicAdd records c's cost in the period of now and sets w's expiry.
func periodicAdd(w *window, c *store.Check, now int64) {
	periodicRoll(w, c, now)
	w.used = min(w.used+c.Cost, store.MaxCost)
	w.expires = periodicExpiry(c, w, now)
}

// periodicExpiry returns when w, a window of c written at now, can be
// dropped: the end of the period it counts in, or, with a history, once
// that period is more than History periods old (no period lasts longer
// than store.MaxPeriodLength).
func periodicExpiry(c *store.Check, w *window, now int64) int64 {
	return periodicEnd(c, w, now) + int64(c.History)*store.MaxPeriodLength.Microseconds()
}

// periodicSettle adds delta to what w counted in the period idx (the
// current one or one in its history), never below 0.
func periodicSettle(w *window, idx, delta int64) {
	if idx == w.oldest {
		w.used = min(max(0, w.used+delta), store.MaxCost)
		return
	}
	for i := range w.n {
		if e := w.at(i); e.ts == idx {
			e.cost = min(max(0, e.cost+delta), store.MaxCost)
			return
		}
	}
}

// periodicReport sets res's figures as w (nil: none) holds them at now,
// with pending more cost recorded: the period's count (Used), the limit
// less it (Remaining), and the time to the period's end while the count
// is above 0 (ResetAfter).
func periodicReport(res *store.Result, c *store.Check, w *window, pending, now int64) {
	res.Used = min(periodicCount(w)+pending, store.MaxCost)
	res.Remaining = max(0, c.Limit-res.Used)
	res.ResetAfter = 0
	if res.Used > 0 {
		res.ResetAfter = time.Duration(periodicEnd(c, w, now)-now) * time.Microsecond
	}
}

var _ store.Historian = (*Store)(nil)

// Usage implements store.Historian: the count of the period of req.At (0:
// now) and the totals of the req.Check.History periods before it, newest
// first.
func (s *Store) Usage(ctx context.Context, req *store.UsageRequest) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	if err := store.CheckUsage(req); err != nil {
		return err
	}
	c := &req.Check
	k := key{policy: req.Policy, rule: c.Rule, values: encodeValues(c.Values)}
	h := k.hash(s.seed)
	sh := &s.shards[h&s.mask]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := s.micros()
	at := req.At
	if at == 0 {
		at = now
	}
	j, _ := sh.live(h, &k, c, now)
	w := sh.at(j)
	idx, _, _ := c.Calendar.At(at)
	req.Periods = req.Periods[:0]
	for i := idx; i >= idx-int64(c.History); i-- {
		start, end := c.Calendar.Bounds(i)
		req.Periods = append(req.Periods, store.PeriodUsage{Index: i, Start: start, End: end, Used: periodicUsed(w, i)})
	}
	return nil
}
