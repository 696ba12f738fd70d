// Package front is what every front of sluice serve shares: the HTTP JSON
// API and forward-auth (package httpapi), sluice's gRPC service (grpcapi),
// Envoy's rate-limit service (envoy/rls) and the admin view (admin) each
// render their protocol over one Front.
//
// A Front holds the configuration snapshot every request reads once (so
// that it is decided wholly under either the old or the new configuration),
// the metrics (Answered is the one count of a request answered, whatever
// its protocol), the store instrumented with them, the outage reporter,
// readiness, problems and their gRPC statuses, and the reading of request
// bodies.
package front

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/edge"
	"github.com/sluicerate/sluice/internal/front/quotastore"
	"github.com/sluicerate/sluice/internal/outage"
	"github.com/sluicerate/sluice/store"
)

// Options configures a Front. Registry is required; the zero value of the
// others is their default.
type Options struct {
	// Logger receives the fronts' logs. Default: discard.
	Logger *slog.Logger

	// Registry is where the metrics are registered.
	Registry *prometheus.Registry

	// Observer is told of decisions and store calls as they are counted
	// (the admin view). Default: none.
	Observer Observer

	// OutageInterval is the least time between two summaries of a store
	// outage in the logs (outage.Config.Interval).
	OutageInterval time.Duration

	// Now is the clock of the outage reporter and of the leases the
	// metrics count (when a lease this server granted expires). Default:
	// time.Now.
	Now func() time.Time

	// MaxBodyBytes caps a request body; a larger one is answered 413.
	// Default 64 KiB.
	MaxBodyBytes int64

	// MaxBatch caps the requests of one batch. Default DefaultMaxBatch.
	MaxBatch int

	// Ping checks that the store answers (Ready). Default: the store's
	// own Ping(context.Context) error method when it has one, else always
	// ready.
	Ping func(ctx context.Context) error

	// Tracer, when set, traces every store call (a span under the
	// request's). Default: none.
	Tracer trace.Tracer
}

// DefaultMaxBatch is Options.MaxBatch's default.
const DefaultMaxBatch = 1000

// Front is what the fronts share. It is safe for concurrent use; create
// one with New.
type Front struct {
	Log      *slog.Logger
	Metrics  *Metrics
	Outage   *outage.Reporter // the store's failures, for every front
	Store    *Store           // the store, instrumented
	Over     *OverLimit       // costs recorded over a limit (the Limiter's OnOverLimit hook)
	MaxBody  int64
	MaxBatch int

	ping     func(ctx context.Context) error
	checks   []func() error // readiness besides the store's (AddReadiness)
	draining atomic.Bool
	state    atomic.Pointer[State]
	denials  denyTotals
	abandons abandonTotals
	budgets  budgetTotals
}

// New returns a Front over st. Publish its first State before serving.
func New(st store.Store, opts Options) *Front {
	f := &Front{Log: opts.Logger, MaxBody: opts.MaxBodyBytes, MaxBatch: opts.MaxBatch, ping: opts.Ping}
	if p, ok := st.(interface{ Ping(context.Context) error }); ok && f.ping == nil {
		f.ping = p.Ping
	}
	if f.Log == nil {
		f.Log = slog.New(slog.DiscardHandler)
	}
	if f.MaxBody <= 0 {
		f.MaxBody = 64 << 10
	}
	if f.MaxBatch <= 0 {
		f.MaxBatch = DefaultMaxBatch
	}
	f.Metrics = NewMetrics(opts.Registry, opts.Observer)
	if opts.Now != nil {
		f.Metrics.leases.now = opts.Now
	}
	f.Outage = outage.New(outage.Config{Logger: f.Log, Interval: opts.OutageInterval, Now: opts.Now, Circuit: f.circuit})
	f.Store = &Store{Store: st, m: f.Metrics, tracer: opts.Tracer}
	f.Store.Calls = quotastore.Calls{Store: st, Observe: f.Store.Observe}
	f.Over = NewOverLimit(opts.Registry, f.Log, opts.Now)
	opts.Registry.MustRegister(f.denyCacheCollectors()...)
	opts.Registry.MustRegister(f.abandonCollectors()...)
	opts.Registry.MustRegister(f.budgetCollectors()...)
	return f
}

// circuit returns the state of the circuit breaker of the configuration
// in use.
func (f *Front) circuit() string {
	if st := f.state.Load(); st != nil {
		return st.Limiter.Circuit()
	}
	return "closed"
}

// Answered counts a request of api answered with code: an HTTP status or
// a gRPC code's name. Every front counts every request here, each request
// of a batch on its own.
func (f *Front) Answered(api, code string) {
	f.Metrics.requests.WithLabelValues(api, code).Inc()
}

// Fail answers a request of api with p, counting it.
func (f *Front) Fail(w http.ResponseWriter, api string, p *httplimit.Problem) {
	f.Answered(api, StatusCode(p.Status))
	p.Write(w)
}

// OK answers a request of api with the JSON v, counting it.
func (f *Front) OK(w http.ResponseWriter, api string, v any) {
	f.Answered(api, "200")
	WriteJSON(w, v)
}

// Counted counts the decision of o, unless it is a peek's.
func (f *Front) Counted(op edge.Op, o *edge.Outcome) {
	if ds := o.Decisions(); op != edge.OpPeek && len(ds) > 0 && (o.Kind == edge.Allowed || o.Kind == edge.Denied || o.Kind == edge.Unavailable) {
		f.Metrics.Decision(o.Policy.Name, &ds[len(ds)-1])
	}
}

// Call is what a request of api asks of the edge: its cost, what deciding
// does, and the api first in every line logged for it.
func Call(api string, op edge.Op, cost int64) edge.Call {
	return edge.Call{Cost: cost, Op: op, Tag: slog.String("api", api)}
}

// Ready reports whether the store answers (Options.Ping), within 2 s.
func (f *Front) Ready(ctx context.Context) error {
	if f.ping == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return f.ping(ctx)
}

// Ping is Ready, timed and counted as the store's ping.
func (f *Front) Ping(ctx context.Context) error {
	start := time.Now()
	err := f.Ready(ctx)
	f.Store.Observe("ping", start, err)
	return err
}

// AddReadiness adds a check that the server must pass to be serving (and
// ready) besides the store's: a configuration still awaited, say. It is
// called before serving.
func (f *Front) AddReadiness(check func() error) { f.checks = append(f.checks, check) }

// Unready returns why the server is not ready besides the store: the error
// of the first readiness check that fails, or nil.
func (f *Front) Unready() error {
	for _, c := range f.checks {
		if err := c(); err != nil {
			return err
		}
	}
	return nil
}

// Drain marks the server as going away: Serving reports false from now on,
// while the requests in flight finish.
func (f *Front) Drain() { f.draining.Store(true) }

// Serving reports whether the server serves: it is not draining, its
// readiness checks pass and the store answers a ping. The health checks of
// gRPC and Envoy follow it.
func (f *Front) Serving(ctx context.Context) bool {
	return !f.draining.Load() && f.Unready() == nil && f.Ping(ctx) == nil
}
