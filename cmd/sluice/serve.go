package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/internal/server"
)

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: sluice serve --config FILE [--http ADDR] [--grpc ADDR] [--redis URL]

Serves the policies and schedules of FILE: the HTTP JSON API, forward-auth,
/metrics, /healthz and /readyz on --http, and sluice's gRPC service and
Envoy's rate-limit service on --grpc. The store is Redis at --redis, else
the file's store section, else memory. The file is reloaded on SIGHUP and
when it changes; an invalid file is logged and the previous one kept.
SIGTERM or SIGINT stops the server after the requests in flight.

flags:`)
		fs.PrintDefaults()
	}
	file := fs.String("config", "", "the configuration `file` (required)")
	httpAddr := fs.String("http", ":8080", "serve HTTP on this `address`")
	grpcAddr := fs.String("grpc", "", "serve gRPC on this `address` (default: no gRPC)")
	redisURL := fs.String("redis", "", "use Redis at this `URL` (redis://[user:password@]host:port[/db]) instead of the file's store")
	logFormat := fs.String("log-format", "text", "log `format`: text or json")
	logLevel := fs.String("log-level", "info", "log `level`: debug, info, warn or error")
	watch := fs.Duration("watch", time.Second, "check the file for changes this often (0: only on SIGHUP)")
	grace := fs.Duration("shutdown-timeout", 30*time.Second, "how long requests in flight may take to finish on shutdown")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "sluice serve: "+format+"\n", a...)
		return exitUsage
	}
	if fs.NArg() > 0 {
		return fail("unexpected argument %q", fs.Arg(0))
	}
	if *file == "" {
		return fail("--config FILE is required")
	}
	log, err := newLogger(stderr, *logFormat, *logLevel)
	if err != nil {
		return fail("%v", err)
	}
	cfg, err := config.Load(*file)
	if err != nil {
		return fail("%v", err)
	}
	store, err := openConfiguredStore(cfg, *redisURL)
	if err != nil {
		return fail("%v", err)
	}
	defer store.Close()
	srv, err := server.New(store.Store, cfg, server.Options{Logger: log, Ping: store.Ping})
	if err != nil {
		return fail("%v", err)
	}

	hl, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		return fail("--http: %v", err)
	}
	var gl net.Listener
	if *grpcAddr != "" {
		if gl, err = net.Listen("tcp", *grpcAddr); err != nil {
			hl.Close()
			return fail("--grpc: %v", err)
		}
	}

	ctx, stop := context.WithCancel(ctx)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	go srv.Watch(ctx, *file, *watch, hup)

	errc := make(chan error, 2)
	hs := srv.HTTPServer(*httpAddr)
	go func() { errc <- hs.Serve(hl) }()
	var gs *grpc.Server
	if gl != nil {
		gs = grpc.NewServer(grpc.MaxRecvMsgSize(1 << 20))
		srv.RegisterGRPC(gs)
		go func() { errc <- gs.Serve(gl) }()
	}
	attrs := []any{slog.String("http", hl.Addr().String()), slog.String("store", store.Where),
		slog.String("config", *file), slog.Int("policies", len(cfg.Policies)), slog.Int("schedules", len(cfg.Schedules))}
	if gl != nil {
		attrs = append(attrs, slog.String("grpc", gl.Addr().String()))
	}
	log.Info("sluice serving", attrs...)

	code := exitOK
	select {
	case <-ctx.Done():
		log.Info("shutting down; finishing the requests in flight", slog.Duration("timeout", *grace))
	case err := <-errc:
		log.Error("server failed", slog.Any("err", err))
		code = 1
	}
	sctx, cancel := context.WithTimeout(context.Background(), *grace)
	defer cancel()
	done := make(chan struct{})
	if gs != nil {
		go func() { gs.GracefulStop(); close(done) }()
	} else {
		close(done)
	}
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("HTTP shutdown", slog.Any("err", err))
	}
	select {
	case <-done:
	case <-sctx.Done():
		gs.Stop()
	}
	log.Info("sluice stopped")
	return code
}

// newLogger returns a logger writing to w in format at level.
func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: use debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: use text or json", format)
}
