package soak

import (
	"slices"
	"time"
)

// The checker knows nothing of sluice: it sees, per window, the admissions
// its callers were given, each as the interval between the moment the
// request was sent and the moment its answer came back, in nanoseconds of
// CLOCK_REALTIME (time.Now().UnixNano()) on this machine. Redis reads the
// same clock (TIME is gettimeofday, truncated to the microsecond), so the
// instant at which a store recorded an admission lies in its interval. A
// violation is certain when the intervals alone prove it, whatever the
// instants inside them were.

// Interval is one admission as its caller saw it: sent at Sent, answered
// at Replied (ns since the Unix epoch, one clock for every process).
type Interval struct {
	Sent, Replied int64
}

// usMargin covers the truncation of both ends of a span to whole
// microseconds, as Redis's TIME truncates.
const usMargin = int64(time.Microsecond)

// byReply sorts admissions by the time their answers came back.
func byReply(adm []Interval) {
	slices.SortFunc(adm, func(a, b Interval) int {
		switch {
		case a.Replied < b.Replied:
			return -1
		case a.Replied > b.Replied:
			return 1
		}
		return 0
	})
}

// Overage is a certain over-admission: the admission answered at At
// completed a set of admissions that the bound could not have allowed;
// Excess is how many more than it allows.
type Overage struct {
	At     int64
	Excess int64
}

// SlidingOver returns the certain violations of "at most limit admissions
// in any window of length window" (a window is half-open, (T-window, T]):
// for each admission j, the admissions answered no later than j and sent
// after j's answer less window lie, all of them, in a span shorter than
// window, so in one window; when they are more than limit, the excess is
// certain. adm must be sorted by Replied (SortAdmissions). A minimum gap G
// is SlidingOver with limit 1 and window G.
func SlidingOver(adm []Interval, limit int64, window time.Duration) []Overage {
	var out []Overage
	w := int64(window)
	left := 0
	for j := range adm {
		from := adm[j].Replied - w + usMargin // sent after this: inside
		for left < j && adm[left].Replied <= from {
			left++ // sent before its reply: outside, for this j and later
		}
		var n int64
		for i := left; i < len(adm) && adm[i].Replied <= adm[j].Replied; i++ {
			if adm[i].Sent > from {
				n++
			}
		}
		if n > limit {
			out = append(out, Overage{At: adm[j].Replied, Excess: n - limit})
		}
	}
	return out
}

// BucketOver returns the certain violations of a token bucket of burst
// units refilled one unit per interval (GCRA with cost 1): n admissions
// made between instants t1 and tn need n <= burst + (tn - t1) / interval.
// For each admission j and each earlier send time a within horizon of j's
// answer, the admissions sent from a and answered by j lie in
// [a, reply_j]; when they are more than that span allows, the excess is
// certain. adm must be sorted by Replied.
func BucketOver(adm []Interval, burst int64, interval, horizon time.Duration) []Overage {
	var out []Overage
	tau := int64(interval)
	left := 0
	var sends []int64
	for j := range adm {
		end := adm[j].Replied
		for left < j && adm[left].Replied < end-int64(horizon) {
			left++
		}
		sends = sends[:0]
		for i := left; i < len(adm) && adm[i].Replied <= end; i++ {
			if adm[i].Sent >= end-int64(horizon) {
				sends = append(sends, adm[i].Sent)
			}
		}
		slices.Sort(sends)
		var worst int64
		for k := len(sends) - 1; k >= 0; k-- {
			n := int64(len(sends) - k) // sent at sends[k] or later
			span := end - sends[k] + usMargin
			if e := n - burst - span/tau; e > worst {
				worst = e
			}
		}
		if worst > 0 {
			out = append(out, Overage{At: end, Excess: worst})
		}
	}
	return out
}

// SortAdmissions sorts adm by Replied, as SlidingOver, BucketOver and
// Missing need.
func SortAdmissions(adm []Interval) { byReply(adm) }

// Look is one reading of a window's count: the store said it Held that
// many units at an instant between Sent and Replied.
type Look struct {
	Sent, Replied int64
	Held          int64
}

// Missing returns how many admissions the window certainly held at the
// look's instant and the store did not count: those sent after the look's
// reply less window and answered before the look was sent. A positive
// result is a lower bound on the admissions the store lost; an admission
// whose answer was lost but which was recorded only lowers it. adm must be
// sorted by Replied.
func Missing(adm []Interval, window time.Duration, l Look) int64 {
	from := l.Replied - int64(window) + usMargin
	hi, _ := slices.BinarySearchFunc(adm, l.Sent+1, func(a Interval, t int64) int {
		if a.Replied < t {
			return -1
		}
		return 1
	})
	var n int64
	for i := hi - 1; i >= 0 && adm[i].Replied > from; i-- {
		if adm[i].Sent > from {
			n++
		}
	}
	return n - l.Held
}
