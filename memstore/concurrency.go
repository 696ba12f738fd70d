package memstore

import (
	"time"

	"github.com/sluicerate/sluice/store"
)

// Concurrency: the leases alive in a window. A concurrency window keeps
// them in ring[0:n] (head stays 0), each entry's ts the lease's expiry and
// its cost the lease's token, in no order; used is n, and expires the
// latest expiry it ever held. A lease is alive while now is before its
// expiry.

// concPrune drops the leases of w that expired by now and returns how
// many it dropped.
func concPrune(w *window, now int64) int {
	dropped := 0
	for i := 0; i < w.n; {
		if w.ring[i].ts <= now {
			w.concRemoveAt(i)
			dropped++
			continue
		}
		i++
	}
	return dropped
}

// concRemoveAt removes the i-th lease of w.
func (w *window) concRemoveAt(i int) {
	w.n--
	w.ring[i] = w.ring[w.n]
	w.ring[w.n] = entry{}
	w.used = int64(w.n)
}

// concFind returns the index of the lease of w with token, or -1.
func (w *window) concFind(token int64) int {
	for i := range w.n {
		if w.ring[i].cost == token {
			return i
		}
	}
	return -1
}

func concLive(w *window) int64 {
	if w == nil {
		return 0
	}
	return int64(w.n)
}

func concCheck(res *store.Result, c *store.Check, w *window) {
	res.Used = concLive(w)
	if res.Used+c.Cost > c.Limit {
		res.Fits, res.Cause = false, store.CauseConcurrency
	}
}

// concWait returns how long from now until one more lease fits w (nil:
// none), after the decision held one (pending) or not: until the leases
// alive, less those that must expire first, leave room.
func concWait(c *store.Check, w *window, pending bool, now int64) int64 {
	live := concLive(w)
	if pending {
		live++
	}
	need := live + c.Cost - c.Limit
	if need <= 0 {
		return 0
	}
	if c.Limit == 0 {
		return c.Window.Microseconds()
	}
	exp := make([]int64, 0, live)
	if w != nil {
		for i := range w.n {
			exp = append(exp, w.ring[i].ts)
		}
	}
	if pending {
		exp = append(exp, now+c.Window.Microseconds())
	}
	if need > int64(len(exp)) {
		return c.Window.Microseconds()
	}
	// The need-th earliest expiry: partial selection, n is small.
	for k := range need {
		m := k
		for i := k + 1; i < int64(len(exp)); i++ {
			if exp[i] < exp[m] {
				m = i
			}
		}
		exp[k], exp[m] = exp[m], exp[k]
	}
	return exp[need-1] - now
}

// concAdd holds the lease of token in w until now plus c's Window.
func concAdd(w *window, c *store.Check, now, token int64) {
	if w.n == len(w.ring) {
		w.grow(c.Limit)
	}
	exp := now + c.Window.Microseconds()
	w.ring[w.n] = entry{ts: exp, cost: token}
	w.n++
	w.used = int64(w.n)
	w.expires = max(w.expires, exp)
}

// concReport sets res's figures as w (nil: none) holds them at now, with
// pending more leases held until now plus c's Window.
func concReport(res *store.Result, c *store.Check, w *window, pending, now int64) {
	res.Used = concLive(w) + pending
	res.Remaining = max(0, c.Limit-res.Used)
	last := int64(0)
	if w != nil {
		for i := range w.n {
			last = max(last, w.ring[i].ts)
		}
	}
	if pending > 0 {
		last = max(last, now+c.Window.Microseconds())
	}
	res.ResetAfter = time.Duration(max(0, last-now)) * time.Microsecond
}
