package memstore

import (
	"time"

	"github.com/sluicerate/sluice/store"
)

// GCRA: a token bucket kept as one time, the theoretical arrival time (TAT):
// when the bucket would be full again if nothing else came. Each unit of cost
// adds one interval (Window/Limit, rounded up to a whole µs) to it; a request
// of cost c is admitted at now when max(TAT, now) + c*interval - now is at
// most Burst intervals. A GCRA window keeps its TAT in newest, and expires
// at it: a full bucket is as good as none.

// gcraInterval returns the time one unit of c's cost holds its bucket, in
// µs: Window/Limit, rounded up so that the rate is never exceeded.
func gcraInterval(c *store.Check) int64 {
	w, l := c.Window.Microseconds(), c.Limit
	if l <= 0 {
		return w // a limit of 0 admits nothing; the interval only sizes the expiry queue
	}
	return (w + l - 1) / l
}

// gcraTAT returns the theoretical arrival time of w (nil: none) at now: never
// before now.
func gcraTAT(w *window, now int64) int64 {
	if w == nil {
		return now
	}
	return max(w.newest, now)
}

// gcraStep returns how far c's cost moves a TAT: cost intervals, at most
// store.MaxBucket.
func gcraStep(c *store.Check) int64 {
	iv := gcraInterval(c)
	if c.Cost > store.MaxBucket/iv {
		return store.MaxBucket
	}
	return c.Cost * iv
}

// gcraAfter returns the TAT of a bucket whose TAT is tat (at least now)
// once c's cost is recorded at now: saturated at now plus store.MaxBucket.
func gcraAfter(c *store.Check, tat, now int64) int64 {
	return min(tat+gcraStep(c), now+store.MaxBucket)
}

// gcraAllowAt returns when a request of c's cost fits a bucket whose TAT is
// tat: the earliest time its cost, added, leaves the bucket within its
// burst.
func gcraAllowAt(c *store.Check, tat int64) int64 {
	return tat + gcraStep(c) - c.Burst*gcraInterval(c)
}

func gcraCheck(res *store.Result, c *store.Check, w *window, now int64) {
	if c.Limit == 0 || c.Cost > c.Burst || gcraAllowAt(c, gcraTAT(w, now)) > now {
		res.Fits, res.Cause = false, store.CauseLimit
	}
}

// gcraWait returns how long from now until c fits, after the decision
// recorded its cost (pending) or not.
func gcraWait(c *store.Check, w *window, pending bool, now int64) int64 {
	if c.Limit == 0 {
		return c.Window.Microseconds()
	}
	tat := gcraTAT(w, now)
	if pending {
		tat = gcraAfter(c, tat, now)
	}
	return max(0, gcraAllowAt(c, tat)-now)
}

func gcraAdd(w *window, c *store.Check, now int64) {
	w.newest = gcraAfter(c, gcraTAT(w, now), now)
	w.expires = w.newest
	if w.n > 0 { // slices held (budget.go): kept until they are settled
		w.expires = max(w.expires, w.at(w.n-1).ts+w.used*gcraInterval(c))
	}
}

// gcraReport sets res's figures for a bucket whose TAT is tat at now: what
// is left of the burst (Remaining), the rest of it (Used), and the time
// until it is full again (ResetAfter).
func gcraReport(res *store.Result, c *store.Check, tat, now int64) {
	if c.Limit == 0 {
		res.Used, res.Remaining, res.ResetAfter = 0, 0, 0
		return
	}
	iv, level := gcraInterval(c), tat-now
	res.Remaining = min(c.Burst, max(0, (c.Burst*iv-level)/iv))
	res.Used = c.Burst - res.Remaining
	res.ResetAfter = time.Duration(level) * time.Microsecond
}
