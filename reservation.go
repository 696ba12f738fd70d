package sluice

import "time"

// Reason says why a reservation was rejected.
type Reason string

// Reasons for a rejected reservation.
const (
	// ReasonDelay: the slot is further away than the schedule's MaxDelay.
	ReasonDelay Reason = "delay"

	// ReasonQueue: the schedule's MaxQueue reservations are already
	// pending.
	ReasonQueue Reason = "queue"

	// ReasonDeadline: Wait's context ends before the slot (only from Wait;
	// the slot fits the schedule's MaxDelay).
	ReasonDeadline Reason = "deadline"
)

// Reservation is the outcome of reserving a slot on a schedule. A rejection
// is a Reservation with OK false, not an error, and records nothing.
//
// Example: on a schedule of 4/s with MaxDelay 1s, eight reservations made
// at one instant T get OK with Delay 0, 250ms, 500ms, 750ms and 1s (slots T
// to T+1s, Queue 1 to 5); the sixth to eighth get OK false, Reason "delay",
// Delay 1.25s and Queue 5, and leave the schedule as it was.
type Reservation struct {
	// OK reports whether the slot was reserved.
	OK bool

	// Delay is how long to wait before going: Slot minus the store's time
	// when the reservation was made. For a rejection, the delay the
	// reservation would have had.
	Delay time.Duration

	// Slot is the time at which the reservation may go, on the store's
	// clock (Redis's TIME for the Redis store). For a rejection, the slot it
	// would have had.
	Slot time.Time

	// ID identifies the reservation for Cancel; empty for a rejection. IDs
	// are unique within a schedule's queue and opaque.
	ID string

	// Queue is the queue's length: the reservations that hold the schedule
	// at the store's time, those waiting for their slot and the one whose
	// slot has come and whose time (cost × interval) has not ended,
	// including this one when OK: its place in line. Reservations a
	// moment apart on a 4/s schedule get Queue 1, 2, 3... as their Delay
	// grows by 250ms.
	Queue int64

	// Reason says why the reservation was rejected; empty when OK.
	Reason Reason

	// Degraded reports that the store failed and OK was decided by the
	// Limiter's failure policy instead of the store: with Allow, OK is true
	// and Delay is 0; with Deny, OK is false.
	Degraded bool
}
