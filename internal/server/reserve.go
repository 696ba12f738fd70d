package server

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/edge"
	"github.com/sluicerate/sluice/internal/outage"
	"github.com/sluicerate/sluice/store"
)

// reserveRequest is the body of /v1/reserve.
type reserveRequest struct {
	Schedule   string            `json:"schedule"`
	Attributes map[string]string `json:"attributes"`
	Cost       *int64            `json:"cost"`
}

// cancelRequest is the body of /v1/cancel.
type cancelRequest struct {
	Schedule   string            `json:"schedule"`
	Attributes map[string]string `json:"attributes"`
	ID         string            `json:"id"`
}

// reservationJSON is a Reservation as the HTTP API returns it.
type reservationJSON struct {
	OK       bool   `json:"ok"`
	DelayMS  int64  `json:"delay_ms"`
	ID       string `json:"id"`
	Queue    int64  `json:"queue"`
	Reason   string `json:"reason,omitempty"`
	Degraded bool   `json:"degraded"`
}

type cancelJSON struct {
	Cancelled bool `json:"cancelled"`
}

// schedule returns the configured schedule name, or the problem of an
// unknown one.
func (st *state) schedule(name string) (*sluice.Schedule, *httplimit.Problem) {
	if s := st.cfg.Schedule(name); s != nil {
		return s, nil
	}
	if name == "" {
		return nil, badRequest("bad_request", "the request names no schedule; send an object such as %s", reserveExample)
	}
	names := make([]string, len(st.cfg.Schedules))
	for i := range st.cfg.Schedules {
		names[i] = st.cfg.Schedules[i].Name
	}
	return nil, badRequest("unknown_schedule", "%v: %q; the configured schedules are %q", sluice.ErrUnknownSchedule, name, names)
}

// scheduleInput returns the schedule named name when attrs are valid input
// for it, else the problem.
func (st *state) scheduleInput(name string, attrs map[string]string) (*sluice.Schedule, *httplimit.Problem) {
	sc, p := st.schedule(name)
	if p != nil {
		return nil, p
	}
	if _, err := edge.CheckAttributes(attrs, sc.By); err != nil {
		return nil, inputProblem(err)
	}
	return sc, nil
}

func (s *Server) handleReserve(w http.ResponseWriter, r *http.Request) {
	const api = "reserve"
	req, p := readJSON[reserveRequest](w, r, s.maxBody, reserveExample)
	if p != nil {
		s.fail(w, api, p)
		return
	}
	res, p := s.reserve(r.Context(), s.state.Load(), api, req.Schedule, req.Attributes, costOf(req.Cost))
	if p != nil {
		s.fail(w, api, p)
		return
	}
	s.ok(w, api, reservationJSON{OK: res.OK, DelayMS: ms(res.Delay), ID: res.ID, Queue: res.Queue,
		Reason: string(res.Reason), Degraded: res.Degraded})
}

// reserve reserves a slot of the schedule named name under st, counting
// and logging it.
func (s *Server) reserve(ctx context.Context, st *state, api, name string, attrs map[string]string, cost int64) (sluice.Reservation, *httplimit.Problem) {
	if err := edge.CheckCost(cost); err != nil {
		return sluice.Reservation{}, inputProblem(err)
	}
	sc, p := st.scheduleInput(name, attrs)
	if p != nil {
		return sluice.Reservation{}, p
	}
	res, err := st.lim.Reserve(ctx, sc, attrs, cost)
	if err != nil {
		if p := inputProblem(err); p != nil {
			return res, p
		}
		if !res.Degraded {
			s.log.Error("reserving", slog.String("api", api), slog.String("schedule", sc.Name), slog.Any("err", err))
			return res, &httplimit.Problem{Status: http.StatusInternalServerError, Code: "internal"}
		}
		s.outage.Failed(ctx, outage.Failure{Msg: "store failed; reservation decided by on_error", Tag: slog.String("api", api),
			Kind: outage.Schedule, Name: sc.Name, Err: err, Attrs: []slog.Attr{slog.Bool("ok", res.OK)}})
	} else {
		s.outage.Answered(ctx)
	}
	switch {
	case res.Degraded:
		s.metrics.reservations.WithLabelValues(sc.Name, "degraded").Inc()
	case res.OK:
		s.metrics.reservations.WithLabelValues(sc.Name, "reserved").Inc()
		s.metrics.delays.WithLabelValues(sc.Name).Observe(res.Delay.Seconds())
	default:
		s.metrics.reservations.WithLabelValues(sc.Name, "rejected_"+string(res.Reason)).Inc()
	}
	return res, nil
}

func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request) {
	const api = "cancel"
	req, p := readJSON[cancelRequest](w, r, s.maxBody, cancelExample)
	if p != nil {
		s.fail(w, api, p)
		return
	}
	ok, p := s.cancel(r.Context(), s.state.Load(), req.Schedule, req.Attributes, req.ID)
	if p != nil {
		s.fail(w, api, p)
		return
	}
	s.ok(w, api, cancelJSON{Cancelled: ok})
}

// cancel cancels a reservation of the schedule named name under st.
func (s *Server) cancel(ctx context.Context, st *state, name string, attrs map[string]string, id string) (bool, *httplimit.Problem) {
	sc, p := st.scheduleInput(name, attrs)
	if p != nil {
		return false, p
	}
	ok, err := st.lim.Cancel(ctx, sc, attrs, id)
	if err == nil {
		if id != "" { // an empty id is not sent to the store
			s.outage.Answered(ctx)
		}
		return ok, nil
	}
	if p := inputProblem(err); p != nil {
		return false, p
	}
	s.outage.Failed(ctx, outage.Failure{Msg: "store failed; reservation not cancelled", Kind: outage.Schedule, Name: sc.Name, Err: err})
	return false, &httplimit.Problem{Status: http.StatusServiceUnavailable, Code: "unavailable", Detail: "the store failed; the reservation may still be held"}
}

// Reserve implements store.Scheduler when the wrapped store does.
func (s *instrumentedStore) Reserve(ctx context.Context, req *store.ReserveRequest) (store.Reservation, error) {
	sc, err := s.scheduler()
	if err != nil {
		return store.Reservation{}, err
	}
	start := time.Now()
	res, err := sc.Reserve(ctx, req)
	s.observe("reserve", start, err)
	return res, err
}

// Cancel implements store.Scheduler when the wrapped store does.
func (s *instrumentedStore) Cancel(ctx context.Context, req *store.CancelRequest) (bool, error) {
	sc, err := s.scheduler()
	if err != nil {
		return false, err
	}
	start := time.Now()
	ok, err := sc.Cancel(ctx, req)
	s.observe("cancel", start, err)
	return ok, err
}

func (s *instrumentedStore) scheduler() (store.Scheduler, error) {
	sc, ok := s.Store.(store.Scheduler)
	if !ok {
		return nil, errNoSchedules
	}
	return sc, nil
}

var _ store.Scheduler = (*instrumentedStore)(nil)
