package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/internal/deploy"
	"github.com/sluicerate/sluice/internal/envoy/xds"
	"github.com/sluicerate/sluice/internal/server"
	"github.com/sluicerate/sluice/internal/tracing"
)

// serving is a started sluice serve: its store, server, listeners and the
// goroutines that follow its configuration.
type serving struct {
	c      *serveCmd
	log    *slog.Logger
	cfg    *config.Config
	ds     *deploy.Settings
	store  *openedStore
	srv    *server.Server
	xds    *xds.Client
	traces *tracing.Provider

	hl, gl, al, ml net.Listener
	hs, as, ms     *http.Server
	gs             *grpc.Server
	errc           chan error
	stop           []func()
}

// start opens the store, builds the server and opens its listeners.
func (c *serveCmd) start(ctx context.Context, log *slog.Logger, cfg *config.Config, ds *deploy.Settings) (*serving, error) {
	st := &serving{c: c, log: log, cfg: cfg, ds: ds, errc: make(chan error, 5)}
	ok := false
	defer func() {
		if !ok {
			st.close()
		}
	}()
	var err error
	if ds.Tracing != nil {
		if st.traces, err = tracing.New(ctx, *ds.Tracing); err != nil {
			return nil, err
		}
	}
	if st.store, err = openStore(cfg, *c.redis, ds.RedisTLS, !*c.requireStore); err != nil {
		return nil, err
	}
	st.store.keepWarm(5 * time.Second)
	if err := st.store.Unreachable; err != nil {
		log.Warn("the store does not answer; serving unready (/readyz 503, decisions by on_error) until it does",
			slog.String("store", st.store.Where), slog.Any("err", err))
		wctx, stop := context.WithCancel(context.Background())
		st.stop = append(st.stop, stop)
		go st.store.waitReady(wctx, log, time.Second)
	}
	opts := server.Options{Logger: log, DenyCache: *c.denyCache, OutageInterval: *c.outageEvery, Ping: st.store.Ping,
		Inspector: st.store.inspector(), MaxInFlight: ds.MaxInFlight, RequestTimeout: ds.RequestTimeout,
		StoreTimeout: ds.StoreTimeout, MaxOverrides: *c.of.max, OverridePoll: *c.of.poll}
	if st.traces != nil {
		opts.Tracer = st.traces.Tracer()
	}
	if st.srv, err = server.New(st.store.Store, cfg, opts); err != nil {
		return nil, err
	}
	if err := st.envoy(); err != nil {
		return nil, err
	}
	if err := st.listen(); err != nil {
		return nil, err
	}
	ok = true
	return st, nil
}

// envoy sets up the envoyproxy/ratelimit model: from files or a control
// plane.
func (st *serving) envoy() error {
	opts, err := st.c.dep.EnvoyOptions()
	if err != nil {
		return err
	}
	switch dir := st.c.dep.EnvoyDir(); {
	case dir != "":
		if err := st.srv.LoadEnvoyConfig(dir, opts); err != nil {
			return fmt.Errorf("--envoy-config %s:\n%v", dir, err)
		}
	case st.ds.XDS != nil:
		if st.xds, err = st.srv.UseEnvoyXDS(opts, *st.ds.XDS, st.ds.XDSForce); err != nil {
			return err
		}
	default:
		return nil
	}
	st.srv.SetWindowReset(windowReset(st.store))
	return nil
}

// listen opens the listeners: HTTP, gRPC when asked for, the admin view
// unless its default address is taken, the metrics when asked for.
func (st *serving) listen() error {
	c := st.c
	var err error
	if st.hl, err = net.Listen("tcp", *c.httpAddr); err != nil {
		return fmt.Errorf("--http: %v", err)
	}
	if *c.grpcAddr != "" {
		if st.gl, err = net.Listen("tcp", *c.grpcAddr); err != nil {
			return fmt.Errorf("--grpc: %v", err)
		}
	}
	if st.ds.MetricsAddr != "" {
		if st.ml, err = net.Listen("tcp", st.ds.MetricsAddr); err != nil {
			return fmt.Errorf("--metrics: %v", err)
		}
	}
	st.al, err = listenAdmin(*c.af.addr, c.adminSet)
	switch {
	case err != nil && c.adminSet:
		return err
	case err != nil:
		st.log.Warn(err.Error())
	}
	return nil
}

