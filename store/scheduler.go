package store

import (
	"context"
	"time"
)

// Scheduler keeps the leaky-bucket queues of schedules: the part of a store
// behind Limiter.Reserve, Cancel and Wait.
//
// Every store follows the same rules, at the store's time T, on the queue
// that the schedule's name and values select:
//
//   - A reservation holds the interval [slot, slot + Cost*Interval). The next
//     free slot is the end of the latest reservation held, or T if that is
//     earlier: slot = max(T, end). Unused time is not saved up: a schedule
//     idle for a minute starts again at T, with no burst.
//   - A reservation is pending while its slot has not passed (slot >= T).
//     The queue length is the number of reservations that hold [S, end)
//     with end > T: the pending ones and the one in progress.
//   - A reservation is rejected, changing nothing, when slot - T exceeds
//     MaxDelay (ReasonDelay), or else when MaxQueue > 0 and the queue
//     length is MaxQueue (ReasonQueue).
//   - Cancel removes a pending reservation and reports true; for an ID that
//     is unknown, already cancelled, or whose slot has passed, it changes
//     nothing and reports false. Later reservations keep their slots: a hole
//     left in the middle of the queue is not filled, but cancelling the
//     latest reservation moves the next free slot back to the end of the
//     latest one still held (which may have passed), so the rate holds
//     between reservations that were not cancelled.
//   - A queue is dropped once the end of its latest reservation has passed:
//     an idle schedule holds nothing.
//
// Requests have been validated by the caller: Interval at least 1µs, Cost
// at least 1 with Cost*Interval representable, MaxDelay and MaxQueue at
// least 0.
type Scheduler interface {
	// Reserve reserves the next free slot of the request's queue, or
	// rejects the request.
	Reserve(ctx context.Context, req *ReserveRequest) (Reservation, error)

	// Cancel removes a pending reservation and reports whether it did.
	Cancel(ctx context.Context, req *CancelRequest) (bool, error)
}

// Queue names a schedule's queue: the schedule and the values of its By
// attributes.
type Queue struct {
	Schedule string
	Values   []string
}

// ReserveRequest is one call to Reserve.
type ReserveRequest struct {
	Queue Queue

	// Interval is the time one unit of cost holds the queue.
	Interval time.Duration

	// Cost is how many intervals the reservation takes.
	Cost int64

	// MaxDelay is the longest delay accepted; MaxQueue, when above 0, the
	// longest queue (pending reservations and the one in progress).
	MaxDelay time.Duration
	MaxQueue int64
}

// CancelRequest is one call to Cancel.
type CancelRequest struct {
	Queue Queue
	ID    string
}

// Reservation is what Reserve gives: a slot, or the reason there is none
// (the Limiter reports it as a sluice.Reservation).
type Reservation struct {
	OK     bool
	Slot   time.Time     // the slot given, or that would have been
	Delay  time.Duration // Slot minus the store's time
	ID     string        // for Cancel; empty when not OK
	Queue  int64         // the queue length, this one included when OK
	Reason Reason
}

// Reason says why a reservation was rejected.
type Reason uint8

const (
	ReasonNone  Reason = iota
	ReasonDelay        // the slot is further than MaxDelay
	ReasonQueue        // the queue length is MaxQueue
)
