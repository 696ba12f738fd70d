// Package server is sluice's network front: the HTTP JSON API, forward-auth
// for proxies, sluice's own gRPC service and Envoy's rate-limit service, with
// Prometheus metrics, health checks and hot reload of the configuration.
//
// A Server holds one store for its lifetime and a configuration that can be
// swapped at any time: every request reads the configuration once, so it is
// decided entirely under either the old or the new one.
package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"reflect"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/internal/edge"
	"github.com/sluicerate/sluice/internal/outage"
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

	// Queues reads a schedule's queue for the admin view's inspector.
	// Default: none (the inspector shows no queued slots).
	Queues QueueReader
}

// Server serves sluice over HTTP and gRPC. It is safe for concurrent use.
// Create one with New.
type Server struct {
	store   *instrumentedStore
	log     *slog.Logger
	outage  *outage.Reporter // the store's failures, for every API
	reg     *prometheus.Registry
	metrics *metrics
	maxBody int64
	batch   int // the most requests of a batch
	timeout time.Duration
	ping    func(ctx context.Context) error
	state   atomic.Pointer[state]
	envoy   envoyFront  // envoyproxy/ratelimit's model, when loaded (envoy_config.go)
	view    *view       // what the admin view shows (admin.go)
	queues  QueueReader // the admin inspector's reader of queues

	// The deny cache's size, and what the caches of the configurations
	// swapped out counted (denycache.go).
	denyCache int
	denials   denyTotals
}

// state is one loaded configuration and what is derived from it. It is
// never modified once published.
type state struct {
	cfg      *config.Config
	lim      *sluice.Limiter
	policies *edge.Set[*http.Request] // the configured policies, with forward-auth's keys
	loaded   time.Time
}

// New returns a Server over store with the configuration cfg. The server
// does not close the store.
func New(store store.Store, cfg *config.Config, opts Options) (*Server, error) {
	if store == nil {
		return nil, errors.New("server: store is nil")
	}
	s := &Server{
		log:     opts.Logger,
		reg:     opts.Registry,
		maxBody: opts.MaxBodyBytes,
		batch:   opts.MaxBatch,
		timeout: opts.StoreTimeout,
		ping:    opts.Ping,

		denyCache: opts.DenyCache,
	}
	if p, ok := store.(interface{ Ping(context.Context) error }); ok && s.ping == nil {
		s.ping = p.Ping
	}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if s.reg == nil {
		s.reg = prometheus.NewRegistry()
		s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	if s.maxBody <= 0 {
		s.maxBody = 64 << 10
	}
	if s.batch <= 0 {
		s.batch = DefaultMaxBatch
	}
	s.metrics = newMetrics(s.reg)
	clock := opts.Clock
	if clock == nil {
		clock = systemClock{}
	}
	s.view, s.queues = newView(clock), opts.Queues
	s.outage = outage.New(outage.Config{Logger: s.log, Interval: opts.OutageInterval, Now: clock.Now, Circuit: s.circuit})
	s.metrics.view = s.view
	s.reg.MustRegister(s.viewCollectors()...)
	s.reg.MustRegister(s.denyCacheCollectors()...)
	s.store = &instrumentedStore{Store: store, m: s.metrics}
	if err := s.Swap(cfg); err != nil {
		return nil, err
	}
	return s, nil
}

// Swap makes cfg the configuration of every request that starts after it
// returns. Requests in flight finish under the configuration they started
// with. The store is not changed: a change to the file's store section needs
// a restart, and Swap logs a warning when it sees one.
func (s *Server) Swap(cfg *config.Config) error {
	if cfg == nil {
		return errors.New("server: config is nil")
	}
	st, err := s.newState(cfg)
	if err != nil {
		return err
	}
	if old := s.state.Load(); old != nil && storeChanged(old.cfg.Store, cfg.Store) {
		s.log.Warn("the store section changed; restart sluice to use the new store (the other changes are applied)",
			slog.String("file", cfg.File))
	}
	s.publish(st)
	return nil
}

// Config returns the configuration in use.
func (s *Server) Config() *config.Config { return s.state.Load().cfg }

func (s *Server) newState(cfg *config.Config) (*state, error) {
	lc := sluice.Config{Timeout: s.timeout, DenyCache: s.cacheDenials(cfg)}
	if cfg.Store != nil {
		lc.OnError = cfg.Store.OnError
		if cfg.Store.Timeout > 0 {
			lc.Timeout = cfg.Store.Timeout
		}
	}
	ip, err := httplimit.NewIPResolver(httplimit.IPConfig{TrustedProxies: cfg.ForwardAuth.TrustedProxies})
	if err != nil {
		return nil, fmt.Errorf("server: forward_auth: %w", err)
	}
	st := &state{cfg: cfg, lim: sluice.NewLimiter(s.store.forLimiter(), lc), loaded: time.Now()}
	policies := make([]*sluice.Policy, len(cfg.Policies))
	for i := range cfg.Policies {
		policies[i] = &cfg.Policies[i]
	}
	st.policies, err = edge.NewSet(edge.Config[*http.Request]{
		Limiter:      st.lim,
		Policies:     policies,
		Keys:         forwardKeys(&cfg.ForwardAuth, ip),
		KeysOptional: true,
		Absent:       errNoHeader,
		Log: edge.Log{
			Logger:      s.log,
			Outage:      s.outage,
			StoreFailed: "store failed; decided by on_error",
			Shadow:      "shadow policy would have denied",
			Failed:      "deciding a request",
		},
	})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	return st, nil
}

// circuit returns the state of the circuit breaker of the configuration
// in use.
func (s *Server) circuit() string {
	if st := s.state.Load(); st != nil {
		return st.lim.Circuit()
	}
	return "closed"
}

// storeChanged reports whether two store sections differ.
func storeChanged(a, b *config.Store) bool {
	if (a == nil) != (b == nil) {
		return true
	}
	return !reflect.DeepEqual(a, b)
}

// Handler returns the HTTP handler of every endpoint: the /v1 API,
// forward-auth, /metrics, /healthz and /readyz. Unknown routes are answered
// 404 and known routes with the wrong method 405, both as problem+json.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/decide", s.handleDecide(edge.OpDecide))
	mux.HandleFunc("POST /v1/peek", s.handleDecide(edge.OpPeek))
	mux.HandleFunc("POST /v1/record", s.handleDecide(edge.OpRecord))
	mux.HandleFunc("POST /v1/reserve", s.handleReserve)
	mux.HandleFunc("POST /v1/cancel", s.handleCancel)
	mux.HandleFunc("GET /v1/policies", s.handlePolicies)
	mux.HandleFunc("/v1/forward-auth", s.handleForwardAuth)
	mux.Handle("GET /metrics", s.metricsHandler())
	mux.HandleFunc("GET /healthz", s.handleHealthz)
	mux.HandleFunc("GET /readyz", s.handleReadyz)
	s.envoyRoutes(mux)
	return s.recoverer(notFound(mux))
}

