// Package server is the composition root of sluice serve: it builds the
// fronts (the HTTP API, sluice's gRPC service, Envoy's rate-limit service,
// the admin view) over one front.Front and one store, swaps in a
// configuration, reloads and watches its files, lays out the listeners'
// routes and drains them. Each front is a package of its own; this one
// only puts them together.
//
// A Server holds one store for its lifetime and a configuration that can be
// swapped at any time: every request reads the configuration once, so it is
// decided entirely under either the old or the new one.
package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/admin"
	"github.com/sluicerate/sluice/internal/adminauth"
	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/internal/envoy"
	"github.com/sluicerate/sluice/internal/envoy/rls"
	"github.com/sluicerate/sluice/internal/envoy/xds"
	"github.com/sluicerate/sluice/internal/front"
	"github.com/sluicerate/sluice/internal/grpcapi"
	"github.com/sluicerate/sluice/internal/httpapi"
	"github.com/sluicerate/sluice/internal/overrides"
	"github.com/sluicerate/sluice/store"
)

// Options configures a Server. The zero value is the default.
type Options struct {
	// Logger receives the server's logs. Default: discard.
	Logger *slog.Logger

	// OutageInterval is the least time between two summaries of a store
	// outage in the logs: the first failure is logged at once, then one
	// summary per interval while failures go on, then one line when the
	// store answers again (package outage). Default outage.DefaultInterval
	// (10 s).
	OutageInterval time.Duration

	// Registry is where the server's metrics are registered. Default: a
	// new registry, served at /metrics with the Go and process collectors.
	Registry *prometheus.Registry

	// MaxBodyBytes caps a request body; a larger one is answered 413.
	// Default 64 KiB.
	MaxBodyBytes int64

	// MaxBatch caps the requests of one batch (a JSON array of requests to
	// /v1/decide, /v1/peek or /v1/record); a larger batch is answered 400
	// batch_too_large. Default DefaultMaxBatch (1000).
	MaxBatch int

	// StoreTimeout bounds one store call when the configuration sets no
	// store timeout. Default: the Limiter's (sluice.DefaultTimeout).
	StoreTimeout time.Duration

	// DenyCache, above 0, makes every configured policy cache its
	// denials (sluice.Policy.CacheDenials) in a deny cache of that many
	// entries, emptied on every reload (sluice.Config.DenyCache). Default
	// 0: none.
	DenyCache int

	// Ping checks that the store answers, for /readyz. Default: the
	// store's own Ping(context.Context) error method when it has one, else
	// always ready.
	Ping func(ctx context.Context) error

	// Clock is the admin view's time: the seconds its rates are counted
	// in and when a denied key is let through. Default: the system clock.
	Clock sluice.Clock

	// Inspector reads the store's windows and queues for the admin view's
	// key inspector. Default: none (the inspector shows a window's
	// figures and no queue).
	Inspector admin.Inspector

	// Tracer, when set, traces Envoy's rate-limit service and every store
	// call (package tracing). Default: none.
	Tracer trace.Tracer

	// MaxInFlight bounds the requests the public listeners take at once,
	// over gRPC and HTTP together; RequestTimeout bounds each one
	// (front.Shedder). Default 0: no bound.
	MaxInFlight    int
	RequestTimeout time.Duration

	// OverrideStore keeps the runtime overrides (package overrides).
	// Default: the store, when it keeps them (memstore and redisstore
	// do). MaxOverrides bounds how many the server holds (default
	// overrides.DefaultMax), and OverridePoll is how often it asks the
	// store whether they changed (default overrides.DefaultPoll).
	OverrideStore store.OverrideStore
	MaxOverrides  int
	OverridePoll  time.Duration

	// AdminTokens are the admin tokens that the public listener's POST
	// /v1/credits and GET /v1/usage require (as an Authorization header;
	// a change needs one with write access). Default: none, and the
	// public listener refuses them (403); the admin listener serves them
	// under its own tokens.
	AdminTokens adminauth.Tokens
}

// Defaults of sluice serve.
const (
	DefaultMaxBatch  = front.DefaultMaxBatch   // Options.MaxBatch's
	DefaultDenyCache = sluice.DefaultDenyCache // --deny-cache's
)

