// Package httpapi is sluice's own HTTP API: POST /v1/decide, /v1/peek and
// /v1/record (one request, or a batch of them), /v1/reserve and
// /v1/cancel, /v1/acquire, /v1/release, /v1/settle and /v1/extend, GET /v1/policies, /v1/forward-auth for proxies, /healthz and
// /readyz (docs/server.md). It renders the edge's outcomes as JSON and
// problem+json over a front.Front.
package httpapi

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/edge"
	"github.com/sluicerate/sluice/internal/front"
	"github.com/sluicerate/sluice/internal/wire"
)

// API serves the HTTP API over a Front. It is safe for concurrent use.
type API struct {
	f *front.Front
}

// New returns the API over f.
func New(f *front.Front) *API { return &API{f: f} }

// Routes adds the API's endpoints to mux.
func (a *API) Routes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/decide", a.handleDecide(edge.OpDecide))
	mux.HandleFunc("POST /v1/peek", a.handleDecide(edge.OpPeek))
	mux.HandleFunc("POST /v1/record", a.handleDecide(edge.OpRecord))
	mux.HandleFunc("POST /v1/reserve", a.handleReserve)
	mux.HandleFunc("POST /v1/cancel", a.handleCancel)
	mux.HandleFunc("POST /v1/acquire", a.handleAcquire)
	mux.HandleFunc("POST /v1/release", a.handleLease(edge.Release))
	mux.HandleFunc("POST /v1/settle", a.handleLease(edge.Settle))
	mux.HandleFunc("POST /v1/extend", a.handleLease(edge.Extend))
	mux.HandleFunc("GET /v1/policies", a.handlePolicies)
	mux.HandleFunc("/v1/forward-auth", a.handleForwardAuth)
	mux.HandleFunc("GET /healthz", handleHealthz)
	mux.HandleFunc("GET /readyz", a.handleReadyz)
}

// handleDecide serves /v1/decide, /v1/peek and /v1/record: one request, or
// a batch of them (batch.go). The body is decoded and the answer encoded
// by hand, in memory reused between requests (package wire).
func (a *API) handleDecide(op edge.Op) http.HandlerFunc {
	api := op.String()
	return func(w http.ResponseWriter, r *http.Request) {
		st := a.f.State()
		sc := wire.GetScratch()
		defer wire.PutScratch(sc)
		var p *httplimit.Problem
		if sc.Body, p = front.ReadBody(w, r, a.f.MaxBody, sc.Body[:0]); p != nil {
			a.fail(w, api, p, sc)
			return
		}
		if wire.IsBatch(sc.Body) {
			a.decideBatch(w, r, st, op, api, sc)
			return
		}
		req, p := sc.ParseDecide(sc.Body)
		if p != nil {
			a.fail(w, api, p, sc)
			return
		}
		o := st.Policies.DecideAttrs(r.Context(), req.Policy, req.Attributes, front.Call(api, op, wire.CostOf(req.Cost)))
		a.f.Counted(op, &o)
		if p := front.LeaseOnly(front.OutcomeProblem(&o), o.Err, HTTPLeaseRemedy); p != nil {
			a.fail(w, api, p, sc)
			return
		}
		a.f.Answered(api, "200")
		sc.Out = append(wire.AppendDecision(sc.Out[:0], &o.Decisions()[0]), '\n')
		wire.WriteDecision(w, sc.Out)
	}
}

// fail answers a request of api with p, encoded in sc's buffer.
func (a *API) fail(w http.ResponseWriter, api string, p *httplimit.Problem, sc *wire.Scratch) {
	a.f.Answered(api, front.StatusCode(p.Status))
	sc.Out = append(wire.AppendProblem(sc.Out[:0], p), '\n')
	wire.WriteProblem(w, p, sc.Out)
}

// PoliciesJSON is the answer of GET /v1/policies.
type PoliciesJSON struct {
	File      string              `json:"file"`
	LoadedAt  time.Time           `json:"loaded_at"`
	Policies  []PolicyJSON        `json:"policies"`
	Schedules []wire.ScheduleJSON `json:"schedules"`
}

// PolicyJSON is a policy in PoliciesJSON.
type PolicyJSON struct {
	Name     string          `json:"name"`
	Penalize bool            `json:"penalize"`
	Shadow   bool            `json:"shadow"`
	Limits   []wire.RuleJSON `json:"limits"`
}

func (a *API) handlePolicies(w http.ResponseWriter, r *http.Request) {
	st := a.f.State()
	out := PoliciesJSON{File: st.Config.File, LoadedAt: st.Loaded.UTC(), Policies: []PolicyJSON{}, Schedules: []wire.ScheduleJSON{}}
	for i := range st.Config.Policies {
		p := &st.Config.Policies[i]
		pj := PolicyJSON{Name: p.Name, Penalize: p.Penalize, Shadow: p.Shadow}
		for j := range p.Rules {
			pj.Limits = append(pj.Limits, wire.NewRuleJSON(p, &p.Rules[j]))
		}
		out.Policies = append(out.Policies, pj)
	}
	for i := range st.Config.Schedules {
		out.Schedules = append(out.Schedules, wire.NewScheduleJSON(&st.Config.Schedules[i]))
	}
	a.f.OK(w, "policies", out)
}

func handleHealthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok\n"))
}

func (a *API) handleReadyz(w http.ResponseWriter, r *http.Request) {
	if err := a.f.Ping(r.Context()); err != nil {
		a.f.Log.Warn("readiness: the store does not answer", slog.Any("err", err))
		httplimit.Problem{Status: http.StatusServiceUnavailable, Code: "unavailable", Detail: "the store does not answer"}.Write(w)
		return
	}
	if err := a.f.Unready(); err != nil {
		httplimit.Problem{Status: http.StatusServiceUnavailable, Code: "unavailable", Detail: err.Error()}.Write(w)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ready\n"))
}
