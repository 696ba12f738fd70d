package sluice

import (
	"context"
	"fmt"
	"time"
)

// MaxReservation is the most time one reservation may take on its schedule:
// cost times the interval. A larger cost is an error (ErrInvalidCost), as
// the slots it would hold are more than a store can represent exactly.
const MaxReservation = 366 * 24 * time.Hour

// ReserveRequest is one call to a store's Reserve: a schedule, the
// attributes that select its queue, a cost and the longest delay accepted.
type ReserveRequest struct {
	Schedule   *Schedule
	Attributes map[string]string

	// Cost is how many intervals the reservation takes: the slot after a
	// reservation of cost N at slot S is S + N*Interval.
	Cost int64

	// MaxDelay is the longest delay this reservation accepts: the
	// schedule's MaxDelay, or less (Wait lowers it to the time left before
	// the context's deadline). Stores compare the delay with this field,
	// not with Schedule.MaxDelay.
	MaxDelay time.Duration
}

// Validate reports why r cannot be reserved: an invalid schedule, a cost
// below 1 or taking more than MaxReservation, a negative MaxDelay, or a
// missing attribute. A request that fails validation must change no state.
func (r *ReserveRequest) Validate() error {
	s := r.Schedule
	if err := s.Validate(); err != nil {
		return err
	}
	if r.Cost < 1 {
		return fmt.Errorf("%w: schedule %q got cost %d", ErrInvalidCost, s.Name, r.Cost)
	}
	if iv := s.Interval(); r.Cost > int64(MaxReservation/iv) {
		return fmt.Errorf("%w: schedule %q: cost %d at %v per event takes more than %v",
			ErrInvalidCost, s.Name, r.Cost, iv, MaxReservation)
	}
	if r.MaxDelay < 0 {
		return fmt.Errorf("%w: schedule %q: request max delay %v is negative", ErrInvalidSchedule, s.Name, r.MaxDelay)
	}
	return checkAttributes(s, r.Attributes)
}

// CancelRequest is one call to a store's Cancel: the reservation ID on the
// queue that the schedule and attributes select.
type CancelRequest struct {
	Schedule   *Schedule
	Attributes map[string]string
	ID         string
}

// Validate reports why r cannot be cancelled: an invalid schedule or a
// missing attribute.
func (r *CancelRequest) Validate() error {
	if err := r.Schedule.Validate(); err != nil {
		return err
	}
	return checkAttributes(r.Schedule, r.Attributes)
}

func checkAttributes(s *Schedule, attrs map[string]string) error {
	for _, a := range s.By {
		if _, ok := attrs[a]; !ok {
			return fmt.Errorf("%w: schedule %q needs attribute %q; pass it in the request's attributes",
				ErrMissingAttribute, s.Name, a)
		}
	}
	return nil
}

// Scheduler keeps the queues of schedules: the part of the Store contract
// behind Limiter.Reserve, Cancel and Wait.
//
// Every store follows the same rules, at the store's time T, on the queue
// that the schedule's name and By attribute values select:
//
//   - A reservation holds the interval [slot, slot + Cost*Interval). The next
//     free slot is the end of the latest reservation held, or T if that is
//     earlier: slot = max(T, end). Unused time is not saved up: a schedule
//     idle for a minute starts again at T, with no burst.
//   - A reservation is pending while its slot has not passed (slot >= T).
//     The queue length is the number of pending reservations.
//   - A reservation is rejected, changing nothing, when slot - T exceeds
//     req.MaxDelay (ReasonDelay), or else when MaxQueue > 0 and MaxQueue
//     reservations are pending (ReasonQueue).
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
// Requests have been validated by the caller.
type Scheduler interface {
	// Reserve reserves the next free slot of the request's queue, or
	// rejects the request.
	Reserve(ctx context.Context, req *ReserveRequest) (Reservation, error)

	// Cancel removes a pending reservation and reports whether it did.
	Cancel(ctx context.Context, req *CancelRequest) (bool, error)
}