// EnvoyOptions configures the Envoy model (LoadEnvoyConfig).
type EnvoyOptions = rls.Options

// AdminOptions configures AdminHandler (admin.Options.Tokens).
type AdminOptions struct {
	// Tokens, when set, are required of every request of the admin
	// listener; changes need one with write access. Token is one more,
	// named "admin", with write access.
	Tokens adminauth.Tokens
	Token  string
}

// Server serves sluice over HTTP and gRPC. It is safe for concurrent use.
// Create one with New.
type Server struct {
	front     *front.Front
	reg       *prometheus.Registry
	view      *admin.View
	api       *httpapi.API
	envoy     *rls.Front
	shed      *front.Shedder
	overrides *overrides.Manager
	inspector admin.Inspector
	timeout   time.Duration
	denyCache int
	apiTokens adminauth.Tokens // Options.AdminTokens

	hasOverrides bool // the store keeps runtime overrides

	fallbackOnce sync.Once
	fallback     store.Store // on_error: fallback's, made on first use

	closing sync.WaitGroup // the Limiters a reload swapped out, giving their slices back
}

// New returns a Server over store with the configuration cfg. The server
// does not close the store.
func New(store store.Store, cfg *config.Config, opts Options) (*Server, error) {
	if store == nil {
		return nil, errors.New("server: store is nil")
	}
	s := &Server{reg: opts.Registry, inspector: opts.Inspector, timeout: opts.StoreTimeout, denyCache: opts.DenyCache,
		apiTokens: opts.AdminTokens}
	if s.reg == nil {
		s.reg = prometheus.NewRegistry()
		s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	s.view = admin.NewView(opts.Clock)
	s.front = front.New(store, front.Options{Logger: opts.Logger, Registry: s.reg, Observer: s.view, OutageInterval: opts.OutageInterval,
		Now: s.view.Clock().Now, MaxBodyBytes: opts.MaxBodyBytes, MaxBatch: opts.MaxBatch, Ping: opts.Ping, Tracer: opts.Tracer})
	s.reg.MustRegister(s.view.Collectors(s.front)...)
	s.api = httpapi.New(s.front)
	s.envoy = rls.New(s.front, s.reg)
	s.envoy.SetTracer(opts.Tracer)
	s.shed = front.NewShedder(opts.MaxInFlight, opts.RequestTimeout, s.reg)
	s.newOverrides(store, opts)
	if err := s.Swap(cfg); err != nil {
		return nil, err
	}
	return s, nil
}

// Config returns the configuration in use.
func (s *Server) Config() *config.Config { return s.front.State().Config }

// Handler returns the HTTP handler of the public listener: the /v1 API,
// forward-auth, /metrics, /healthz and /readyz, and envoyproxy/ratelimit's
// /json, /healthcheck and /rlconfig. Unknown routes are answered 404 and
// known routes with the wrong method 405, both as problem+json. Credits
// and usage need an admin token (Options.AdminTokens).
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	s.api.Routes(mux)
	s.api.QuotaRoutes(mux, s.publicGuard)
	s.envoy.Routes(mux)
	mux.Handle("GET /metrics", s.MetricsHandler())
	return s.shed.Handler(front.Handler(s.front.Log, mux))
}

// MetricsHandler serves the server's metrics in Prometheus's format.
func (s *Server) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{Registry: s.reg})
}

// HTTPServer returns an http.Server for the handler with timeouts set, so a
// slow client cannot hold a connection open.
func (s *Server) HTTPServer(addr string) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           s.Handler(),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.front.Log.Handler(), slog.LevelWarn),
	}
}

// GRPCServer returns a gRPC server with sluice's own service, Envoy's
// rate-limit service, health checking and reflection, and opts
// (grpcapi.NewServer), behind the shedder when there is one.
func (s *Server) GRPCServer(opts ...grpc.ServerOption) *grpc.Server {
	if s.shed != nil {
		opts = append(opts, grpc.ChainUnaryInterceptor(s.shed.Unary()))
	}
	gs := grpcapi.NewServer(s.front, rls.TextRequests, opts...)
	s.envoy.Register(gs)
	return gs
}