// notFound answers unknown routes and wrong methods with problem+json
// instead of the mux's plain text.
func notFound(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern == "" {
			rec := &statusRecorder{header: http.Header{}}
			h.ServeHTTP(rec, r)
			switch rec.status {
			case http.StatusMethodNotAllowed:
				w.Header().Set("Allow", rec.header.Get("Allow"))
				httplimit.Problem{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed",
					Detail: fmt.Sprintf("%s does not accept %s; use %s", r.URL.Path, r.Method, rec.header.Get("Allow"))}.Write(w)
			case http.StatusNotFound:
				httplimit.Problem{Status: http.StatusNotFound, Code: "not_found",
					Detail: fmt.Sprintf("no endpoint at %s; see GET /v1/policies and the API documentation", r.URL.Path)}.Write(w)
			default:
				// Redirects the mux makes to clean a path.
				for k, v := range rec.header {
					w.Header()[k] = v
				}
				w.WriteHeader(rec.status)
			}
			return
		}
		h.ServeHTTP(w, r)
	})
}

// statusRecorder captures what the mux's fallback handlers write.
type statusRecorder struct {
	header http.Header
	status int
}

func (r *statusRecorder) Header() http.Header         { return r.header }
func (r *statusRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *statusRecorder) WriteHeader(code int)        { r.status = code }

// recoverer answers a panicking handler with 500 and logs the panic.
func (s *Server) recoverer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("panic serving a request", slog.String("path", r.URL.Path), slog.Any("panic", v))
				httplimit.Problem{Status: http.StatusInternalServerError, Code: "internal"}.Write(w)
			}
		}()
		next.ServeHTTP(w, r)
	})
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
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
}

// Ready reports whether the store answers (Options.Ping).
func (s *Server) Ready(ctx context.Context) error {
	if s.ping == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return s.ping(ctx)
}
