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
	"github.com/sluicerate/sluice/internal/outage"
	"github.com/sluicerate/sluice/internal/server"
)

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: sluice serve --config FILE [--http ADDR] [--grpc ADDR] [--redis URL] [--admin ADDR]
       sluice serve --envoy-config DIR [--config FILE] [flags]

Serves the policies and schedules of FILE: the HTTP JSON API, forward-auth,
/metrics, /healthz and /readyz on --http (default :8080, on every
interface), sluice's gRPC service and Envoy's rate-limit service on --grpc,
and the admin view on --admin (default 127.0.0.1:9464, this machine only).
The store is Redis at --redis, else the file's store section, else memory.
The file is reloaded on SIGHUP and when it changes; an invalid file is
logged and the previous one kept. SIGTERM or SIGINT stops the server after
the requests in flight.

--envoy-config DIR serves a directory of envoyproxy/ratelimit configuration
files as they are (with or without --config): Envoy's rate-limit service
(gRPC, default :8081 then), /json, /healthcheck and /rlconfig, reloaded when
a file changes. That service's environment variables (RUNTIME_ROOT,
RUNTIME_SUBDIRECTORY, PORT, GRPC_PORT, LOG_LEVEL, REDIS_URL, ...) stand for
flags the command line leaves out. See docs/envoy.md.

--admin serves the admin view on its own listener, loopback only unless
a host is named: a live page of the policies, decision rates, the keys
denied now and when each is let through, a key inspector, the store's
health and the runtime overrides, with its JSON API, /metrics and pprof.
It shows attribute values (user ids, client addresses) and changes
limits: tokens (SLUICE_ADMIN_TOKEN, SLUICE_ADMIN_READ_TOKEN for one that
only reads, or a file of named tokens) are required of every request when
set, and on any address but loopback sluice serve refuses to start
without one, unless --admin-trusted-network says every machine that
reaches it may.

