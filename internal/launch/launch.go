// Package launch starts what the sluice command runs on: it opens the
// store a command names (Open) and runs sluice serve's lifecycle (Start,
// then Server.Serve): tracing, the store, the server, the Envoy
// configuration from files or a control plane, the listeners, the
// watchers that follow the configuration, and the shutdown.
package launch

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"google.golang.org/grpc"

	"github.com/sluicerate/sluice/internal/adminauth"
	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/internal/deploy"
	"github.com/sluicerate/sluice/internal/envoy/xds"
	"github.com/sluicerate/sluice/internal/server"
	"github.com/sluicerate/sluice/internal/tracing"
)

// Options are what sluice serve serves and how: its command line, the
// configuration file and the deploy settings, resolved. The zero value of
// each field is stated on it; Log is required.
type Options struct {
	Log    *slog.Logger
	Config *config.Config   // the file's policies, schedules and store; nil: none
	File   string           // Config's file, followed (watched, reloaded on SIGHUP); "": none
	Deploy *deploy.Settings // nil: no TLS, xDS, metrics listener or tracing

	HTTPAddr     string // the HTTP listener's address; required
	GRPCAddr     string // "": no gRPC listener, unless Envoy's service is served (then :8081)
	RedisURL     string // "": the file's store
	RequireStore bool   // a standalone Redis that does not answer at the start is an error, not a start unready

	DenyCache      int           // see server.Options
	OutageInterval time.Duration // see server.Options
	MaxOverrides   int           // see server.Options
	OverridePoll   time.Duration // see server.Options
	Watch          time.Duration // how often to check File and EnvoyDir for changes; 0: only on SIGHUP
	Grace          time.Duration // how long requests in flight may take to finish on shutdown

	Admin       Admin            // the admin listener; zero: none
	AdminTokens adminauth.Tokens // required of the admin listener's requests and of the public credits and usage; none: no token

	EnvoyDir string              // a directory of envoyproxy/ratelimit files to serve; "": none
	Envoy    server.EnvoyOptions // the Envoy model's, when EnvoyDir is set or Deploy.XDS
}

// envoyGRPCAddr is where Envoy's rate-limit service listens unless
// Options.GRPCAddr says otherwise: envoyproxy/ratelimit's port.
const envoyGRPCAddr = ":8081"

// Server is a started sluice serve: its store, server, listeners and the
// goroutines that follow its configuration. Serve and Close are each
// called once, by its owner.
type Server struct {
	opts   Options
	log    *slog.Logger
	ds     *deploy.Settings
	store  *Store
	srv    *server.Server
	xds    *xds.Client
	traces *tracing.Provider

	hl, gl, al, ml net.Listener
	hs, as, ms     *http.Server
	gs             *grpc.Server
	errc           chan error
	stop           []func()
}

// Start opens the store, builds the server and opens its listeners. The
// caller serves it (Serve) and then closes it (Close).
func Start(ctx context.Context, opts Options) (*Server, error) {
	if opts.Config == nil {
		opts.Config = &config.Config{}
	}
	if opts.Deploy == nil {
		opts.Deploy = &deploy.Settings{}
	}
	if opts.GRPCAddr == "" && (opts.Deploy.XDS != nil || opts.EnvoyDir != "") {
		opts.GRPCAddr = envoyGRPCAddr
	}
	s := &Server{opts: opts, log: opts.Log, ds: opts.Deploy, errc: make(chan error, 5)}
	if err := s.start(ctx); err != nil {
		s.Close()
		return nil, err
	}
	setGCPercent(os.Getenv, s.store.Redis != nil)
	return s, nil
}

// start is Start's work: tracing, the store, the server, the Envoy model
// and the listeners, in that order.
func (s *Server) start(ctx context.Context) error {
	o := &s.opts
	var err error
	if s.ds.Tracing != nil {
		if s.traces, err = tracing.New(ctx, *s.ds.Tracing); err != nil {
			return err
		}
	}
	if s.store, err = OpenWith(o.Config, o.RedisURL, Dial{TLS: s.ds.RedisTLS, Waitable: !o.RequireStore}); err != nil {
		return err
	}
	s.store.KeepWarm(5 * time.Second)
	if err := s.store.Unreachable; err != nil {
		s.log.Warn("the store does not answer; serving unready (/readyz 503, decisions by on_error) until it does",
			slog.String("store", s.store.Where), slog.Any("err", err))
		wctx, stop := context.WithCancel(context.Background())
		s.stop = append(s.stop, stop)
		go s.store.WaitReady(wctx, s.log, time.Second)
	}
	sopts := server.Options{Logger: s.log, DenyCache: o.DenyCache, OutageInterval: o.OutageInterval, Ping: s.store.Ping,
		Inspector: s.store.Inspector(), MaxInFlight: s.ds.MaxInFlight, RequestTimeout: s.ds.RequestTimeout,
		StoreTimeout: s.ds.StoreTimeout, MaxOverrides: o.MaxOverrides, OverridePoll: o.OverridePoll, AdminTokens: o.AdminTokens}
	if s.traces != nil {
		sopts.Tracer = s.traces.Tracer()
	}
	if s.srv, err = server.New(s.store.Store, o.Config, sopts); err != nil {
		return err
	}
	if err := s.envoy(); err != nil {
		return err
	}
	return s.listen()
}

// envoy sets up the envoyproxy/ratelimit model: from files or a control
// plane.
func (s *Server) envoy() error {
	var err error
	switch {
	case s.opts.EnvoyDir != "":
		if err := s.srv.LoadEnvoyConfig(s.opts.EnvoyDir, s.opts.Envoy); err != nil {
			return fmt.Errorf("--envoy-config %s:\n%v", s.opts.EnvoyDir, err)
		}
	case s.ds.XDS != nil:
		if s.xds, err = s.srv.UseEnvoyXDS(s.opts.Envoy, *s.ds.XDS, s.ds.XDSForce); err != nil {
			return err
		}
	default:
		return nil
	}
	s.srv.SetWindowReset(s.store.WindowReset())
	return nil
}

// listen opens the listeners: HTTP, gRPC when asked for, the admin view
// unless its default address is taken, the metrics when asked for.
func (s *Server) listen() error {
	var err error
	if s.hl, err = net.Listen("tcp", s.opts.HTTPAddr); err != nil {
		return fmt.Errorf("--http: %v", err)
	}
	if s.opts.GRPCAddr != "" {
		if s.gl, err = net.Listen("tcp", s.opts.GRPCAddr); err != nil {
			return fmt.Errorf("--grpc: %v", err)
		}
	}
	if s.ds.MetricsAddr != "" {
		if s.ml, err = net.Listen("tcp", s.ds.MetricsAddr); err != nil {
			return fmt.Errorf("--metrics: %v", err)
		}
	}
	s.al, err = listenAdmin(s.opts.Admin.Addr, s.opts.Admin.Explicit)
	switch {
	case err != nil && s.opts.Admin.Explicit:
		return err
	case err != nil:
		s.log.Warn(err.Error())
	}
	return nil
}
