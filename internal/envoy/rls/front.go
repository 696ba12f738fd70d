// Package rls is Envoy's rate-limit service on sluice serve:
// envoy.service.ratelimit.v3.RateLimitService over gRPC, and
// envoyproxy/ratelimit's HTTP endpoints (POST /json, /healthcheck,
// /rlconfig, and the admin listener's window reset), over a front.Front.
//
// A request whose domain the loaded envoyproxy/ratelimit configuration
// serves (package envoy) is decided by its descriptors (package decide);
// one whose domain names a policy of sluice's configuration file is
// decided as that policy, its descriptors' entries the attributes
// (policy.go). Both are answered by package decide's one builder.
package rls

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/sluicerate/sluice/internal/envoy"
	"github.com/sluicerate/sluice/internal/envoy/decide"
	"github.com/sluicerate/sluice/internal/envoy/xds"
	"github.com/sluicerate/sluice/internal/front"
	"github.com/sluicerate/sluice/store"
)

// Options configures the envoyproxy/ratelimit model (Front.Load).
type Options struct {
	// Load configures loading the directory.
	Load envoy.LoadOptions

	// Decide configures deciding: counting, shadow mode, headers.
	Decide decide.Options

	// RequireDomain keeps the server unready while the configuration in
	// use has no domain (HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED).
	RequireDomain bool
}

// Front serves Envoy's rate-limit service. Its envoyproxy/ratelimit model
// is off until Load: Envoy's requests then name sluice policies. It is
// safe for concurrent use; create one with New.
type Front struct {
	f       *front.Front
	reg     prometheus.Registerer
	cfg     atomic.Pointer[envoy.Config]
	dir     string
	opts    Options
	metrics *metrics // envoyproxy/ratelimit's, once loaded
	reset   func(ctx context.Context, req *store.Request) (int, error)
	xds     func() xds.Status          // the control plane's client, when the configuration comes from one
	applied atomic.Pointer[xdsVersion] // the control plane's version in use
	tracer  trace.Tracer               // nil: answers are not traced

	onConfig func(*envoy.Config) // told of each configuration put in use
}

// New returns the service over f, whose envoyproxy/ratelimit metrics go to
// reg once a configuration is loaded.
func New(f *front.Front, reg prometheus.Registerer) *Front { return &Front{f: f, reg: reg} }

// TextRequests are the requests whose handlers check their strings
// (grpcapi.NewServer's text).
var TextRequests = []proto.Message{&rlsv3.RateLimitRequest{}}

// Register registers the service on gs.
func (e *Front) Register(gs *grpc.Server) {
	rlsv3.RegisterRateLimitServiceServer(gs, &service{e: e})
}

// SetWindowReset gives the service the store's way to empty windows, for
// the admin listener's reset: reset deletes the windows of req's checks
// and returns how many held anything. Without one the endpoint answers
// 501.
func (e *Front) SetWindowReset(reset func(ctx context.Context, req *store.Request) (int, error)) {
	e.reset = reset
}

// OnConfig has f told of each configuration put in use, before requests
// see it (the runtime overrides' rules). Call it before Load.
func (e *Front) OnConfig(f func(*envoy.Config)) { e.onConfig = f }

// use puts cfg in use.
func (e *Front) use(cfg *envoy.Config) {
	if e.onConfig != nil {
		e.onConfig(cfg)
	}
	e.cfg.Store(cfg)
}

// Load loads the directory of envoyproxy/ratelimit configuration files dir
// and serves its domains: a request whose domain is configured there is
// decided by its descriptors; one whose domain is a policy of the
// configuration file is decided as before; any other domain is OK with no
// limit. It is called once, before serving; an invalid directory is
// returned as an error with every problem.
func (e *Front) Load(dir string, opts Options) error {
	if e.metrics != nil {
		return errors.New("server: the Envoy configuration is already loaded; reload it with ReloadEnvoyConfig")
	}
	cfg, err := envoy.Load(dir, opts.Load)
	if err != nil {
		return err
	}
	e.dir, e.opts = dir, opts
	e.metrics = newMetrics(e.reg)
	e.metrics.loads.WithLabelValues().Inc()
	e.use(cfg)
	e.logNotes(cfg)
	if opts.RequireDomain {
		e.f.AddReadiness(e.ready)
	}
	return nil
}

// Config returns the configuration in use, or nil.
func (e *Front) Config() *envoy.Config { return e.cfg.Load() }

// Dir returns the directory loaded; "" when none is.
func (e *Front) Dir() string { return e.dir }

func (e *Front) logNotes(cfg *envoy.Config) {
	for _, n := range cfg.Notes {
		e.f.Log.Warn("envoy configuration: "+n, slog.String("source", e.source()))
	}
}

// source names where the configuration comes from, for logs.
func (e *Front) source() string {
	if e.xds != nil {
		return "xds " + e.xds().Server
	}
	return e.dir
}

// Reload reloads the directory and, when it is valid, swaps it in: each
// request is decided wholly under the old or the new files. An invalid
// directory is logged with every problem and returned; the files in use
// stay.
func (e *Front) Reload() error {
	if e.metrics == nil || e.xds != nil {
		return errors.New("server: no directory of Envoy configuration files is loaded")
	}
	cfg, err := envoy.Load(e.dir, e.opts.Load)
	e.f.Metrics.Reload(err)
	if err != nil {
		e.metrics.loadErrors.WithLabelValues().Inc()
		e.f.Log.Error("Envoy configuration not reloaded; the previous one stays in use", slog.String("dir", e.dir), slog.Any("err", err))
		return err
	}
	e.use(cfg)
	e.metrics.loads.WithLabelValues().Inc()
	e.f.Log.Info("Envoy configuration reloaded", slog.String("dir", e.dir), slog.Int("files", len(cfg.Files)), slog.Int("domains", len(cfg.Domains())))
	e.logNotes(cfg)
	return nil
}
