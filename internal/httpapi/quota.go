package httpapi

import (
	"net/http"

	"github.com/sluicerate/sluice/internal/adminauth"
	"github.com/sluicerate/sluice/internal/front"
	"github.com/sluicerate/sluice/internal/quota"
	"github.com/sluicerate/sluice/internal/wire"
)

// QuotaRoutes adds the endpoints of credits balances and calendar quotas'
// usage to mux, each behind guard (the admin tokens):
//
//	POST /v1/credits   get, add to or set a Credits rule's balance for a key
//	GET  /v1/usage     a calendar quota's totals by period for a key
//
// Reading needs a token that may read; add and set, one with write access
// (package adminauth).
func (a *API) QuotaRoutes(mux front.Mux, guard func(http.Handler) http.Handler) {
	mux.Handle("POST /v1/credits", guard(http.HandlerFunc(a.handleCredits)))
	mux.Handle("GET /v1/usage", guard(http.HandlerFunc(a.handleUsage)))
}

// source is the quota source of st: its Limiter over the front's store.
func (a *API) source(st *front.State) quota.Source {
	return quota.Source{Limiter: st.Limiter, Store: a.f.Store}
}

func (a *API) handleCredits(w http.ResponseWriter, r *http.Request) {
	const api = "credits"
	req, p := wire.ReadJSON[quota.CreditRequest](w, r, a.f.MaxBody, quota.CreditExample)
	if p != nil {
		a.f.Fail(w, api, p)
		return
	}
	if err := req.Check(); err != nil {
		a.f.Fail(w, api, quota.Problem(err))
		return
	}
	if req.Op != quota.OpGet && !adminauth.MayChange(w, r) {
		a.f.Answered(api, front.StatusCode(http.StatusForbidden))
		return
	}
	st := a.f.State()
	pol, err := st.Config.FindPolicy(req.Policy)
	if err != nil {
		a.f.Fail(w, api, quota.Problem(err))
		return
	}
	b, err := a.source(st).Credit(r.Context(), pol, &req)
	if err != nil {
		a.f.Fail(w, api, quota.Problem(err))
		return
	}
	a.f.OK(w, api, b)
}

func (a *API) handleUsage(w http.ResponseWriter, r *http.Request) {
	const api = "usage"
	t, err := quota.ParseUsageQuery(r.URL.Query())
	if err != nil {
		a.f.Fail(w, api, quota.Problem(err))
		return
	}
	st := a.f.State()
	pol, err := st.Config.FindPolicy(t.Policy)
	if err != nil {
		a.f.Fail(w, api, quota.Problem(err))
		return
	}
	u, err := a.source(st).Usage(r.Context(), pol, t.Rule, t.Attributes, t.At)
	if err != nil {
		a.f.Fail(w, api, quota.Problem(err))
		return
	}
	a.f.OK(w, api, u)
}
