package httpapi

import (
	"net/http"

	"github.com/sluicerate/sluice/internal/edge"
	"github.com/sluicerate/sluice/internal/front"
	"github.com/sluicerate/sluice/internal/wire"
)

// AcquireJSON is the answer of POST /v1/acquire: the decision, and when it
// is allowed the lease's id and the time until it expires unless released
// or extended.
type AcquireJSON struct {
	wire.DecisionJSON
	Lease          string `json:"lease"`
	LeaseExpiresMS int64  `json:"lease_expires_ms"`
}

// leaseRequest is the body of /v1/release, /v1/settle and /v1/extend.
type leaseRequest struct {
	Lease string `json:"lease"`
	Cost  *int64 `json:"cost"`
}

// LeaseJSON is the answer of POST /v1/release, /v1/settle and /v1/extend:
// whether the lease was alive (false: unknown, already released or
// settled, or expired; nothing changed), and after an extension the time
// until it expires.
type LeaseJSON struct {
	Held           bool  `json:"held"`
	LeaseExpiresMS int64 `json:"lease_expires_ms,omitempty"`
}

// handleAcquire serves /v1/acquire: a decide body, decided with a lease of
// the policy held when allowed.
func (a *API) handleAcquire(w http.ResponseWriter, r *http.Request) {
	const api = "acquire"
	st := a.f.State()
	req, p := wire.ReadJSON[wire.DecideRequest](w, r, a.f.MaxBody, front.DecideExample)
	if p != nil {
		a.f.Fail(w, api, p)
		return
	}
	o := st.Policies.DecideAttrs(r.Context(), req.Policy, req.Attributes, front.Call(api, edge.OpAcquire, wire.CostOf(req.Cost)))
	a.f.Counted(edge.OpAcquire, &o)
	if p := front.OutcomeProblem(&o); p != nil {
		a.f.Fail(w, api, p)
		return
	}
	d := o.Decision()
	out := AcquireJSON{DecisionJSON: wire.NewDecisionJSON(&d)}
	if len(o.Leases) > 0 {
		x := o.Leases[0]
		out.Lease, out.LeaseExpiresMS = x.ID(), wire.Millis(x.TTL())
	}
	a.f.OK(w, api, out)
}

// handleLease serves /v1/release, /v1/settle and /v1/extend.
func (a *API) handleLease(op edge.LeaseOp) http.HandlerFunc {
	api, example := [...]string{edge.Release: "release", edge.Settle: "settle", edge.Extend: "extend"}[op], front.LeaseExample
	if op == edge.Settle {
		example = front.SettleExample
	}
	return func(w http.ResponseWriter, r *http.Request) {
		req, p := wire.ReadJSON[leaseRequest](w, r, a.f.MaxBody, example)
		if p != nil {
			a.f.Fail(w, api, p)
			return
		}
		var cost int64
		if op == edge.Settle {
			if req.Cost == nil {
				a.f.Fail(w, api, front.BadRequest("bad_request", "a settle names the real cost; send an object such as %s", front.SettleExample))
				return
			}
			cost = *req.Cost
		}
		res, p := a.f.Finish(r.Context(), a.f.State(), api, req.Lease, op, cost)
		if p != nil {
			a.f.Fail(w, api, p)
			return
		}
		out := LeaseJSON{Held: res.Held}
		if op == edge.Extend && res.Held {
			out.LeaseExpiresMS = wire.Millis(res.Lease.TTL())
		}
		a.f.OK(w, api, out)
	}
}

// HTTPLeaseRemedy is what a decide or record on a policy with a concurrency
// rule tells an HTTP caller to do instead.
const HTTPLeaseRemedy = `take a lease with POST /v1/acquire (the same body), then end it with POST /v1/release or /v1/settle ` +
	`{"lease":"…"}; POST /v1/peek may look`
