package front

import (
	"context"
	"net/http"

	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/edge"
)

// Finish releases, settles (at cost) or extends the lease id under st,
// for a request of api: what the edge answered, or the problem that
// answers the request instead.
func (f *Front) Finish(ctx context.Context, st *State, api, id string, op edge.LeaseOp, cost int64) (edge.Finished, *httplimit.Problem) {
	if id == "" {
		return edge.Finished{}, BadRequest("bad_request", "the request names no lease; send an object such as %s", LeaseExample)
	}
	r := st.Policies.Finish(ctx, id, op, cost, Call(api, edge.OpDecide, 1))
	switch r.Kind {
	case edge.BadInput:
		return r, InputProblem(r.Err)
	case edge.Unavailable:
		return r, &httplimit.Problem{Status: http.StatusServiceUnavailable, Code: "unavailable", Detail: "the store failed; the lease may still be held until it expires"}
	}
	return r, nil
}
