package front

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicerate/sluice/httplimit"
)

// Shedder keeps a server from taking more than it can do: at most Max
// requests in flight over gRPC and HTTP together (MAX_CONCURRENT_REQUESTS),
// one beyond them refused at once, RESOURCE_EXHAUSTED over gRPC and 503
// with Retry-After over HTTP, saying why; and each request given at most
// Timeout (REQUEST_TIMEOUT): its store calls end then, and a gRPC call
// still running then is answered DEADLINE_EXCEEDED (over HTTP, the
// failure policy's answer stands). Health checks,
// /metrics and the admin listener are never shed. It is safe for
// concurrent use; a nil *Shedder sheds nothing.
type Shedder struct {
	max     int
	timeout time.Duration
	slots   chan struct{}
	shed    *prometheus.CounterVec // api, reason
}

// NewShedder returns a shedder of at most max requests in flight (0: no
// bound), each of at most timeout (0: none), its count registered on reg;
// nil when both are 0.
func NewShedder(max int, timeout time.Duration, reg prometheus.Registerer) *Shedder {
	if max <= 0 && timeout <= 0 {
		return nil
	}
	s := &Shedder{max: max, timeout: timeout, shed: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sluice_requests_shed_total",
		Help: "Requests refused or cut short to protect the server, by api (grpc, http) and reason (concurrency: MAX_CONCURRENT_REQUESTS in flight; timeout: over REQUEST_TIMEOUT).",
	}, []string{"api", "reason"})}
	if max > 0 {
		s.slots = make(chan struct{}, max)
	}
	reg.MustRegister(s.shed)
	return s
}

// enter takes a slot, reporting false when all are taken; leave gives it
// back.
func (s *Shedder) enter() bool {
	if s.slots == nil {
		return true
	}
	select {
	case s.slots <- struct{}{}:
		return true
	default:
		return false
	}
}

func (s *Shedder) leave() {
	if s.slots != nil {
		<-s.slots
	}
}

func (s *Shedder) busy() string {
	return fmt.Sprintf("the server has %d requests in flight, the most it takes (MAX_CONCURRENT_REQUESTS); this one was shed: retry, or add servers", s.max)
}

// exempt reports whether a gRPC method or an HTTP path is never shed:
// health checks and metrics.
func exempt(name string) bool {
	return strings.HasPrefix(name, "/grpc.health.v1.") || strings.HasPrefix(name, "/grpc.reflection.") ||
		name == "/healthz" || name == "/readyz" || name == "/healthcheck" || name == "/metrics"
}

// Unary returns the gRPC interceptor of s.
func (s *Shedder) Unary() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if exempt(info.FullMethod) {
			return handler(ctx, req)
		}
		if !s.enter() {
			s.shed.WithLabelValues("grpc", "concurrency").Inc()
			return nil, status.Error(codes.ResourceExhausted, s.busy())
		}
		defer s.leave()
		if s.timeout <= 0 {
			return handler(ctx, req)
		}
		ctx, cancel := context.WithTimeout(ctx, s.timeout)
		defer cancel()
		out, err := handler(ctx, req)
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			// Answered after its time, by the failure policy most likely
			// (its store call ended then): as a call past a client's own
			// deadline, it is not answered.
			s.shed.WithLabelValues("grpc", "timeout").Inc()
			return nil, status.Errorf(codes.DeadlineExceeded, "the request took longer than %v (REQUEST_TIMEOUT); its store call was cut short", s.timeout)
		}
		return out, err
	}
}

// Handler returns next behind s.
func (s *Shedder) Handler(next http.Handler) http.Handler {
	if s == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if exempt(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		if !s.enter() {
			s.shed.WithLabelValues("http", "concurrency").Inc()
			w.Header().Set("Retry-After", "1")
			httplimit.Problem{Status: http.StatusServiceUnavailable, Code: "overloaded", Detail: s.busy()}.Write(w)
			return
		}
		defer s.leave()
		if s.timeout > 0 {
			ctx, cancel := context.WithTimeout(r.Context(), s.timeout)
			defer cancel()
			r = r.WithContext(ctx)
		}
		next.ServeHTTP(w, r)
	})
}
