package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sluicerate/sluice/internal/adminauth"
	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/internal/deploy"
	"github.com/sluicerate/sluice/internal/launch"
	"github.com/sluicerate/sluice/internal/outage"
	"github.com/sluicerate/sluice/internal/server"
)

const serveUsage = `usage: sluice serve --config FILE [--http ADDR] [--grpc ADDR] [--redis URL] [--admin ADDR]
       sluice serve --envoy-config DIR | --envoy-xds HOST:PORT [--config FILE] [flags]

Serves the policies and schedules of FILE: the HTTP JSON API, forward-auth,
/metrics, /healthz and /readyz on --http (default :8080, on every
interface), sluice's gRPC service and Envoy's rate-limit service on --grpc,
and the admin view on --admin (default 127.0.0.1:9464, this machine only).
The store is Redis at --redis, else the file's store section, else memory.
A standalone Redis that does not answer at the start is waited for: sluice
serve starts unready (/readyz 503, decisions by the store's on_error) and is
ready once Redis answers; --require-store exits instead.
The file is reloaded on SIGHUP and when it changes; an invalid file is
logged and the previous one kept. SIGTERM or SIGINT stops the server after
the requests in flight.

--envoy-config DIR serves a directory of envoyproxy/ratelimit configuration
files as they are (with or without --config): Envoy's rate-limit service
(gRPC, default :8081 then), /json, /healthcheck and /rlconfig, reloaded when
a file changes. --envoy-xds HOST:PORT takes that configuration from an xDS
control plane instead, as Envoy Gateway serves it: each version pushed is
validated as files are, applied, or refused with its problems while the
last good one keeps serving. That service's environment variables
(RUNTIME_ROOT, CONFIG_TYPE, CONFIG_GRPC_XDS_*, GRPC_SERVER_USE_TLS, PORT,
GRPC_PORT, LOG_LEVEL, REDIS_URL, REDIS_TLS, USE_PROMETHEUS, TRACING_ENABLED,
...) stand for flags the command line leaves out. Started as ratelimit
(/bin/ratelimit in the container image), sluice is sluice serve. See
docs/envoy.md.

--http-tls, --grpc-tls and --admin-tls serve a listener with TLS, and with
client-ca, refuse clients without a certificate of those authorities; the
certificate files are read again when they change, without a restart.

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

flags:`

// serveCmd is sluice serve's command line, environment and configuration
// file, as parsed.
type serveCmd struct {
	fs                              *flag.FlagSet
	file, httpAddr, grpcAddr, redis *string
	logFormat, logLevel             *string
	af                              *adminFlags
	adminTokens                     adminauth.Tokens
	of                              *overrideFlags
	outageEvery, watch, grace       *time.Duration
	denyCache                       *int
	requireStore                    *bool
	dep                             *deploy.Flags
	adminSet                        bool
	stderr                          io.Writer
}

func runServe(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, code, ok := parseServe(args, stderr, os.Getenv)
	if !ok {
		return code
	}
	return c.run(ctx)
}

// parseServe parses the command line and the environment. It reports
// false, with the exit code, when serve must stop.
func parseServe(args []string, stderr io.Writer, getenv func(string) string) (*serveCmd, int, bool) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, serveUsage)
		fs.PrintDefaults()
	}
	c := &serveCmd{fs: fs, stderr: stderr,
		file:         fs.String("config", "", "the configuration `file` (required unless --envoy-config or --envoy-xds is given)"),
		httpAddr:     fs.String("http", ":8080", "serve HTTP on this `address` (:PORT listens on every interface; 127.0.0.1:PORT on this machine only)"),
		grpcAddr:     fs.String("grpc", "", "serve gRPC on this `address` (default: no gRPC)"),
		redis:        fs.String("redis", "", "use Redis at this `URL` (redis://[user:password@]host:port[/db]) instead of the file's store"),
		logFormat:    fs.String("log-format", "text", "log `format`: text or json"),
		logLevel:     fs.String("log-level", "info", "log `level`: debug, info, warn or error"),
		outageEvery:  fs.Duration("log-outage-interval", outage.DefaultInterval, "while the store fails, log one summary per `interval` (its first failure and its recovery are logged at once)"),
		watch:        fs.Duration("watch", time.Second, "check the file for changes this often (0: only on SIGHUP)"),
		grace:        fs.Duration("shutdown-timeout", 30*time.Second, "how long requests in flight may take to finish on shutdown"),
		denyCache:    fs.Int("deny-cache", server.DefaultDenyCache, "answer the requests of the last `N` keys a policy denied from memory until they have room (0: off)"),
		requireStore: fs.Bool("require-store", false, "exit at start when a standalone Redis does not answer, instead of serving unready (/readyz 503) until it does"),
	}
	c.dep = deploy.AddFlags(fs)
	c.af = addAdminFlags(fs)
	c.of = addOverrideFlags(fs)
	if code, ok := parseFlags(fs, args); !ok {
		return nil, code, false
	}
	fs.Visit(func(f *flag.Flag) { c.adminSet = c.adminSet || f.Name == "admin" })
	if err := c.check(getenv); err != nil {
		return nil, c.fail("%v", err), false
	}
	return c, exitOK, true
}

// check applies the environment and checks what the flags ask for.
func (c *serveCmd) check(getenv func(string) string) error {
	switch {
	case c.fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q", c.fs.Arg(0))
	case *c.denyCache < 0:
		return fmt.Errorf("--deny-cache %d: give a number of keys, or 0 for none", *c.denyCache)
	case *c.outageEvery <= 0:
		return fmt.Errorf("--log-outage-interval %v: give a positive duration, such as 10s", *c.outageEvery)
	}
	if err := c.dep.Apply(c.fs, getenv, *c.file); err != nil {
		return err
	}
	var err error
	if c.adminTokens, err = c.af.admin(c.adminSet).Check(getenv); err != nil {
		return err
	}
	return c.of.check()
}

func (c *serveCmd) fail(format string, a ...any) int {
	fmt.Fprintf(c.stderr, "sluice serve: "+format+"\n", a...)
	return exitUsage
}

// run serves until ctx ends or a listener fails.
func (c *serveCmd) run(ctx context.Context) int {
	log, err := launch.NewLogger(c.stderr, *c.logFormat, *c.logLevel)
	if err != nil {
		return c.fail("%v", err)
	}
	for _, n := range c.dep.Notes() {
		log.Warn(n)
	}
	cfg := &config.Config{}
	if *c.file != "" {
		if cfg, err = config.Load(*c.file); err != nil {
			return c.fail("%v", err)
		}
	}
	ds, err := c.dep.Resolve(cfg, log)
	if err != nil {
		return c.fail("%v", err)
	}
	eo, err := c.dep.EnvoyOptions()
	if err != nil {
		return c.fail("%v", err)
	}
	s, err := launch.Start(ctx, launch.Options{Log: log, Config: cfg, File: *c.file, Deploy: ds,
		HTTPAddr: *c.httpAddr, GRPCAddr: *c.grpcAddr, RedisURL: *c.redis, RequireStore: *c.requireStore,
		DenyCache: *c.denyCache, OutageInterval: *c.outageEvery, MaxOverrides: *c.of.max, OverridePoll: *c.of.poll,
		Watch: *c.watch, Grace: *c.grace, Admin: c.af.admin(c.adminSet), AdminTokens: c.adminTokens,
		EnvoyDir: c.dep.EnvoyDir(), Envoy: eo})
	if err != nil {
		return c.fail("%v", err)
	}
	defer s.Close()
	if s.Serve(ctx) != nil {
		return 1
	}
	return exitOK
}
