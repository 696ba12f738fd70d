package sluice

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicerate/sluice/store"
)

// MaxReservation is the most time one reservation may take on its schedule:
// cost times the interval. A larger cost is an error (ErrInvalidCost), as
// the slots it would hold are more than a store can represent exactly, and
// so is one above MaxCost.
const MaxReservation = 366 * 24 * time.Hour

// reserveRequest returns the store request of a reservation of cost on s's
// queue for attrs, accepting a delay of at most maxDelay, or why it cannot
// be made: an invalid schedule, a cost below 1 or taking more than
// MaxReservation, a negative delay, or a missing attribute.
func reserveRequest(s *Schedule, attrs map[string]string, cost int64, maxDelay time.Duration) (*store.ReserveRequest, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	if cost < 1 || cost > MaxCost {
		return nil, costRange(fmt.Sprintf("schedule %q", s.Name), cost, 1)
	}
	iv := s.Interval()
	if cost > int64(MaxReservation/iv) {
		return nil, fmt.Errorf("%w: schedule %q: cost %d at %v per event takes more than %v",
			ErrInvalidCost, s.Name, cost, iv, MaxReservation)
	}
	if maxDelay < 0 {
		return nil, fmt.Errorf("%w: schedule %q: request max delay %v is negative", ErrInvalidSchedule, s.Name, maxDelay)
	}
	q, err := queueOf(s, attrs)
	if err != nil {
		return nil, err
	}
	return &store.ReserveRequest{Queue: q, Interval: iv, Cost: cost, MaxDelay: maxDelay, MaxQueue: s.MaxQueue}, nil
}

// queueOf returns the queue of s for attrs, or why there is none: an
// invalid schedule or a missing attribute.
func queueOf(s *Schedule, attrs map[string]string) (store.Queue, error) {
	if err := s.Validate(); err != nil {
		return store.Queue{}, err
	}
	q := store.Queue{Schedule: s.Name, Values: make([]string, len(s.By))}
	for i, a := range s.By {
		v, ok := attrs[a]
		if !ok {
			return store.Queue{}, &MissingAttributeError{Schedule: s.Name, Attribute: a}
		}
		q.Values[i] = v
	}
	return q, nil
}

// Reserve reserves the next free slot of s's queue for attrs: a slot cost
// intervals long, at most s.MaxDelay away. It does not wait: the caller goes
// after Reservation.Delay, or cancels. A rejected reservation (OK false)
// changes nothing and says why in Reason.
//
// Cost is 1 to MaxCost, and takes at most MaxReservation. Bad input (an
// invalid schedule, cost, or missing attribute) returns an error wrapping
// one of the sentinel errors. Store calls follow the failure
// policy of decisions (Config.Timeout, Breaker, Fallback, OnError): a store
// failure returns the error together with a Degraded reservation, from the
// fallback store when it keeps schedules (at the schedule's rate divided by
// FallbackShare), otherwise by OnError: with Allow it is OK with no delay,
// so a caller may log the error and go at once.
func (l *Limiter) Reserve(ctx context.Context, s *Schedule, attrs map[string]string, cost int64) (Reservation, error) {
	var maxDelay time.Duration
	if s != nil {
		maxDelay = s.MaxDelay
	}
	req, err := reserveRequest(s, attrs, cost, maxDelay)
	if err != nil {
		return Reservation{}, err
	}
	return l.reserve(ctx, req)
}

func (l *Limiter) reserve(ctx context.Context, req *store.ReserveRequest) (Reservation, error) {
	sc, err := l.scheduler()
	if err != nil {
		return Reservation{}, err
	}
	return guard(ctx, l, l.queueBreaker(req.Queue), func(ctx context.Context) (Reservation, error) {
		r, err := sc.Reserve(ctx, req)
		return reservationOf(r), err
	}, func(ctx context.Context, _ error) Reservation {
		return l.degradedReservation(ctx, req)
	})
}

// reasons maps a store's reasons to a Reservation's.
var reasons = [...]Reason{store.ReasonNone: "", store.ReasonDelay: ReasonDelay, store.ReasonQueue: ReasonQueue}

func reservationOf(r store.Reservation) Reservation {
	return Reservation{OK: r.OK, Delay: r.Delay, Slot: r.Slot, ID: r.ID, Queue: r.Queue, Reason: reasons[r.Reason]}
}

// degradedReservation answers req without the store: from the fallback
// store if it keeps schedules, at the schedule's rate divided by
// Config.FallbackShare, or by Config.OnError.
func (l *Limiter) degradedReservation(ctx context.Context, req *store.ReserveRequest) Reservation {
	if fb, ok := l.cfg.Fallback.(store.Scheduler); ok && ctx.Err() == nil {
		if r, err := fb.Reserve(ctx, l.fallbackReserve(req)); err == nil {
			res := reservationOf(r)
			res.Degraded = true
			return res
		}
	}
	return Reservation{OK: l.cfg.OnError == Allow, Degraded: true}
}

// fallbackReserve returns req with its schedule's rate divided by the
// fallback share: the interval multiplied, so that the processes sharing
// the schedule together keep about its rate.
func (l *Limiter) fallbackReserve(req *store.ReserveRequest) *store.ReserveRequest {
	freq := *req
	if share := time.Duration(l.cfg.FallbackShare); share > 1 {
		freq.Interval *= share
	}
	return &freq
}

// Cancel gives back the pending reservation id of s's queue for attrs, so
// that later reservations may take its place, and reports whether it did.
// Cancelling a reservation twice, after its slot has passed, or with an
// unknown or empty id changes nothing and reports false.
//
// Only the latest reservation's slot is reused: cancelling it moves the
// next free slot back; cancelling an earlier one leaves a hole that later
// reservations do not fill (see store.Scheduler).
//
// The store call has Config.Timeout's deadline. When the store fails, or
// the circuit is open, and the fallback store keeps schedules, the
// reservation may have come from the fallback: Cancel is tried there, and
// its result is returned with the store's error.
func (l *Limiter) Cancel(ctx context.Context, s *Schedule, attrs map[string]string, id string) (bool, error) {
	q, err := queueOf(s, attrs)
	if err != nil {
		return false, err
	}
	if id == "" {
		return false, nil
	}
	sc, err := l.scheduler()
	if err != nil {
		return false, err
	}
	req := &store.CancelRequest{Queue: q, ID: id}
	return guard(ctx, l, l.queueBreaker(q), func(ctx context.Context) (bool, error) {
		return sc.Cancel(ctx, req)
	}, func(ctx context.Context, _ error) bool {
		if fb, ok := l.cfg.Fallback.(store.Scheduler); ok {
			if ok, err := fb.Cancel(ctx, req); err == nil {
				return ok
			}
		}
		return false
	})
}

// scheduler returns the store's Scheduler.
func (l *Limiter) scheduler() (store.Scheduler, error) {
	sc, ok := l.store.(store.Scheduler)
	if !ok {
		return nil, fmt.Errorf("sluice: store %T keeps no schedules", l.store)
	}
	return sc, nil
}
