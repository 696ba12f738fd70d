package overrides

import (
	"errors"
	"net/http"

	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/adminauth"
	"github.com/sluicerate/sluice/internal/front"
	"github.com/sluicerate/sluice/internal/wire"
	"github.com/sluicerate/sluice/store"
)

// setExample is a body of PUT /api/v1/overrides, for messages.
const setExample = `{"policy":"api","rule":"per-user","values":["acme"],"limit":1000,"for":"1h","reason":"launch day"}`

// maxSetBody caps the body of PUT /api/v1/overrides.
const maxSetBody = 16 << 10

// Routes adds the admin API of the overrides to mux:
//
//	GET    /api/v1/overrides        every override held, and the rules they may name
//	GET    /api/v1/overrides/{id}   one
//	PUT    /api/v1/overrides        set one (the body is an Override)
//	DELETE /api/v1/overrides/{id}   delete one
//
// The admin listener's tokens guard them (package adminauth): setting and
// deleting need a token with write access, and are logged with its name.
func (m *Manager) Routes(mux front.Mux) {
	mux.HandleFunc("GET /api/v1/overrides", func(w http.ResponseWriter, r *http.Request) { front.WriteJSON(w, m.List()) })
	mux.HandleFunc("GET /api/v1/overrides/{id}", m.handleGet)
	mux.HandleFunc("PUT /api/v1/overrides", m.handleSet)
	mux.HandleFunc("DELETE /api/v1/overrides/{id}", m.handleDelete)
}

// oneJSON is the answer of GET /api/v1/overrides/{id}.
type oneJSON struct {
	Override
	Problem string `json:"problem,omitempty"`
}

func (m *Manager) handleGet(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	o, problem, ok := m.Get(id)
	if !ok {
		notFound(id).Write(w)
		return
	}
	front.WriteJSON(w, oneJSON{Override: o, Problem: problem})
}

func notFound(id string) httplimit.Problem {
	return httplimit.Problem{Status: http.StatusNotFound, Code: "not_found",
		Detail: "no runtime override " + id + "; GET /api/v1/overrides lists them"}
}

func (m *Manager) handleSet(w http.ResponseWriter, r *http.Request) {
	o, p := wire.ReadJSON[Override](w, r, maxSetBody, setExample)
	if p != nil {
		p.Write(w)
		return
	}
	if o.ID != "" || o.SetBy != "" || !o.SetAt.IsZero() {
		front.BadRequest("bad_request", "id, set_by and set_at are the server's; leave them out, as in %s", setExample).Write(w)
		return
	}
	set, err := m.Set(r.Context(), adminauth.Who(r), o)
	if err != nil {
		problem(err).Write(w)
		return
	}
	front.WriteJSON(w, set)
}

func (m *Manager) handleDelete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	found, err := m.Delete(r.Context(), adminauth.Who(r), id)
	switch {
	case err != nil:
		problem(err).Write(w)
	case !found:
		notFound(id).Write(w)
	default:
		front.WriteJSON(w, struct {
			Deleted string `json:"deleted"`
		}{id})
	}
}

// problem is the answer to a change that failed with err.
func problem(err error) *httplimit.Problem {
	switch {
	case errors.Is(err, store.ErrTooManyOverrides):
		return &httplimit.Problem{Status: http.StatusConflict, Code: "too_many_overrides", Detail: err.Error()}
	case errors.Is(err, ErrInvalid):
		return front.BadRequest("invalid_override", "%v; send an object such as %s", err, setExample)
	case errors.Is(err, ErrNoStore):
		return &httplimit.Problem{Status: http.StatusNotImplemented, Code: "no_overrides", Detail: err.Error()}
	}
	return &httplimit.Problem{Status: http.StatusServiceUnavailable, Code: "store_unavailable",
		Detail: "the store did not take the change: " + err.Error() + "; try again when it answers"}
}
