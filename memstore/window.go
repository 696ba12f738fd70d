package memstore

// entry is one recorded event: its time in microseconds and its cost.
type entry struct {
	ts   int64
	cost int64
}

// window is the log of one rule's key: its entries in time order, their total
// cost, and the newest entry's time, kept after it leaves the window so the
// minimum gap can still be enforced.
type window struct {
	entries []entry // entries[head:] are live, oldest first
	head    int
	used    int64 // total cost of entries[head:]
	newest  int64 // time of the newest entry ever recorded, µs
	expires int64 // µs after which the window can be dropped
}

// trim drops entries at or before cutoff (timestamps <= T-W).
func (w *window) trim(cutoff int64) {
	for w.head < len(w.entries) && w.entries[w.head].ts <= cutoff {
		w.used -= w.entries[w.head].cost
		w.head++
	}
	if w.head == len(w.entries) {
		w.entries, w.head = w.entries[:0], 0
	} else if w.head > 32 && w.head*2 >= len(w.entries) {
		n := copy(w.entries, w.entries[w.head:])
		w.entries, w.head = w.entries[:n], 0
	}
}

// empty reports whether the window has never recorded anything.
func (w *window) empty() bool { return w.newest == 0 && len(w.entries) == 0 }

// add records an event at now, never earlier than the newest entry.
func (w *window) add(now, cost, ttl int64) {
	ts := max(now, w.newest)
	w.entries = append(w.entries, entry{ts: ts, cost: cost})
	w.used += cost
	w.newest = ts
	w.expires = ts + ttl
}

// freedAt returns the time at which enough of the oldest entries leave the
// window (after lasting window µs) to free need units of cost.
func (w *window) freedAt(need, window int64) int64 {
	var freed int64
	for _, e := range w.entries[w.head:] {
		freed += e.cost
		if freed >= need {
			return e.ts + window
		}
	}
	return w.newest + window // not reached for need <= used
}
