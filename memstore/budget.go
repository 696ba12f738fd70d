package memstore

import (
	"context"
	"time"

	"github.com/sluicerate/sluice/store"
)

// Budgets (see store.Budgeter). A log window keeps a slice as one entry of
// its ring stamped at the slice's end, in time order among the others: the
// ring of a budgeted window is kept sorted, and an event decided per
// request is inserted at its own time rather than after the future
// entries. A GCRA window keeps its held slices in its ring, which GCRA
// does not otherwise use: each entry's time is the slice's end and its
// cost the slice's size, sorted by end, with used their sum (H) and oldest
// the earliest end; newest is the arrival time, as always. A sliding
// counter keeps nothing per slice: a slice is cost in the current bucket.

var _ store.Budgeter = (*Store)(nil)

// Budget returns b's slices, decides req in store.ModeAllow and grants
// b's asks, in one atomic step (see store.Budgeter).
func (s *Store) Budget(ctx context.Context, req *store.Request, b *store.BudgetRequest) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	if err := store.CheckDecide(req); err != nil {
		return err
	}
	if err := store.CheckBudget(req, b); err != nil {
		return err
	}
	checks := req.Checks
	n := len(checks) + len(b.Returns)
	keys, hashes, shardIdx := make([]key, 0, n), make([]uint64, 0, n), make([]int, 0, n)
	keys, hashes, shardIdx = s.keysOf(req.Policy, checks, keys, hashes, shardIdx)
	for i := range b.Returns {
		k := key{policy: req.Policy, rule: b.Returns[i].Check.Rule, values: encodeValues(b.Returns[i].Check.Values)}
		h := k.hash(s.seed)
		keys, hashes, shardIdx = append(keys, k), append(hashes, h), append(shardIdx, int(h&s.mask))
	}
	locked := s.lock(make([]int, 0, n), shardIdx)
	defer s.unlock(locked)
	now := s.micros()

	for i := range b.Returns {
		k, r := len(checks)+i, &b.Returns[i]
		sh := &s.shards[shardIdx[k]]
		if j, _ := sh.live(hashes[k], &keys[k], &r.Check, now); j >= 0 {
			giveBack(sh.slots[j], r, now)
		}
	}

	results, grants := req.ResultsBuffer(), b.GrantsBuffer()
	wins := make([]*window, len(checks))
	allFit := true
	for i := range checks {
		sh := &s.shards[shardIdx[i]]
		j, _ := sh.live(hashes[i], &keys[i], &checks[i], now)
		wins[i] = sh.at(j)
		check(&results[i], &checks[i], wins[i], now)
		allFit = allFit && (results[i].Fits || checks[i].Shadow)
	}
	if !allFit {
		for i := range checks {
			retry(&results[i], &checks[i], wins[i], false, now)
			report(&results[i], &checks[i], wins[i], now)
		}
		for a := range grants {
			grants[a].Start = now
		}
		return nil
	}
	for i := range checks {
		sh := &s.shards[shardIdx[i]]
		j := sh.record(sh.find(hashes[i], &keys[i]), hashes[i], &keys[i], &checks[i], now, 0)
		wins[i] = sh.slots[j]
	}
	for a := range b.Asks {
		i := b.Asks[a].Check
		w := s.shards[shardIdx[i]].lookup(hashes[i], &keys[i])
		grant(&grants[a], &checks[i], w, b.Asks[a].Want, now)
	}
	for i := range checks {
		sh := &s.shards[shardIdx[i]]
		report(&results[i], &checks[i], sh.lookup(hashes[i], &keys[i]), now)
	}
	for i := range shardIdx {
		s.shards[shardIdx[i]].evict(now)
	}
	return nil
}