// serve runs the listeners and the watchers until ctx ends or a listener
// fails, then drains the server within grace.
func (st *serving) serve(ctx context.Context, grace time.Duration) int {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st.follow(ctx)
	st.hs = st.srv.HTTPServer(*st.c.httpAddr)
	go func() { st.errc <- serveHTTP(st.hs, st.hl, st.ds.HTTPTLS) }()
	if st.gl != nil {
		st.gs = st.srv.GRPCServer(append([]grpc.ServerOption{grpc.MaxRecvMsgSize(1 << 20)}, st.ds.GRPCOpts...)...)
		go func() { st.errc <- st.gs.Serve(st.gl) }()
	}
	if st.al != nil {
		st.as = st.srv.AdminServer(st.al.Addr().String(), server.AdminOptions{Tokens: st.c.adminTokens})
		go func() { st.errc <- serveHTTP(st.as, st.al, st.ds.AdminTLS) }()
	}
	if st.ml != nil {
		mux := http.NewServeMux()
		mux.Handle(st.ds.MetricsPath, st.srv.MetricsHandler())
		st.ms = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { st.errc <- st.ms.Serve(st.ml) }()
	}
	st.log.Info("sluice serving", st.attrs()...)
	code := exitOK
	select {
	case <-ctx.Done():
		st.log.Info("shutting down; finishing the requests in flight", slog.Duration("timeout", grace))
	case err := <-st.errc:
		st.log.Error("server failed", slog.Any("err", err))
		code = 1
	}
	st.shutdown(grace)
	st.log.Info("sluice stopped")
	return code
}

// follow starts what follows the configuration: the runtime overrides,
// the file's watcher, the Envoy directory's, the xDS client.
func (st *serving) follow(ctx context.Context) {
	c := st.c
	st.srv.FollowOverrides(ctx, 2*time.Second)
	if *c.file != "" {
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		st.stop = append(st.stop, func() { signal.Stop(hup) })
		go st.srv.Watch(ctx, *c.file, *c.watch, hup)
	}
	if c.dep.EnvoyDir() != "" {
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		st.stop = append(st.stop, func() { signal.Stop(hup) })
		go st.srv.WatchEnvoyConfig(ctx, *c.watch, hup)
	}
	if st.xds != nil {
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := st.xds.Run(ctx); err != nil {
				st.errc <- err
			}
		}()
		st.stop = append(st.stop, func() { <-done })
	}
}

// attrs are the attributes of the "sluice serving" line.
func (st *serving) attrs() []any {
	c := st.c
	attrs := []any{slog.String("http", st.hl.Addr().String()), slog.String("store", st.store.Where),
		slog.String("config", *c.file), slog.Int("policies", len(st.cfg.Policies)), slog.Int("schedules", len(st.cfg.Schedules))}
	if st.gl != nil {
		attrs = append(attrs, slog.String("grpc", st.gl.Addr().String()), slog.Bool("grpc_tls", st.ds.GRPCTLS != nil))
	}
	if st.ds.HTTPTLS != nil {
		attrs = append(attrs, slog.Bool("http_tls", true))
	}
	if ec := st.srv.EnvoyConfig(); ec != nil && ec.Dir != "" {
		attrs = append(attrs, slog.String("envoy_config", ec.Dir), slog.Int("envoy_domains", len(ec.Domains())))
	}
	if st.xds != nil {
		attrs = append(attrs, slog.String("envoy_xds", st.ds.XDS.Server), slog.Bool("envoy_xds_tls", st.ds.XDS.TLS != nil))
	}
	if st.al != nil {
		attrs = append(attrs, slog.String("admin", st.al.Addr().String()), slog.Bool("admin_token", len(c.adminTokens) > 0))
	}
	if st.ml != nil {
		attrs = append(attrs, slog.String("metrics", st.ml.Addr().String()+st.ds.MetricsPath))
	}
	if st.traces != nil {
		attrs = append(attrs, slog.Bool("tracing", true))
	}
	return attrs
}

// shutdown drains the server and stops its listeners within grace.
func (st *serving) shutdown(grace time.Duration) {
	st.srv.Drain()
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	done := make(chan struct{})
	if st.gs != nil {
		go func() { st.gs.GracefulStop(); close(done) }()
	} else {
		close(done)
	}
	for _, h := range []struct {
		name string
		s    *http.Server
	}{{"HTTP", st.hs}, {"admin", st.as}, {"metrics", st.ms}} {
		if h.s == nil {
			continue
		}
		if err := h.s.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			st.log.Warn(h.name+" shutdown", slog.Any("err", err))
		}
	}
	select {
	case <-done:
	case <-sctx.Done():
		st.gs.Stop()
	}
	st.srv.Close() // the slices of budgeted rules go back before the store closes
}

// close stops the watchers, flushes the traces and closes the listeners
// not served and the store.
func (st *serving) close() {
	for _, f := range st.stop {
		f()
	}
	if st.traces != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := st.traces.Shutdown(ctx); err != nil {
			st.log.Warn("flushing the traces", slog.Any("err", err))
		}
		cancel()
	}
	for _, l := range []net.Listener{st.hl, st.gl, st.al, st.ml} {
		if l != nil {
			l.Close()
		}
	}
	if st.store != nil {
		st.store.Close()
	}
}

// h2 is the protocols an HTTP listener with TLS offers: HTTP/2 first.
var h2 = []string{"h2", "http/1.1"}

// serveHTTP serves hs on l, with TLS when cfg is set.
func serveHTTP(hs *http.Server, l net.Listener, cfg *tls.Config) error {
	if cfg == nil {
		return hs.Serve(l)
	}
	c := cfg.Clone()
	c.NextProtos = h2
	hs.TLSConfig = c
	return hs.ServeTLS(l, "", "")
}