// AdminHandler returns the handler of the admin listener (package admin):
// the page, its JSON API, /metrics, pprof, the runtime overrides and
// Envoy's window reset.
func (s *Server) AdminHandler(opts AdminOptions) *admin.Listener {
	return s.view.Handler(s.front, admin.Options{Tokens: opts.tokens(), Inspector: s.inspector, Metrics: s.MetricsHandler(),
		Overrides: s.hasOverrides, Routes: func(mux front.Mux) {
			s.envoy.AdminRoutes(mux)
			s.overrides.Routes(mux)
			s.api.QuotaRoutes(mux, func(h http.Handler) http.Handler { return h }) // the listener's tokens guard it
		}})
}

// publicGuard guards the public listener's credits and usage with the
// admin tokens, as a bearer token only (a browser's admin cookie is not
// taken there); with none set, it refuses them: the public listener is
// open to whoever may decide, and a balance is money.
func (s *Server) publicGuard(next http.Handler) http.Handler {
	if len(s.apiTokens) == 0 {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			httplimit.Problem{Status: http.StatusForbidden, Code: "forbidden",
				Detail: r.URL.Path + " needs an admin token, and this server has none: set " + adminTokenEnv +
					" (or a token file) when starting sluice serve, or call the admin listener, which serves it too"}.Write(w)
		})
	}
	return s.apiTokens.Require("", next)
}

// adminTokenEnv is where sluice serve reads the admin token from, for
// messages.
const adminTokenEnv = "SLUICE_ADMIN_TOKEN"

// AdminServer returns an http.Server for AdminHandler with timeouts set. Its
// write timeout leaves room for a 30 s CPU profile.
func (s *Server) AdminServer(addr string, opts AdminOptions) *http.Server {
	hs := s.HTTPServer(addr)
	hs.Handler = s.AdminHandler(opts)
	hs.WriteTimeout = 2 * time.Minute
	return hs
}

// Ready reports whether the store answers (Options.Ping).
func (s *Server) Ready(ctx context.Context) error { return s.front.Ready(ctx) }

// Drain marks the server as going away: its health checks answer
// NOT_SERVING (and /healthcheck 500) while the requests in flight finish.
func (s *Server) Drain() { s.front.Drain() }

// SetWindowReset gives the server the store's way to empty windows, for
// the admin listener's POST /api/v1/envoy/reset: reset deletes the windows
// of req's checks and returns how many held anything. Without one the
// endpoint answers 501.
func (s *Server) SetWindowReset(reset func(ctx context.Context, req *store.Request) (int, error)) {
	s.envoy.SetWindowReset(reset)
}

// LoadEnvoyConfig loads the directory of envoyproxy/ratelimit configuration
// files dir and serves its domains on Envoy's rate-limit service and /json
// (rls.Front.Load). It is called once, before serving; an invalid
// directory is returned as an error with every problem.
func (s *Server) LoadEnvoyConfig(dir string, opts EnvoyOptions) error {
	opts.Decide.Overrides = s.overrides
	return s.envoy.Load(dir, opts)
}

// UseEnvoyXDS serves the envoyproxy/ratelimit model from an xDS control
// plane (package xds) instead of files: it returns the client, which the
// caller runs (xds.Client.Run) while it serves. Each version the control
// plane pushes replaces the configuration (rls.Front.Apply); until the
// first, Envoy's requests are refused and the server is not ready, unless
// force. x's Apply, Logger and Registry are the server's.
func (s *Server) UseEnvoyXDS(opts EnvoyOptions, x xds.Options, force bool) (*xds.Client, error) {
	opts.Decide.Overrides = s.overrides
	x.Apply, x.Logger, x.Registry = s.envoy.Apply, s.front.Log, s.reg
	c, err := xds.New(x)
	if err != nil {
		return nil, err
	}
	if err := s.envoy.UseXDS(opts, force, c.Status); err != nil {
		return nil, err
	}
	return c, nil
}

// EnvoyConfig returns the Envoy configuration in use, or nil.
func (s *Server) EnvoyConfig() *envoy.Config { return s.envoy.Config() }
