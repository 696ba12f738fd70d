package soak

import (
	"testing"
	"time"
)

// acq returns the acquire of lease id sent at ms milliseconds that took
// lat ms and was answered a.
func acq(id uint64, sentMS, latMS int64, a LeaseAnswer) LeaseCall {
	return LeaseCall{Op: OpAcquire, Answer: a, Cost: 1, Lease: id, Sent: sentMS * ms, Replied: (sentMS + latMS) * ms}
}

// end returns the release (cost 0) or settle of lease id.
func end(id uint64, sentMS, latMS int64, a LeaseAnswer, cost uint8) LeaseCall {
	op := OpRelease
	if cost > 0 {
		op = OpSettle
	}
	return LeaseCall{Op: op, Answer: a, Cost: cost, Lease: id, Sent: sentMS * ms, Replied: (sentMS + latMS) * ms}
}

func TestOverSlots(t *testing.T) {
	const ttl = time.Second
	for _, tc := range []struct {
		name  string
		calls []LeaseCall
		want  int
	}{
		{"two held", []LeaseCall{acq(1, 0, 1, Granted), acq(2, 10, 1, Granted)}, 0},
		{"three held", []LeaseCall{acq(1, 0, 1, Granted), acq(2, 10, 1, Granted), acq(3, 20, 1, Granted)}, 1},
		// The first release was sent before the third acquire's reply.
		{"one released", []LeaseCall{acq(1, 0, 1, Granted), end(1, 15, 1, Held, 0), acq(2, 10, 1, Granted), acq(3, 20, 1, Granted)}, 0},
		// A release that failed still ends what is certain: it may have run.
		{"release failed", []LeaseCall{acq(1, 0, 1, Granted), end(1, 15, 1, CallFailed, 0), acq(2, 10, 1, Granted), acq(3, 20, 1, Granted)}, 0},
		// The first expired at its send + 1 s at the latest.
		{"one expired", []LeaseCall{acq(1, 0, 1, Granted), acq(2, 10, 1, Granted), acq(3, 1000, 1, Granted)}, 0},
		{"not yet expired", []LeaseCall{acq(1, 0, 1, Granted), acq(2, 10, 1, Granted), acq(3, 990, 1, Granted)}, 1},
		// Granted at some instant of [0, 2000]: its lease may have expired
		// before the reply.
		{"slow grant", []LeaseCall{acq(1, 0, 2000, Granted), acq(2, 1900, 1, Granted), acq(3, 1950, 1, Granted)}, 0},
		{"denied and failed hold nothing certain", []LeaseCall{acq(1, 0, 1, Granted), acq(2, 10, 1, DeniedSlots), acq(3, 20, 1, CallFailed), acq(4, 30, 1, Granted)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := len(OverSlots(Leases(tc.calls), 2, ttl)); got != tc.want {
				t.Errorf("%d moments over 2, want %d", got, tc.want)
			}
		})
	}
}

func TestHeldByNobody(t *testing.T) {
	const ttl = time.Second
	none := func(_, replied int64) int64 { return replied }
	for _, tc := range []struct {
		name  string
		calls []LeaseCall
		late  func(sent, replied int64) int64
		want  int
	}{
		{"full", []LeaseCall{acq(1, 0, 1, Granted), acq(2, 10, 1, Granted), acq(3, 20, 1, DeniedSlots)}, none, 0},
		{"one free", []LeaseCall{acq(1, 0, 1, Granted), acq(3, 20, 1, DeniedSlots)}, none, 1},
		// Released, answered after the denial was sent: it may have
		// been held when the store decided.
		{"released meanwhile", []LeaseCall{acq(1, 0, 1, Granted), acq(2, 10, 1, Granted), end(2, 15, 10, Held, 0), acq(3, 20, 1, DeniedSlots)}, none, 0},
		{"released before", []LeaseCall{acq(1, 0, 1, Granted), acq(2, 10, 1, Granted), end(2, 15, 1, Held, 0), acq(3, 20, 1, DeniedSlots)}, none, 1},
		// Never released: possibly held until its reply + 1 s.
		{"abandoned, within its lease", []LeaseCall{acq(1, 0, 1, Granted), acq(2, 10, 1, Granted), acq(3, 995, 1, DeniedSlots)}, none, 0},
		{"abandoned, past its lease", []LeaseCall{acq(1, 0, 1, Granted), acq(2, 10, 1, Granted), acq(3, 1020, 1, DeniedSlots)}, none, 1},
		// A release that failed may not have run.
		{"release failed", []LeaseCall{acq(1, 0, 1, Granted), acq(2, 10, 1, Granted), end(2, 15, 1, CallFailed, 0), acq(3, 20, 1, DeniedSlots)}, none, 0},
		// A failed acquire may have run up to the fault's end, then held
		// its slot for a lease time.
		{"failed acquire", []LeaseCall{acq(1, 0, 1, CallFailed), acq(2, 10, 1, CallFailed), acq(3, 1500, 1, DeniedSlots)},
			func(_, replied int64) int64 { return max(replied, 600*ms) }, 0},
		{"failed acquire, long ago", []LeaseCall{acq(1, 0, 1, CallFailed), acq(2, 10, 1, CallFailed), acq(3, 1700, 1, DeniedSlots)},
			func(_, replied int64) int64 { return max(replied, 600*ms) }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := len(HeldByNobody(Leases(tc.calls), 2, ttl, tc.late)); got != tc.want {
				t.Errorf("%d denials held by nobody, want %d", got, tc.want)
			}
		})
	}
}

func TestSettleMissing(t *testing.T) {
	// Two leases granted, the first settled to 4 before the look.
	calls := []LeaseCall{acq(1, 0, 1, Granted), end(1, 50, 1, Held, 4), acq(2, 10, 1, Granted)}
	look := func(sentMS, held int64) Look { return Look{Sent: sentMS * ms, Replied: (sentMS + 1) * ms, Held: held} }
	for _, tc := range []struct {
		name  string
		calls []LeaseCall
		look  Look
		want  int64
	}{
		{"counted", calls, look(100, 5), 0},
		{"settle lost", calls, look(100, 2), 3},
		{"both lost", calls, look(100, 0), 5},
		// The settle answered after the look was sent: estimate or cost.
		{"settle uncertain", calls, look(51, 2), 0},
		// Settled after the lease expired: the estimate stays.
		{"settle not held", []LeaseCall{acq(1, 0, 1, Granted), end(1, 50, 1, NotHeld, 4)}, look(100, 1), 0},
		{"denied records nothing", []LeaseCall{acq(1, 0, 1, DeniedSlots)}, look(100, 0), 0},
		// The first acquired at 0: the window of 1 s before the look's
		// reply at 1001 may no longer hold it; the second, at 10, it does.
		{"left the window", calls, look(1000, 1), 0},
		{"left the window, the other lost", calls, look(1000, 0), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SettleMissing(Leases(tc.calls), time.Second, tc.look); got != tc.want {
				t.Errorf("missing %d, want %d", got, tc.want)
			}
		})
	}
}
