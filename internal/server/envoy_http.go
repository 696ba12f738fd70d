package server

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sluicerate/sluice/httplimit"
)

// envoyRoutes adds envoyproxy/ratelimit's HTTP endpoints to mux:
//
//   - POST /json: a RateLimitRequest in protobuf's JSON mapping, answered
//     with the RateLimitResponse, 200 when OK and 429 when OVER_LIMIT;
//   - GET /healthcheck: 200 "OK" while the store answers and the server is
//     not shutting down, else 500;
//   - GET /rlconfig: the loaded Envoy configuration, one limit per line.
//
// The admin listener (AdminHandler) has POST /api/v1/envoy/reset: a
// RateLimitRequest as /json takes it; the windows its descriptors match
// are emptied, giving those keys their whole limits back. It is an
// operator's tool, so it is not on the public listener.
func (s *Server) envoyRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /json", s.handleEnvoyJSON)
	mux.HandleFunc("GET /healthcheck", s.handleHealthcheck)
	mux.HandleFunc("GET /rlconfig", s.handleRLConfig)
}

// handleEnvoyJSON serves POST /json. The common body is decoded and the
// answer encoded by hand (envoy_json.go), in memory reused between
// requests; protojson decodes every other body and encodes every other
// answer.
func (s *Server) handleEnvoyJSON(w http.ResponseWriter, r *http.Request) {
	sc := getDecideScratch()
	defer putDecideScratch(sc)
	var err error
	if sc.body, err = readCapped(w, r, s.maxBody, sc.body[:0]); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			s.fail(w, "json", &httplimit.Problem{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large",
				Detail: fmt.Sprintf("the body is over %d bytes", s.maxBody)})
			return
		}
		s.fail(w, "json", badRequest("malformed_json", "reading the body: %v", err))
		return
	}
	req := new(rlsv3.RateLimitRequest)
	if !sc.decodeEnvoy(sc.body, req) {
		if err := protojson.Unmarshal(sc.body, req); err != nil {
			s.fail(w, "json", badRequest("malformed_json", "the body is not a RateLimitRequest in protobuf's JSON mapping (%v); send {\"domain\":\"D\",\"descriptors\":[{\"entries\":[{\"key\":\"K\",\"value\":\"V\"}]}]}", err))
			return
		}
	}
	out, err := (&envoyService{s: s}).ShouldRateLimit(r.Context(), req)
	if err != nil {
		envoyProblem(err).Write(w)
		return
	}
	var ok bool
	if sc.out, ok = appendEnvoyResponse(sc.out[:0], out); !ok {
		b, err := protojson.Marshal(out)
		if err != nil {
			httplimit.Problem{Status: http.StatusInternalServerError, Code: "internal"}.Write(w)
			return
		}
		sc.out = append(sc.out[:0], b...)
	}
	sc.out = append(sc.out, '\n')
	w.Header()["Content-Type"] = jsonContentType
	if out.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
		w.WriteHeader(http.StatusTooManyRequests)
	}
	_, _ = w.Write(sc.out)
}

// envoyProblem is the answer of POST /json to an error of ShouldRateLimit:
// its gRPC status as a problem.
func envoyProblem(err error) *httplimit.Problem {
	st := status.Convert(err)
	p := &httplimit.Problem{Status: http.StatusInternalServerError, Code: "internal", Detail: st.Message()}
	switch st.Code() {
	case codes.InvalidArgument:
		p.Status, p.Code = http.StatusBadRequest, "bad_request"
	case codes.Unavailable:
		p.Status, p.Code = http.StatusServiceUnavailable, "unavailable"
	}
	return p
}

func (s *Server) handleHealthcheck(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if s.serving(r.Context()) != healthpb.HealthCheckResponse_SERVING {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = w.Write([]byte("NOT OK: the store does not answer, or the server is shutting down\n"))
		return
	}
	_, _ = w.Write([]byte("OK"))
}

func (s *Server) handleRLConfig(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	cfg := s.envoy.cfg.Load()
	if cfg == nil {
		var names []string
		for _, p := range s.state.Load().cfg.Policies {
			names = append(names, p.Name)
		}
		fmt.Fprintf(w, "no Envoy configuration is loaded (sluice serve --envoy-config DIR); Envoy's domains name the policies: %s\n", strings.Join(names, ", "))
		return
	}
	_, _ = io.WriteString(w, cfg.Dump())
}

// resetJSON is the answer of POST /v1/envoy/reset.
type resetJSON struct {
	Windows []resetWindowJSON `json:"windows"`
	Reset   int               `json:"reset"` // how many held hits
}

type resetWindowJSON struct {
	Rule   string   `json:"rule"`
	Values []string `json:"values"`
}

func (s *Server) handleEnvoyReset(w http.ResponseWriter, r *http.Request) {
	cfg := s.envoy.cfg.Load()
	if cfg == nil {
		s.fail(w, "envoy_reset", &httplimit.Problem{Status: http.StatusNotFound, Code: "not_found",
			Detail: "no Envoy configuration is loaded; start sluice serve with --envoy-config DIR"})
		return
	}
	if s.envoy.reset == nil {
		s.fail(w, "envoy_reset", &httplimit.Problem{Status: http.StatusNotImplemented, Code: "not_implemented",
			Detail: "this store cannot empty a window; the in-memory store's windows go with the process"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.maxBody))
	if err != nil {
		s.fail(w, "envoy_reset", badRequest("malformed_json", "reading the body: %v", err))
		return
	}
	var req rlsv3.RateLimitRequest
	if err := protojson.Unmarshal(body, &req); err != nil {
		s.fail(w, "envoy_reset", badRequest("malformed_json", "the body is not a RateLimitRequest in protobuf's JSON mapping (%v); send {\"domain\":\"D\",\"descriptors\":[{\"entries\":[{\"key\":\"K\",\"value\":\"V\"}]}]}", err))
		return
	}
	sreq, err := cfg.Windows(&req)
	if err != nil {
		s.fail(w, "envoy_reset", badRequest("bad_request", "%v", err))
		return
	}
	out := resetJSON{Windows: []resetWindowJSON{}}
	for _, c := range sreq.Checks {
		out.Windows = append(out.Windows, resetWindowJSON{Rule: c.Rule, Values: c.Values})
	}
	if len(sreq.Checks) > 0 {
		if out.Reset, err = s.envoy.reset(r.Context(), sreq); err != nil {
			s.log.Warn("resetting windows", slog.String("domain", req.GetDomain()), slog.Any("err", err))
			s.fail(w, "envoy_reset", &httplimit.Problem{Status: http.StatusServiceUnavailable, Code: "unavailable", Detail: "the store failed: " + err.Error()})
			return
		}
	}
	s.log.Info("windows reset", slog.String("domain", req.GetDomain()), slog.Int("windows", len(sreq.Checks)), slog.Int("reset", out.Reset))
	writeJSON(w, out)
}
