package rls

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.opentelemetry.io/otel/propagation"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/envoy/decide"
	"github.com/sluicerate/sluice/internal/front"
	"github.com/sluicerate/sluice/internal/tracing"
	"github.com/sluicerate/sluice/internal/wire"
)

// Routes adds envoyproxy/ratelimit's HTTP endpoints to mux:
//
//   - POST /json: a RateLimitRequest in protobuf's JSON mapping, answered
//     with the RateLimitResponse, 200 when OK and 429 when OVER_LIMIT;
//   - GET /healthcheck: 200 "OK" while the store answers and the server is
//     not shutting down, else 500;
//   - GET /rlconfig: the loaded Envoy configuration, one limit per line.
func (e *Front) Routes(mux *http.ServeMux) {
	mux.HandleFunc("POST /json", e.handleJSON)
	mux.HandleFunc("GET /healthcheck", e.handleHealthcheck)
	mux.HandleFunc("GET /rlconfig", e.handleRLConfig)
}

// AdminRoutes adds the admin listener's routes to its mux:
//
//   - POST /api/v1/envoy/reset: a RateLimitRequest as /json takes it; the
//     windows its descriptors match are emptied, giving those keys their
//     whole limits back. It is an operator's tool, so it is not on the
//     public listener;
//   - GET /api/v1/envoy/config: where the configuration comes from (files
//     or an xDS control plane), its domains, and the control plane's
//     state: the version in use, the last one refused and why.
func (e *Front) AdminRoutes(mux front.Mux) {
	mux.HandleFunc("POST /api/v1/envoy/reset", e.handleReset)
	mux.HandleFunc("GET /api/v1/envoy/config", e.handleConfig)
}

// requestExample is a RateLimitRequest in protobuf's JSON mapping, for
// messages about a body that is not one.
const requestExample = `{"domain":"D","descriptors":[{"entries":[{"key":"K","value":"V"}]}]}`

// handleJSON serves POST /json. The common body is decoded and the answer
// encoded by hand (package wire), in memory reused between requests;
// protojson decodes every other body and encodes every other answer.
func (e *Front) handleJSON(w http.ResponseWriter, r *http.Request) {
	sc := wire.GetScratch()
	defer wire.PutScratch(sc)
	var err error
	if sc.Body, err = front.ReadCapped(w, r, e.f.MaxBody, sc.Body[:0]); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			e.f.Fail(w, "json", &httplimit.Problem{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large",
				Detail: fmt.Sprintf("the body is over %d bytes", e.f.MaxBody)})
			return
		}
		e.f.Fail(w, "json", front.BadRequest("malformed_json", "reading the body: %v", err))
		return
	}
	req := new(rlsv3.RateLimitRequest)
	if !sc.DecodeEnvoy(sc.Body, req) {
		if err := protojson.Unmarshal(sc.Body, req); err != nil {
			e.f.Fail(w, "json", notARequest(err))
			return
		}
	}
	ctx := r.Context()
	if e.tracer != nil {
		ctx = tracing.FromHTTP(ctx, propagation.HeaderCarrier(r.Header))
	}
	out, err := (&service{e: e}).ShouldRateLimit(ctx, req)
	if err != nil {
		front.StatusProblem(err).Write(w)
		return
	}
	var ok bool
	if sc.Out, ok = wire.AppendEnvoyResponse(sc.Out[:0], out); !ok {
		b, err := protojson.Marshal(out)
		if err != nil {
			front.Internal().Write(w)
			return
		}
		sc.Out = append(sc.Out[:0], b...)
	}
	sc.Out = append(sc.Out, '\n')
	wire.WriteEnvoyAnswer(w, out.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT, sc.Out)
}

// notARequest is the problem of a body protojson cannot decode.
func notARequest(err error) *httplimit.Problem {
	return front.BadRequest("malformed_json", "the body is not a RateLimitRequest in protobuf's JSON mapping (%v); send %s", err, requestExample)
}

func (e *Front) handleHealthcheck(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if err := e.f.Unready(); err != nil {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte("NOT OK: " + err.Error() + "\n"))
		return
	}
	if !e.f.Serving(r.Context()) {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte("NOT OK: the store does not answer, or the server is shutting down\n"))
		return
	}
	_, _ = w.Write([]byte("OK"))
}

func (e *Front) handleRLConfig(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if e.xds != nil {
		_, _ = io.WriteString(w, e.xdsRLConfig())
		return
	}
	cfg := e.cfg.Load()
	if cfg == nil {
		var names []string
		for _, p := range e.f.State().Config.Policies {
			names = append(names, p.Name)
		}
		fmt.Fprintf(w, "no Envoy configuration is loaded (sluice serve --envoy-config DIR); Envoy's domains name the policies: %s\n", strings.Join(names, ", "))
		return
	}
	_, _ = io.WriteString(w, cfg.Dump())
}

// resetJSON is the answer of POST /api/v1/envoy/reset.
type resetJSON struct {
	Windows []resetWindowJSON `json:"windows"`
	Reset   int               `json:"reset"` // how many held hits
}

type resetWindowJSON struct {
	Rule   string   `json:"rule"`
	Values []string `json:"values"`
}

func (e *Front) handleReset(w http.ResponseWriter, r *http.Request) {
	const api = "envoy_reset"
	cfg := e.cfg.Load()
	switch {
	case cfg == nil:
		e.f.Fail(w, api, &httplimit.Problem{Status: http.StatusNotFound, Code: "not_found",
			Detail: "no Envoy configuration is loaded; start sluice serve with --envoy-config DIR"})
		return
	case e.reset == nil:
		e.f.Fail(w, api, &httplimit.Problem{Status: http.StatusNotImplemented, Code: "not_implemented",
			Detail: "this store cannot empty a window; the in-memory store's windows go with the process"})
		return
	}
	body, err := front.ReadCapped(w, r, e.f.MaxBody, nil)
	if err != nil {
		e.f.Fail(w, api, front.BadRequest("malformed_json", "reading the body: %v", err))
		return
	}
	var req rlsv3.RateLimitRequest
	if err := protojson.Unmarshal(body, &req); err != nil {
		e.f.Fail(w, api, notARequest(err))
		return
	}
	sreq, err := decide.Windows(cfg, &req)
	if err != nil {
		e.f.Fail(w, api, front.BadRequest("bad_request", "%v", err))
		return
	}
	out := resetJSON{Windows: []resetWindowJSON{}}
	for _, c := range sreq.Checks {
		out.Windows = append(out.Windows, resetWindowJSON{Rule: c.Rule, Values: c.Values})
	}
	if len(sreq.Checks) > 0 {
		if out.Reset, err = e.reset(r.Context(), sreq); err != nil {
			e.f.Log.Warn("resetting windows", slog.String("domain", req.GetDomain()), slog.Any("err", err))
			e.f.Fail(w, api, &httplimit.Problem{Status: http.StatusServiceUnavailable, Code: "unavailable", Detail: "the store failed: " + err.Error()})
			return
		}
	}
	e.f.Log.Info("windows reset", slog.String("domain", req.GetDomain()), slog.Int("windows", len(sreq.Checks)), slog.Int("reset", out.Reset))
	front.WriteJSON(w, out)
}
