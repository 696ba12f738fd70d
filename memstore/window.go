package memstore

import "github.com/sluicerate/sluice/store"

// entry is one recorded event: its time in microseconds and its cost.
type entry struct {
	ts   int64
	cost int64
}

// window is the log of one rule's key: its entries in time order in a ring
// buffer, their total cost, and the newest entry's time, kept after it leaves
// the window so the minimum gap can still be enforced.
//
// A window is also its key's entry in its shard's table (see table.go): its
// first cache line holds the key and the fields a decision reads.
type window struct {
	names  *names // the key's policy and rule
	values string // the key's encoded attribute values
	used   int64  // total cost of the live entries
	oldest int64  // time of the oldest live entry, when n > 0
	first  int64  // cost of the oldest live entry, when n > 0
	newest int64  // time of the newest entry ever recorded, µs
	n      int

	ring    []entry // ring[head], … ring[head+n-1] (mod len) are live, oldest first
	head    int
	expires int64   // µs after which the window can be dropped
	h       uint64  // the key's hash
	credit  *credit // a credits window's ids of applied changes (credits.go)
	live    bool    // in its shard's table
	_       [7]byte // to 128 bytes, a size the allocator aligns: the first line is whole
}

// at returns the i-th live entry, oldest first.
func (w *window) at(i int) *entry {
	j := w.head + i
	if j >= len(w.ring) {
		j -= len(w.ring)
	}
	return &w.ring[j]
}

// trim drops entries at or before cutoff (timestamps <= T-W).
func (w *window) trim(cutoff int64) {
	if w.n == 0 || w.oldest > cutoff {
		return // nothing left the window: the ring is not touched
	}
	for w.n > 0 {
		e := &w.ring[w.head]
		if e.ts > cutoff {
			return
		}
		w.used -= e.cost
		w.n--
		if w.head++; w.head == len(w.ring) {
			w.head = 0
		}
		if w.n > 0 {
			w.oldest, w.first = w.ring[w.head].ts, w.ring[w.head].cost
		}
	}
	w.head = 0
}

// empty reports whether the window has never recorded anything.
func (w *window) empty() bool { return w.newest == 0 && w.n == 0 }

// add records an event at now, never earlier than the newest entry. sizeHint
// is the capacity the ring starts with (the rule's limit, at most
// maxInitialRing). The window saturates at store.MaxCost: the event counts
// what fits under it, and one that finds the window full is not recorded.
func (w *window) add(now, cost, ttl, sizeHint int64) {
	if cost = min(cost, store.MaxCost-w.used); cost <= 0 {
		return
	}
	if w.n == len(w.ring) {
		w.grow(sizeHint)
	}
	ts := max(now, w.newest)
	if w.n == 0 {
		w.oldest, w.first = ts, cost
	}
	*w.at(w.n) = entry{ts: ts, cost: cost}
	w.n++
	w.used += cost
	w.newest = ts
	w.expires = ts + ttl
}

// maxInitialRing bounds a window's first allocation: 16 entries, 256
// bytes, which with the window's 128 hold a key that sees up to 16 events
// a window, most keys of a large population. A busier window doubles as
// it fills, so a key that keeps near a limit L of cost-1 events grows
// about log2(L/16) times once and never again. (Room for a whole limit of
// 128 at first would cost every key ever seen about 2 KB, and slow the
// decisions over many keys: their rings would spread over more memory than
// the caches and the address translations hold.)
const maxInitialRing = 16

func (w *window) grow(sizeHint int64) {
	size := 2 * len(w.ring)
	if size == 0 {
		size = int(min(max(sizeHint, 1), maxInitialRing))
	}
	ring := make([]entry, size)
	for i := range w.n {
		ring[i] = *w.at(i)
	}
	w.ring, w.head = ring, 0
}

// freedAt returns the time at which enough of the oldest entries leave the
// window (after lasting window µs) to free need units of cost.
func (w *window) freedAt(need, window int64) int64 {
	if w.n > 0 && w.first >= need {
		return w.oldest + window // the oldest entry alone: the ring is not touched
	}
	var freed int64
	for i := range w.n {
		e := w.at(i)
		freed += e.cost
		if freed >= need {
			return e.ts + window
		}
	}
	return w.newest + window // not reached for need <= used
}
