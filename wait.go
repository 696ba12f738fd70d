package sluice

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// cancelTimeout bounds the Cancel that Wait makes after its context ended.
const cancelTimeout = 5 * time.Second

// Wait reserves a slot on s's queue for attrs, as Reserve does, and sleeps
// until the slot. It returns the reservation and nil when the slot has come.
//
// Wait never sleeps for nothing:
//   - when the context has a deadline, Wait reserves only a slot before it
//     (the store rejects a later one, atomically, so nothing is reserved):
//     it returns an error wrapping ErrDeadlineBeforeSlot at once, with the
//     rejected reservation (Reason "deadline") telling how far the slot was;
//     and when the store's reply arrives so late that the slot it reserved
//     now falls after the deadline, Wait cancels it and fails the same way,
//     at once;
//   - when the schedule rejects the reservation (MaxDelay, MaxQueue), it
//     returns the rejected reservation and an error wrapping ErrRejected;
//   - when the context ends while Wait sleeps, it cancels the reservation,
//     so that the slot can be used by another, and returns the context's
//     error (joined with Cancel's error if that failed).
//
// Bad input and store failures are handled as by Reserve. A Degraded
// reservation is returned with the store's error: at once when it is not
// OK or has no delay (OnError), after sleeping until its slot when it came
// from the fallback store.
//
// Wait sleeps on Config.Clock.
func (l *Limiter) Wait(ctx context.Context, s *Schedule, attrs map[string]string, cost int64) (Reservation, error) {
	var maxDelay time.Duration
	if s != nil {
		maxDelay = s.MaxDelay
	}
	req, err := reserveRequest(s, attrs, cost, maxDelay)
	if err != nil {
		return Reservation{}, err
	}
	if err := ctx.Err(); err != nil {
		return Reservation{}, err
	}
	clock := l.clock()
	bounded := false
	if deadline, ok := ctx.Deadline(); ok {
		left := deadline.Sub(clock.Now())
		if left <= 0 {
			return Reservation{Reason: ReasonDeadline}, fmt.Errorf("%w: schedule %q: the deadline has passed",
				ErrDeadlineBeforeSlot, s.Name)
		}
		// The store counts whole microseconds; accept only slots strictly
		// before the deadline.
		limit := (left + time.Microsecond - 1).Truncate(time.Microsecond) - time.Microsecond
		if limit < req.MaxDelay {
			req.MaxDelay, bounded = limit, true
		}
	}
	r, err := l.reserve(ctx, req)
	if err != nil && (!r.Degraded || !r.OK) {
		return r, err
	}
	// From here err is nil, or the store's error with an OK reservation
	// from the fallback store or the failure policy, which Wait keeps.
	if !r.OK {
		if bounded && r.Reason == ReasonDelay && r.Delay <= s.MaxDelay {
			r.Reason = ReasonDeadline
			return r, fmt.Errorf("%w: schedule %q: the slot is %v away, the deadline %v",
				ErrDeadlineBeforeSlot, s.Name, r.Delay, req.MaxDelay+time.Microsecond)
		}
		return r, fmt.Errorf("%w: schedule %q: reason %s, delay %v, queue %d", ErrRejected, s.Name, r.Reason, r.Delay, r.Queue)
	}
	if r.Delay <= 0 {
		return r, err
	}
	if deadline, ok := ctx.Deadline(); ok && clock.Now().Add(r.Delay).After(deadline) {
		// The store placed the slot within the deadline as it stood when
		// asked, but the call took long enough that the slot now falls
		// after it: give the slot back and say so now, rather than wait
		// for the deadline and race its timer against the slot's.
		r.OK, r.Reason = false, ReasonDeadline
		late := fmt.Errorf("%w: schedule %q: the slot is %v away, the deadline %v",
			ErrDeadlineBeforeSlot, s.Name, r.Delay, deadline.Sub(clock.Now()))
		return r, l.giveBack(ctx, s, attrs, r, errors.Join(late, err))
	}
	select {
	case <-clock.After(r.Delay):
		return r, err
	case <-ctx.Done():
	}
	if err == nil {
		return r, l.giveBack(ctx, s, attrs, r, ctx.Err())
	}
	return r, l.giveBack(ctx, s, attrs, r, errors.Join(ctx.Err(), err))
}

// giveBack cancels r, a reservation Wait will not use, and returns why
// (cause) joined with the cancellation's failure, if any. The cancellation
// runs even when ctx has ended, for at most cancelTimeout.
func (l *Limiter) giveBack(ctx context.Context, s *Schedule, attrs map[string]string, r Reservation, cause error) error {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelTimeout)
	defer cancel()
	if _, err := l.Cancel(cctx, s, attrs, r.ID); err != nil {
		return errors.Join(cause, fmt.Errorf("sluice: cancelling reservation %s of schedule %q: %w", r.ID, s.Name, err))
	}
	return cause
}