// Reserve reserves the next free slot of s's queue for attrs: a slot cost
// intervals long, at most s.MaxDelay away. It does not wait: the caller goes
// after Reservation.Delay, or cancels. A rejected reservation (OK false)
// changes nothing and says why in Reason.
//
// Bad input (an invalid schedule, cost, or missing attribute) returns an
// error wrapping one of the sentinel errors. Store calls follow the failure
// policy of decisions (Config.Timeout, Breaker, Fallback, OnError): a store
// failure returns the error together with a Degraded reservation, from the
// fallback store when it keeps schedules (at the schedule's rate divided by
// FallbackShare), otherwise by OnError: with Allow it is OK with no delay,
// so a caller may log the error and go at once.
func (l *Limiter) Reserve(ctx context.Context, s *Schedule, attrs map[string]string, cost int64) (Reservation, error) {
	req := &ReserveRequest{Schedule: s, Attributes: attrs, Cost: cost}
	if s != nil {
		req.MaxDelay = s.MaxDelay
	}
	return l.reserve(ctx, req)
}

func (l *Limiter) reserve(ctx context.Context, req *ReserveRequest) (Reservation, error) {
	if err := req.Validate(); err != nil {
		return Reservation{}, err
	}
	sc, err := l.scheduler()
	if err != nil {
		return Reservation{}, err
	}
	var r Reservation
	failed, err := l.call(ctx, func(ctx context.Context) (err error) {
		r, err = sc.Reserve(ctx, req)
		return err
	})
	if failed {
		return l.degradedReservation(ctx, req, err)
	}
	if err != nil {
		return Reservation{}, err
	}
	return r, nil
}

// degradedReservation answers req without the store: from the fallback
// store if it keeps schedules, at the schedule's rate divided by
// Config.FallbackShare, or by Config.OnError. It returns cause with the
// reservation.
func (l *Limiter) degradedReservation(ctx context.Context, req *ReserveRequest, cause error) (Reservation, error) {
	if fb, ok := l.cfg.Fallback.(Scheduler); ok && ctx.Err() == nil {
		freq := *req
		freq.Schedule = l.fallbackSchedule(req.Schedule)
		if err := freq.Validate(); err == nil {
			if r, err := fb.Reserve(ctx, &freq); err == nil {
				r.Degraded = true
				return r, cause
			}
		}
	}
	return Reservation{OK: l.cfg.OnError == Allow, Degraded: true}, cause
}

// fallbackSchedule returns s with its rate divided by the fallback share:
// the period multiplied, so that the processes sharing the schedule
// together keep about its rate.
func (l *Limiter) fallbackSchedule(s *Schedule) *Schedule {
	share := time.Duration(l.cfg.FallbackShare)
	if share <= 1 {
		return s
	}
	q := *s
	q.Rate.Per *= share
	return &q
}

// Cancel gives back the pending reservation id of s's queue for attrs, so
// that later reservations may take its place, and reports whether it did.
// Cancelling a reservation twice, after its slot has passed, or with an
// unknown or empty id changes nothing and reports false.
//
// Only the latest reservation's slot is reused: cancelling it moves the
// next free slot back; cancelling an earlier one leaves a hole that later
// reservations do not fill (see Scheduler).
//
// The store call has Config.Timeout's deadline. When the store fails, or
// the circuit is open, and the fallback store keeps schedules, the
// reservation may have come from the fallback: Cancel is tried there, and
// its result is returned with the store's error.
func (l *Limiter) Cancel(ctx context.Context, s *Schedule, attrs map[string]string, id string) (bool, error) {
	req := &CancelRequest{Schedule: s, Attributes: attrs, ID: id}
	if err := req.Validate(); err != nil {
		return false, err
	}
	if id == "" {
		return false, nil
	}
	sc, err := l.scheduler()
	if err != nil {
		return false, err
	}
	var ok bool
	failed, err := l.call(ctx, func(ctx context.Context) (err error) {
		ok, err = sc.Cancel(ctx, req)
		return err
	})
	if !failed {
		return ok && err == nil, err
	}
	if fb, ok := l.cfg.Fallback.(Scheduler); ok {
		freq := *req
		freq.Schedule = l.fallbackSchedule(s)
		if ok, ferr := fb.Cancel(ctx, &freq); ferr == nil {
			return ok, err
		}
	}
	return false, err
}

// scheduler returns the store's Scheduler.
func (l *Limiter) scheduler() (Scheduler, error) {
	sc, ok := l.store.(Scheduler)
	if !ok {
		return nil, fmt.Errorf("sluice: store %T keeps no schedules", l.store)
	}
	return sc, nil
}
