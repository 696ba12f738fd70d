package soak

import (
	"slices"
	"time"
)

// The lease checker, like the decision checker, knows nothing of sluice:
// it sees each lease call's send and reply times (one clock for every
// process and for Redis, whose TIME is the store's clock) and its answer.
// The store acted on a call at some instant between its send and its
// reply, or, for a call that failed, at an unknown instant or never.
//
// For a lease granted at store time T with lease time D:
//
//   - it is certainly held from the acquire's reply until its holder sent
//     the release or settle, or until the acquire's send + D (T + D, its
//     expiry, is no earlier), whichever comes first;
//   - it is possibly held from the acquire's send until the reply of the
//     release or settle that answered, or, when none did, until the
//     acquire's reply + D (T + D is no later).
//
// An acquire that failed may have taken a lease all the same, when its
// server ran it (a frozen server runs it when it wakes): it is possibly
// held from its send until D after the later of its reply and the end of
// the fault it was sent in.

// Lease is one lease's calls: its acquire, and the release or settle its
// holder sent, if any.
type Lease struct {
	Acquire LeaseCall
	End     *LeaseCall
}

// Leases pairs calls into leases, in the order of their acquires' sends:
// each acquire with the release or settle of the same lease.
func Leases(calls []LeaseCall) []Lease {
	ends := map[uint64]*LeaseCall{}
	for i := range calls {
		if calls[i].Op != OpAcquire {
			ends[calls[i].Lease] = &calls[i]
		}
	}
	var out []Lease
	for _, c := range calls {
		if c.Op == OpAcquire {
			out = append(out, Lease{Acquire: c, End: ends[c.Lease]})
		}
	}
	slices.SortFunc(out, func(a, b Lease) int { return cmpInt(a.Acquire.Sent, b.Acquire.Sent) })
	return out
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Certain returns the span in which l is certainly held (from <= to
// when it is never certainly held).
func (l Lease) Certain(ttl time.Duration) (from, to int64) {
	if l.Acquire.Answer != Granted {
		return 0, 0
	}
	from, to = l.Acquire.Replied, l.Acquire.Sent+int64(ttl)-usMargin
	if l.End != nil {
		to = min(to, l.End.Sent)
	}
	return from, to
}

// Possible returns the span in which l is possibly held; late is the
// latest instant a failed acquire sent at its send may have run (its
// reply, or the end of the fault it was sent in). from >= to when it is
// never held.
func (l Lease) Possible(ttl time.Duration, late int64) (from, to int64) {
	a := l.Acquire
	switch a.Answer {
	case Granted:
		if l.End != nil && l.End.Answer != CallFailed {
			return a.Sent, l.End.Replied
		}
		return a.Sent, a.Replied + int64(ttl) + usMargin
	case CallFailed:
		return a.Sent, max(a.Replied, late) + int64(ttl) + usMargin
	}
	return 0, 0
}

// OverSlots returns the instants at which more than slots leases of one
// window were certainly held: each acquire reply that brought the count
// above slots.
func OverSlots(leases []Lease, slots int, ttl time.Duration) []int64 {
	type event struct {
		at    int64
		delta int
	}
	var ev []event
	for _, l := range leases {
		if from, to := l.Certain(ttl); from < to {
			ev = append(ev, event{from, 1}, event{to, -1})
		}
	}
	// Ends before starts at one instant: a slot released as another is
	// taken is not two held.
	slices.SortFunc(ev, func(a, b event) int {
		if c := cmpInt(a.at, b.at); c != 0 {
			return c
		}
		return a.delta - b.delta
	})
	var out []int64
	n := 0
	for _, e := range ev {
		n += e.delta
		if e.delta > 0 && n > slots {
			out = append(out, e.at)
		}
	}
	return out
}

// HeldByNobody returns the denials for the concurrency rule (DeniedSlots)
// answered while fewer than slots leases of the window were possibly held
// at any instant from the denial's send to its reply: a slot held by
// nobody, after every lease that may have held it has expired. late gives
// a failed acquire's latest run (see Possible). It returns the denials'
// replies.
func HeldByNobody(leases []Lease, slots int, ttl time.Duration, late func(sent, replied int64) int64) []int64 {
	var froms, tos []int64
	for _, l := range leases {
		if from, to := l.Possible(ttl, late(l.Acquire.Sent, l.Acquire.Replied)); from < to {
			froms, tos = append(froms, from), append(tos, to)
		}
	}
	slices.Sort(froms)
	slices.Sort(tos)
	var out []int64
	for _, l := range leases {
		a := l.Acquire
		if a.Answer != DeniedSlots {
			continue
		}
		// The leases possibly held at some instant of [Sent, Replied]:
		// begun before the reply, not ended by the send. That is no fewer
		// than those held at any one instant of it.
		begun, _ := slices.BinarySearch(froms, a.Replied+1)
		ended, _ := slices.BinarySearch(tos, a.Sent+1)
		if begun-ended < slots {
			out = append(out, a.Replied)
		}
	}
	return out
}

// SettleMissing returns how many units the settle window (of length
// window) certainly held at the look's instant and the store did not
// count. The window certainly holds each lease granted before the look
// was sent and sent after the look's reply less window (its entry,
// recorded at its acquire, has not left it): the settled cost when a
// settle answered Held before the look was sent, else the estimate (a
// release keeps it; a settle not answered, or answered later, leaves the
// estimate or the cost, the smaller being the estimate). A positive
// result is a lower bound on what the store lost: a settle it
// acknowledged, or an acquire it granted. leases must be sorted by their
// acquire's send (Leases).
func SettleMissing(leases []Lease, window time.Duration, l Look) int64 {
	from := l.Replied - int64(window) + usMargin
	lo, _ := slices.BinarySearchFunc(leases, from+1, func(x Lease, t int64) int { return cmpInt(x.Acquire.Sent, t) })
	var n int64
	for _, x := range leases[lo:] {
		a := x.Acquire
		if a.Sent >= l.Sent {
			break
		}
		if a.Answer != Granted || a.Replied >= l.Sent {
			continue
		}
		cost := int64(a.Cost)
		if e := x.End; e != nil && e.Op == OpSettle {
			if e.Answer == Held && e.Replied < l.Sent {
				cost = int64(e.Cost)
			} else if e.Answer != NotHeld {
				cost = min(cost, int64(e.Cost))
			}
		}
		n += cost
	}
	return n - l.Held
}
