package front

import (
	"context"
	"net/http"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/edge"
)

// Reserve reserves cost units of the schedule named name for attrs under
// st, for a request of api, counting the reservation: the problem answers
// a request that cannot be reserved.
func (f *Front) Reserve(ctx context.Context, st *State, api, name string, attrs map[string]string, cost int64) (sluice.Reservation, *httplimit.Problem) {
	if name == "" && edge.CheckCost(cost) == nil {
		return sluice.Reservation{}, noSchedule()
	}
	r := st.Policies.Reserve(ctx, name, attrs, cost, Call(api, edge.OpDecide, cost))
	switch r.Kind {
	case edge.BadInput:
		return r.Reservation, InputProblem(r.Err)
	case edge.Failed:
		return r.Reservation, Internal()
	}
	f.Metrics.Reserved(r.Schedule.Name, &r.Reservation)
	return r.Reservation, nil
}

// Cancel cancels the reservation id of the schedule named name for attrs
// under st: whether it was held, or the problem that answers the request.
func (f *Front) Cancel(ctx context.Context, st *State, name string, attrs map[string]string, id string) (bool, *httplimit.Problem) {
	if name == "" {
		return false, noSchedule()
	}
	r := st.Policies.Cancel(ctx, name, attrs, id, edge.Call{})
	switch r.Kind {
	case edge.BadInput:
		return false, InputProblem(r.Err)
	case edge.Unavailable:
		return false, &httplimit.Problem{Status: http.StatusServiceUnavailable, Code: "unavailable", Detail: "the store failed; the reservation may still be held"}
	}
	return r.Cancelled, nil
}

// noSchedule is the problem of a request that names no schedule.
func noSchedule() *httplimit.Problem {
	return BadRequest("bad_request", "the request names no schedule; send an object such as %s", ReserveExample)
}