Runtime overrides (sluice override, the admin API's /api/v1/overrides)
live in the store: every instance on the same store applies a change
within --override-poll. See docs/operations.md.

--deny-cache keeps the denials of the last N keys over their limit in
memory: until such a key has room again, its requests are denied without a
Redis call, with the wait left. The store would give the same answer,
except after something freed room early (a key reset by hand, a failover
that lost admissions), when it keeps denying until the wait it announced
has passed; it never admits. 0 turns it off. See docs/design.md.

flags:`)
		fs.PrintDefaults()
	}
	file := fs.String("config", "", "the configuration `file` (required unless --envoy-config is given)")
	httpAddr := fs.String("http", ":8080", "serve HTTP on this `address` (:PORT listens on every interface; 127.0.0.1:PORT on this machine only)")
	grpcAddr := fs.String("grpc", "", "serve gRPC on this `address` (default: no gRPC)")
	redisURL := fs.String("redis", "", "use Redis at this `URL` (redis://[user:password@]host:port[/db]) instead of the file's store")
	logFormat := fs.String("log-format", "text", "log `format`: text or json")
	logLevel := fs.String("log-level", "info", "log `level`: debug, info, warn or error")
	outageEvery := fs.Duration("log-outage-interval", outage.DefaultInterval, "while the store fails, log one summary per `interval` (its first failure and its recovery are logged at once)")
	watch := fs.Duration("watch", time.Second, "check the file for changes this often (0: only on SIGHUP)")
	grace := fs.Duration("shutdown-timeout", 30*time.Second, "how long requests in flight may take to finish on shutdown")
	denyCache := fs.Int("deny-cache", server.DefaultDenyCache, "answer the requests of the last `N` keys a policy denied from memory until they have room (0: off)")
	ef := addEnvoyFlags(fs, true)
	af := addAdminFlags(fs)
	of := addOverrideFlags(fs)
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
	if *denyCache < 0 {
		return fail("--deny-cache %d: give a number of keys, or 0 for none", *denyCache)
	}
	if err := applyEnvoyEnv(fs, ef, os.Getenv); err != nil {
		return fail("%v", err)
	}
	envoyOpts, err := ef.options()
	if err != nil {
		return fail("%v", err)
	}
	if *file == "" && *ef.dir == "" {
		return fail("--config FILE or --envoy-config DIR is required")
	}
	if *ef.dir != "" && *grpcAddr == "" {
		*grpcAddr = ":8081" // Envoy's rate-limit service is gRPC: envoyproxy/ratelimit's port
	}
	log, err := newLogger(stderr, *logFormat, *logLevel)
	if err != nil {
		return fail("%v", err)
	}
	if *outageEvery <= 0 {
		return fail("--log-outage-interval %v: give a positive duration, such as 10s", *outageEvery)
	}
	adminTokens, err := af.check(os.Getenv)
	if err == nil {
		err = of.check()
	}
	if err != nil {
		return fail("%v", err)
	}
	cfg := &config.Config{}
	if *file != "" {
		if cfg, err = config.Load(*file); err != nil {
			return fail("%v", err)
		}
	}
	store, err := openConfiguredStore(cfg, *redisURL)
	if err != nil {
		return fail("%v", err)
	}
	defer store.Close()
	store.keepWarm(5 * time.Second)
	srv, err := server.New(store.Store, cfg, server.Options{Logger: log, DenyCache: *denyCache, OutageInterval: *outageEvery, Ping: store.Ping,
		Inspector: store.inspector(), MaxOverrides: *of.max, OverridePoll: *of.poll})
	if err != nil {
		return fail("%v", err)
	}
	if *ef.dir != "" {
		if err := srv.LoadEnvoyConfig(*ef.dir, envoyOpts); err != nil {
			return fail("--envoy-config %s:\n%v", *ef.dir, err)
		}
		srv.SetWindowReset(windowReset(store))
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

	adminSet := false
	fs.Visit(func(f *flag.Flag) { adminSet = adminSet || f.Name == "admin" })
	al, err := listenAdmin(*af.addr, adminSet)
	if err != nil && adminSet {
		hl.Close()
		if gl != nil {
			gl.Close()
		}
		return fail("%v", err)
	} else if err != nil {
		log.Warn(err.Error())
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	srv.FollowOverrides(ctx, 2*time.Second)
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	if *file != "" {
		go srv.Watch(ctx, *file, *watch, hup)
	}
	if *ef.dir != "" {
		envoyHup := make(chan os.Signal, 1)
		signal.Notify(envoyHup, syscall.SIGHUP)
		defer signal.Stop(envoyHup)
		go srv.WatchEnvoyConfig(ctx, *watch, envoyHup)
	}

	errc := make(chan error, 3)
	hs := srv.HTTPServer(*httpAddr)
	go func() { errc <- hs.Serve(hl) }()
	var gs *grpc.Server
	if gl != nil {
		gs = srv.GRPCServer(grpc.MaxRecvMsgSize(1 << 20))
		go func() { errc <- gs.Serve(gl) }()
	}
	var as *http.Server
	if al != nil {
		as = srv.AdminServer(al.Addr().String(), server.AdminOptions{Tokens: adminTokens})
		go func() { errc <- as.Serve(al) }()
	}
	attrs := []any{slog.String("http", hl.Addr().String()), slog.String("store", store.Where),
		slog.String("config", *file), slog.Int("policies", len(cfg.Policies)), slog.Int("schedules", len(cfg.Schedules))}
	if gl != nil {
		attrs = append(attrs, slog.String("grpc", gl.Addr().String()))
	}
	if ec := srv.EnvoyConfig(); ec != nil {
		attrs = append(attrs, slog.String("envoy_config", ec.Dir), slog.Int("envoy_domains", len(ec.Domains())))
	}
	if al != nil {
		attrs = append(attrs, slog.String("admin", al.Addr().String()), slog.Bool("admin_token", len(adminTokens) > 0))
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
	srv.Drain()
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
	if as != nil {
		if err := as.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn("admin shutdown", slog.Any("err", err))
		}
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
