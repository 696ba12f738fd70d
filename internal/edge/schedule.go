package edge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/outage"
)

// ErrUnknownSchedule reports a schedule name that is not configured.
var ErrUnknownSchedule = errors.New("sluice: unknown schedule")

// Reserved is the answer to a reservation or a cancellation at the edge,
// for a protocol to render.
type Reserved struct {
	// Kind is Allowed when the store answered, or the failure policy did
	// (Reservation.Degraded); BadInput for a request that cannot be
	// reserved as sent (Err, which Classify knows); Failed when the
	// Limiter failed otherwise; Unavailable for a cancellation the store
	// failed (the reservation may still be held).
	Kind Kind

	// Schedule is the schedule reserved on; nil when there is none.
	Schedule *sluice.Schedule

	// Reservation is the reservation's answer; Cancelled a
	// cancellation's.
	Reservation sluice.Reservation
	Cancelled   bool

	Err error
}

// Schedule returns the schedule named name when attrs are valid input for
// it, else the error for bad input.
func (s *Set[R]) Schedule(name string, attrs map[string]string) (*sluice.Schedule, error) {
	sc := s.schedules[name]
	if sc == nil {
		return nil, fmt.Errorf("%w: %q; the configured schedules are %q", ErrUnknownSchedule, name, s.scheds)
	}
	if _, err := CheckAttributes(attrs, sc.By); err != nil {
		return nil, err
	}
	return sc, nil
}

// Reserve reserves cost units of the schedule named name for attrs
// (sluice.Limiter.Reserve), reporting a store failure the failure policy
// answered, or the store answering, to the outage reporter.
func (s *Set[R]) Reserve(ctx context.Context, name string, attrs map[string]string, cost int64, c Call) Reserved {
	if err := CheckCost(cost); err != nil {
		return Reserved{Kind: BadInput, Err: err}
	}
	sc, err := s.Schedule(name, attrs)
	if err != nil {
		return Reserved{Kind: BadInput, Err: err}
	}
	res, err := s.lim.Reserve(ctx, sc, attrs, cost)
	out := Reserved{Kind: Allowed, Schedule: sc, Reservation: res, Err: err}
	if _, bad := Classify(err); bad {
		out.Kind = BadInput
		return out
	}
	switch {
	case err == nil:
		s.log.Outage.Answered(ctx)
	case !res.Degraded:
		logAttrs(ctx, s.log.Logger, slog.LevelError, s.log.ReserveFailed, c.Tag, slog.String("schedule", sc.Name), slog.Any("err", err))
		out.Kind = Failed
	case s.log.ReserveStoreFailed != "":
		s.log.Outage.Failed(ctx, outage.Failure{Msg: s.log.ReserveStoreFailed, Tag: c.Tag, Kind: outage.Schedule, Name: sc.Name, Err: err,
			Attrs: []slog.Attr{slog.Bool("ok", res.OK)}})
	}
	return out
}

// Cancel cancels the reservation id of the schedule named name for attrs
// (sluice.Limiter.Cancel), reporting a store failure, or the store
// answering, to the outage reporter.
func (s *Set[R]) Cancel(ctx context.Context, name string, attrs map[string]string, id string, c Call) Reserved {
	sc, err := s.Schedule(name, attrs)
	if err != nil {
		return Reserved{Kind: BadInput, Err: err}
	}
	ok, err := s.lim.Cancel(ctx, sc, attrs, id)
	out := Reserved{Kind: Allowed, Schedule: sc, Cancelled: ok, Err: err}
	switch _, bad := Classify(err); {
	case err == nil:
		if id != "" { // an empty id is not sent to the store
			s.log.Outage.Answered(ctx)
		}
	case bad:
		out.Kind = BadInput
	default:
		out.Kind = Unavailable
		if s.log.CancelStoreFailed != "" {
			s.log.Outage.Failed(ctx, outage.Failure{Msg: s.log.CancelStoreFailed, Tag: c.Tag, Kind: outage.Schedule, Name: sc.Name, Err: err})
		}
	}
	return out
}
