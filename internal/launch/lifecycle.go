package launch

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"github.com/sluicerate/sluice/internal/server"
)

// Serve runs the listeners and the watchers until ctx ends or a listener
// fails, then drains the server within Options.Grace. It returns nil when
// ctx ended, else the listener's error (logged already).
func (s *Server) Serve(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.follow(ctx)
	s.hs = s.srv.HTTPServer(s.opts.HTTPAddr)
	go func() { s.errc <- serveHTTP(s.hs, s.hl, s.ds.HTTPTLS) }()
	if s.gl != nil {
		s.gs = s.srv.GRPCServer(append([]grpc.ServerOption{grpc.MaxRecvMsgSize(1 << 20)}, s.ds.GRPCOpts...)...)
		go func() { s.errc <- s.gs.Serve(s.gl) }()
	}
	if s.al != nil {
		s.as = s.srv.AdminServer(s.al.Addr().String(), server.AdminOptions{Tokens: s.opts.AdminTokens})
		go func() { s.errc <- serveHTTP(s.as, s.al, s.ds.AdminTLS) }()
	}
	if s.ml != nil {
		mux := http.NewServeMux()
		mux.Handle(s.ds.MetricsPath, s.srv.MetricsHandler())
		s.ms = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		go func() { s.errc <- s.ms.Serve(s.ml) }()
	}
	s.log.Info("sluice serving", s.attrs()...)
	var failed error
	select {
	case <-ctx.Done():
		s.log.Info("shutting down; finishing the requests in flight", slog.Duration("timeout", s.opts.Grace))
	case failed = <-s.errc:
		s.log.Error("server failed", slog.Any("err", failed))
	}
	s.shutdown(s.opts.Grace)
	s.log.Info("sluice stopped")
	return failed
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

// follow starts what follows the configuration: the runtime overrides,
// the file's watcher, the Envoy directory's, the xDS client.
func (s *Server) follow(ctx context.Context) {
	s.srv.FollowOverrides(ctx, 2*time.Second)
	if s.opts.File != "" {
		go s.srv.Watch(ctx, s.opts.File, s.opts.Watch, s.notifyHUP())
	}
	if s.opts.EnvoyDir != "" {
		go s.srv.WatchEnvoyConfig(ctx, s.opts.Watch, s.notifyHUP())
	}
	if s.xds != nil {
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := s.xds.Run(ctx); err != nil {
				s.errc <- err
			}
		}()
		s.stop = append(s.stop, func() { <-done })
	}
}

// notifyHUP returns a channel of SIGHUP, stopped on Close.
func (s *Server) notifyHUP() chan os.Signal {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	s.stop = append(s.stop, func() { signal.Stop(hup) })
	return hup
}

// attrs are the attributes of the "sluice serving" line.
func (s *Server) attrs() []any {
	o := &s.opts
	attrs := []any{slog.String("http", s.hl.Addr().String()), slog.String("store", s.store.Where),
		slog.String("config", o.File), slog.Int("policies", len(o.Config.Policies)), slog.Int("schedules", len(o.Config.Schedules))}
	if s.gl != nil {
		attrs = append(attrs, slog.String("grpc", s.gl.Addr().String()), slog.Bool("grpc_tls", s.ds.GRPCTLS != nil))
	}
	if s.ds.HTTPTLS != nil {
		attrs = append(attrs, slog.Bool("http_tls", true))
	}
	if ec := s.srv.EnvoyConfig(); ec != nil && ec.Dir != "" {
		attrs = append(attrs, slog.String("envoy_config", ec.Dir), slog.Int("envoy_domains", len(ec.Domains())))
	}
	if s.xds != nil {
		attrs = append(attrs, slog.String("envoy_xds", s.ds.XDS.Server), slog.Bool("envoy_xds_tls", s.ds.XDS.TLS != nil))
	}
	if s.al != nil {
		attrs = append(attrs, slog.String("admin", s.al.Addr().String()), slog.Bool("admin_token", len(o.AdminTokens) > 0))
	}
	if s.ml != nil {
		attrs = append(attrs, slog.String("metrics", s.ml.Addr().String()+s.ds.MetricsPath))
	}
	if s.traces != nil {
		attrs = append(attrs, slog.Bool("tracing", true))
	}
	return attrs
}

// shutdown drains the server and stops its listeners within grace.
func (s *Server) shutdown(grace time.Duration) {
	s.srv.Drain()
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	done := make(chan struct{})
	if s.gs != nil {
		go func() { s.gs.GracefulStop(); close(done) }()
	} else {
		close(done)
	}
	for _, h := range []struct {
		name string
		s    *http.Server
	}{{"HTTP", s.hs}, {"admin", s.as}, {"metrics", s.ms}} {
		if h.s == nil {
			continue
		}
		if err := h.s.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Warn(h.name+" shutdown", slog.Any("err", err))
		}
	}
	select {
	case <-done:
	case <-sctx.Done():
		s.gs.Stop()
	}
	s.srv.Close() // the slices of budgeted rules go back before the store closes
}

// Close stops the watchers, flushes the traces and closes the listeners
// not served and the store.
func (s *Server) Close() {
	for _, f := range s.stop {
		f()
	}
	if s.traces != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := s.traces.Shutdown(ctx); err != nil {
			s.log.Warn("flushing the traces", slog.Any("err", err))
		}
		cancel()
	}
	for _, l := range []net.Listener{s.hl, s.gl, s.al, s.ml} {
		if l != nil {
			l.Close()
		}
	}
	if s.store != nil {
		s.store.Close()
	}
}
