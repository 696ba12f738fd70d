package httpapi

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/edge"
	"github.com/sluicerate/sluice/internal/front"
	"github.com/sluicerate/sluice/internal/wire"
)

// A batch (package wire describes it) is decided one request after
// another, each as if sent alone, and answered with an array of their
// answers, each request counted on its own.

// decideBatch answers the batch body.
func (a *API) decideBatch(w http.ResponseWriter, r *http.Request, st *front.State, op edge.Op, api string, sc *wire.Scratch) {
	items, p := sc.Batch()
	if p != nil {
		a.fail(w, api, p, sc)
		return
	}
	if len(items) > a.f.MaxBatch {
		a.fail(w, api, &httplimit.Problem{Status: http.StatusBadRequest, Code: "batch_too_large",
			Detail: fmt.Sprintf("the batch holds %d requests, more than the %d one call may decide; send them in several batches", len(items), a.f.MaxBatch)}, sc)
		return
	}
	out := append(sc.Out[:0], '[')
	for i, item := range items {
		if i > 0 {
			out = append(out, ',')
		}
		req, p := sc.ParseDecide(item)
		var o edge.Outcome
		if p == nil {
			o = st.Policies.DecideAttrs(r.Context(), req.Policy, req.Attributes, front.Call(api, op, wire.CostOf(req.Cost)))
			a.f.Counted(op, &o)
			p = front.LeaseOnly(front.OutcomeProblem(&o), o.Err, HTTPLeaseRemedy)
		}
		if p != nil {
			a.f.Answered(api, front.StatusCode(p.Status))
			out = append(out, `{"status":`...)
			out = strconv.AppendInt(out, int64(p.Status), 10)
			out = append(out, `,"problem":`...)
			out = wire.AppendProblem(out, p)
			out = append(out, '}')
			continue
		}
		a.f.Answered(api, "200")
		out = append(out, `{"status":200,"decision":`...)
		out = wire.AppendDecision(out, &o.Decisions()[0])
		out = append(out, '}')
	}
	sc.Out = append(out, "]\n"...)
	wire.WriteDecision(w, sc.Out)
}
