package httpapi

import (
	"net/http"

	"github.com/sluicerate/sluice/internal/front"
	"github.com/sluicerate/sluice/internal/wire"
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

// ReservationJSON is a Reservation as the HTTP API returns it.
type ReservationJSON struct {
	OK       bool   `json:"ok"`
	DelayMS  int64  `json:"delay_ms"`
	ID       string `json:"id"`
	Queue    int64  `json:"queue"`
	Reason   string `json:"reason,omitempty"`
	Degraded bool   `json:"degraded"`
}

// CancelJSON is the answer of POST /v1/cancel.
type CancelJSON struct {
	Cancelled bool `json:"cancelled"`
}

func (a *API) handleReserve(w http.ResponseWriter, r *http.Request) {
	const api = "reserve"
	req, p := wire.ReadJSON[reserveRequest](w, r, a.f.MaxBody, front.ReserveExample)
	if p != nil {
		a.f.Fail(w, api, p)
		return
	}
	res, p := a.f.Reserve(r.Context(), a.f.State(), api, req.Schedule, req.Attributes, wire.CostOf(req.Cost))
	if p != nil {
		a.f.Fail(w, api, p)
		return
	}
	a.f.OK(w, api, ReservationJSON{OK: res.OK, DelayMS: wire.Millis(res.Delay), ID: res.ID, Queue: res.Queue,
		Reason: string(res.Reason), Degraded: res.Degraded})
}

func (a *API) handleCancel(w http.ResponseWriter, r *http.Request) {
	const api = "cancel"
	req, p := wire.ReadJSON[cancelRequest](w, r, a.f.MaxBody, front.CancelExample)
	if p != nil {
		a.f.Fail(w, api, p)
		return
	}
	ok, p := a.f.Cancel(r.Context(), a.f.State(), req.Schedule, req.Attributes, req.ID)
	if p != nil {
		a.f.Fail(w, api, p)
		return
	}
	a.f.OK(w, api, CancelJSON{Cancelled: ok})
}