// grant grants g a slice of at most want units of c's window w at now,
// from the room the window has left.
func grant(g *store.Grant, c *store.Check, w *window, want, now int64) {
	var room store.Result
	report(&room, c, w, now)
	life := c.Budget.Microseconds()
	if c.Algorithm == store.SlidingCounter {
		win := c.Window.Microseconds()
		life = min(life, (now/win+1)*win-now)
	}
	g.Start, g.End, g.Life = now, now+life, time.Duration(life)*time.Microsecond
	if n := min(want, room.Remaining); n > 0 {
		g.Granted = n
		switch c.Algorithm {
		case store.GCRA:
			sc := *c
			sc.Cost = n
			w.ringInsert(g.End, n, 4)
			gcraAdd(w, &sc, now)
		case store.SlidingCounter:
			sc := *c
			sc.Cost = n
			counterAdd(w, &sc, now)
		default:
			w.ringInsert(g.End, n, c.Limit)
			w.newest = max(w.newest, g.End)
			w.expires = max(w.expires, g.End+c.TTL().Microseconds())
		}
	}
	report(&g.Result, c, w, now)
}

// giveBack takes back the unused units of slice r from its window w at
// now, as its algorithm allows (see store.Budgeter).
func giveBack(w *window, r *store.SliceReturn, now int64) {
	unused := r.Granted - r.Used
	switch r.Check.Algorithm {
	case store.SlidingCounter:
		switch idx := r.Start / r.Check.Window.Microseconds(); idx {
		case w.oldest:
			w.used = max(0, w.used-unused)
		case w.oldest - 1:
			w.first = max(0, w.first-unused)
		}
	case store.GCRA:
		i := w.ringFind(r.End, r.Granted)
		if i < 0 || r.End <= now {
			return // settled at its end
		}
		iv := gcraInterval(&r.Check)
		tat := max(w.newest, now+w.used*iv) - unused*iv
		w.ringRemove(i)
		w.newest = max(tat, now+w.used*iv)
	case store.Log:
		i := w.ringFind(r.End, r.Granted)
		if i < 0 {
			return // it left the window
		}
		w.ringRemove(i)
		if r.Used > 0 {
			// Every event of the slice came before its return: it counts
			// from then, or from its end when that came first.
			w.ringInsert(min(r.End, now), r.Used, r.Check.Limit)
		}
		if w.n > 0 {
			w.newest = w.at(w.n - 1).ts
		}
	}
}

// gcraSettle ends the holds of GCRA window w whose slices ended by now,
// earliest first, each moving the arrival time to at least its end plus
// the intervals of every slice held until then, and caps the arrival time
// at now plus the intervals of the slices still held: held tokens count
// against the burst.
func gcraSettle(w *window, c *store.Check, now int64) {
	iv := gcraInterval(c)
	for w.n > 0 && w.oldest <= now {
		w.newest = max(w.newest, w.oldest+w.used*iv)
		w.ringRemove(0)
	}
	if w.n > 0 {
		w.newest = max(w.newest, now+w.used*iv)
	}
	w.expires = max(w.expires, w.newest)
}

// ringInsert inserts an entry of cost at ts into w's ring in time order
// (after the entries of the same time), keeping used, oldest and first.
func (w *window) ringInsert(ts, cost, sizeHint int64) {
	if w.n == len(w.ring) {
		w.grow(sizeHint)
	}
	i := w.n
	for ; i > 0 && w.at(i-1).ts > ts; i-- {
		*w.at(i) = *w.at(i - 1)
	}
	*w.at(i) = entry{ts: ts, cost: cost}
	w.n++
	w.used += cost
	if i == 0 {
		w.oldest, w.first = ts, cost
	}
}

// ringFind returns the index of an entry of w's ring at ts of cost, or -1.
// Entries of the same time and cost are alike: any one is the slice's.
func (w *window) ringFind(ts, cost int64) int {
	for i := w.n - 1; i >= 0; i-- {
		e := w.at(i)
		if e.ts == ts && e.cost == cost {
			return i
		}
		if e.ts < ts {
			break
		}
	}
	return -1
}

// ringRemove removes the i-th entry of w's ring, keeping used, oldest and
// first.
func (w *window) ringRemove(i int) {
	w.used -= w.at(i).cost
	for k := i; k < w.n-1; k++ {
		*w.at(k) = *w.at(k + 1)
	}
	w.n--
	switch {
	case w.n == 0:
		w.head = 0
	case i == 0:
		w.oldest, w.first = w.at(0).ts, w.at(0).cost
	}
}
