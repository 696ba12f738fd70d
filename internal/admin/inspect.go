package admin

import (
	"context"
	"net/http"

	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/edge"
	"github.com/sluicerate/sluice/internal/front"
	"github.com/sluicerate/sluice/internal/inspect"
	"github.com/sluicerate/sluice/internal/wire"
)

// Inspector reads, changing nothing, what a store holds, for the key
// inspector (package inspect's model, which sluice inspect prints too).
// sluice serve gives one for Redis (package redisinspect); without one the
// inspector shows a window's figures, from a peek, and no queue.
type Inspector = inspect.Inspector

// inspectRequest is the body of POST /api/v1/inspect: a policy or a
// schedule, and the attributes of the key to look at.
type inspectRequest struct {
	Policy     string            `json:"policy"`
	Schedule   string            `json:"schedule"`
	Attributes map[string]string `json:"attributes"`
}

const inspectExample = `{"policy":"notify","attributes":{"category":"errors"}}`

func (a *admin) handleInspect(w http.ResponseWriter, r *http.Request) {
	req, p := wire.ReadJSON[inspectRequest](w, r, a.f.MaxBody, inspectExample)
	if p == nil {
		var out inspect.Report
		if out, p = a.inspect(r.Context(), a.f.State(), &req); p == nil {
			front.WriteJSON(w, out)
			return
		}
	}
	p.Write(w)
}

// inspect answers req under st.
func (a *admin) inspect(ctx context.Context, st *front.State, req *inspectRequest) (inspect.Report, *httplimit.Problem) {
	src := inspect.Source{Limiter: st.Limiter, Inspector: a.insp, Store: a.storeKind()}
	switch {
	case req.Policy != "" && req.Schedule != "":
		return inspect.Report{}, front.BadRequest("bad_request", "name a policy or a schedule, not both; send an object such as %s", inspectExample)
	case req.Schedule != "":
		sc, err := st.Policies.Schedule(req.Schedule, req.Attributes)
		if err != nil {
			return inspect.Report{}, front.InputProblem(err)
		}
		return src.Schedule(ctx, sc, req.Attributes, a.v.clock.Now()), nil
	case req.Policy == "":
		return inspect.Report{}, front.BadRequest("bad_request", "the request names no policy or schedule; send an object such as %s", inspectExample)
	}
	p := st.Config.Policy(req.Policy)
	if p == nil {
		names := make([]string, len(st.Config.Policies))
		for i := range st.Config.Policies {
			names[i] = st.Config.Policies[i].Name
		}
		return inspect.Report{}, front.BadRequest("unknown_policy", "%v: %q; the configured policies are %q", edge.ErrUnknownPolicy, req.Policy, names)
	}
	out, err := src.Policy(ctx, p, req.Attributes, a.v.clock.Now())
	if err != nil {
		if pr := front.InputProblem(err); pr != nil {
			return inspect.Report{}, pr
		}
		return inspect.Report{}, front.BadRequest("bad_request", "%v", err)
	}
	return out, nil
}
