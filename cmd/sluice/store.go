package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/internal/tlsfiles"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/store"
)

// openedStore is the store a command runs on, with what it needs besides
// the store.Store interface.
type openedStore struct {
	store.Store

	// Redis is the Redis store and Client its client; nil for the
	// in-memory store.
	Redis  *redisstore.Store
	Client rueidis.Client

	// Where describes the store for messages.
	Where string

	// ping checks that the store answers and is warm (every script loaded
	// on every node); nil for the in-memory store.
	ping func(ctx context.Context) error

	// stopWarming, once warming started, stops it.
	stopWarming context.CancelFunc

	// closeClient closes the Redis client after the store.
	closeClient func()

	// Unreachable is why the store did not answer when it was opened, for
	// a store opened to be waited for (openStore's waitable); nil when it
	// answered.
	Unreachable error
}

// firstWarm bounds keepWarm's first warming, which sluice serve waits for
// at its start: a Redis that does not answer delays the start by this much
// (the readiness checks then report it).
const firstWarm = 2 * time.Second

// Ping reports whether the store answers and is ready for decisions as
// fast as later ones: on Redis, every node the client knows holds every
// script (redisstore.Store.Warm, which loads those missing). The server's
// readiness (/readyz, gRPC health) is this.
func (s *openedStore) Ping(ctx context.Context) error {
	if s.ping == nil {
		return nil
	}
	return s.ping(ctx)
}

// keepWarm warms a Redis store once now, for at most firstWarm, and then
// every interval until Close, so that a node that joined (a promoted
// replica, a new master) or lost its scripts (a restart, SCRIPT FLUSH)
// holds them again before decisions find it out. The first warming comes
// before anything the server does at its start (the runtime overrides'
// first read), which would otherwise send its script by source. Failures
// are left to the readiness checks and the decisions to report.
func (s *openedStore) keepWarm(every time.Duration) {
	if s.Redis == nil || s.stopWarming != nil {
		return
	}
	wctx, cancel := context.WithTimeout(context.Background(), min(every, firstWarm))
	_ = s.Redis.Warm(wctx)
	cancel()
	ctx, stop := context.WithCancel(context.Background())
	s.stopWarming = stop
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				wctx, cancel := context.WithTimeout(ctx, every)
				_ = s.Redis.Warm(wctx)
				cancel()
			}
		}
	}()
}

// waitReady pings the store every interval until it answers, then logs so
// once: the end of a start unready (Unreachable). The readiness checks ping
// it too and become ready at the same time.
func (s *openedStore) waitReady(ctx context.Context, log *slog.Logger, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, every)
		err := s.Ping(pctx)
		cancel()
		if err == nil {
			log.Info("the store answers; ready", slog.String("store", s.Where))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Reserve implements store.Scheduler over the opened store, so that a
// Limiter over an openedStore can reserve.
func (s *openedStore) Reserve(ctx context.Context, req *store.ReserveRequest) (store.Reservation, error) {
	sc, ok := s.Store.(store.Scheduler)
	if !ok {
		return store.Reservation{}, fmt.Errorf("%s keeps no schedules", s.Where)
	}
	return sc.Reserve(ctx, req)
}

// Cancel implements store.Scheduler over the opened store.
func (s *openedStore) Cancel(ctx context.Context, req *store.CancelRequest) (bool, error) {
	sc, ok := s.Store.(store.Scheduler)
	if !ok {
		return false, fmt.Errorf("%s keeps no schedules", s.Where)
	}
	return sc.Cancel(ctx, req)
}

var _ store.Scheduler = (*openedStore)(nil)

// Close closes the store and its client.
func (s *openedStore) Close() error {
	if s.stopWarming != nil {
		s.stopWarming()
	}
	err := s.Store.Close()
	if s.closeClient != nil {
		s.closeClient()
	}
	return err
}

// openConfiguredStore opens Redis at url when it is set, else the Redis of
// the file's store section, else the in-memory store. The file's prefix
// applies to both Redis cases.
func openConfiguredStore(cfg *config.Config, url string) (*openedStore, error) {
	return openStore(cfg, url, nil, false)
}

// openStore is openConfiguredStore with TLS files for a rediss:// url
// (--redis-tls), read again when they change. With waitable, a standalone
// Redis that does not answer is opened all the same, its error in
// Unreachable: its calls fail until it answers, and its client connects
// then (sluice serve starts unready).
func openStore(cfg *config.Config, url string, urlTLS *tlsfiles.ClientFiles, waitable bool) (*openedStore, error) {
	prefix := "sluice"
	if cfg != nil && cfg.Store != nil && cfg.Store.Prefix != "" {
		prefix = cfg.Store.Prefix
	}
	var (
		rcfg  redisstore.Config
		where string
		files *tlsfiles.ClientFiles
	)
	switch {
	case url != "":
		var err error
		if rcfg, err = redisstore.ParseURL(url); err != nil {
			return nil, fmt.Errorf("--redis: %v; write it as redis://[user:password@]host:port[/db][?addr=host:port&mode=cluster|sentinel&master=name&wait_for_replicas=true&replica_grace=30s]", err)
		}
		where = fmt.Sprintf("Redis (%s) at %s", rcfg.Mode, strings.Join(rcfg.Addrs, ","))
		if urlTLS != nil && rcfg.TLS == nil {
			return nil, fmt.Errorf("--redis-tls: the Redis URL %s is not rediss://; connect with TLS by rediss:// (REDIS_TLS=true)", rcfg.Addrs[0])
		}
		files = urlTLS
	case cfg != nil && cfg.Store != nil && cfg.Store.Redis != nil:
		r := cfg.Store.Redis
		mode, err := redisstore.ParseMode(r.Mode)
		if err != nil {
			return nil, fmt.Errorf("store.redis.mode: %w", err)
		}
		rcfg = redisstore.Config{Mode: mode, Addrs: r.Addrs, MasterName: r.MasterName,
			Username: r.Username, Password: r.Password, DB: r.DB, WaitForReplicas: r.WaitForReplicas, ReplicaGrace: r.ReplicaGrace}
		if r.TLS != nil {
			if rcfg.TLS, files, err = tlsConfig(r.TLS); err != nil {
				return nil, err
			}
		}
		where = fmt.Sprintf("Redis (%s) at %s", mode, strings.Join(r.Addrs, ","))
	default:
		return &openedStore{Store: memstore.New(memstore.Config{}), Where: "the in-memory store"}, nil
	}
	rcfg.Prefix = prefix
	if cfg != nil && cfg.Store != nil {
		rcfg.Layout = redisstore.Layout(cfg.Store.Layout)
	}
	opt, err := redisstore.ClientOption(rcfg)
	if err != nil {
		return nil, err
	}
	if files != nil {
		useTLSFiles(&opt, files)
	}
	client, unreachable := dialRedis(opt, rcfg.Mode, waitable)
	if client == nil {
		return nil, fmt.Errorf("connecting to %s: %w", where, unreachable)
	}
	rs, err := redisstore.NewFromClient(client, rcfg)
	if err != nil {
		client.Close()
		return nil, err
	}
	return &openedStore{
		Store:       rs,
		Redis:       rs,
		Client:      client,
		Where:       where,
		ping:        rs.Warm,
		closeClient: client.Close,
		Unreachable: unreachable,
	}, nil
}

// dialRedis returns a client of opt, or nil and why not. With waitable, a
// standalone Redis that refuses the first connection still gets a client,
// with the error: rueidis's single-node client connects on its next call.
// Only a network error is waited for (a refused connection, a name not
// resolved yet), not a refused password. Cluster and Sentinel clients need
// their nodes to learn the topology.
func dialRedis(opt rueidis.ClientOption, mode redisstore.Mode, waitable bool) (rueidis.Client, error) {
	client, err := rueidis.NewClient(opt)
	var netErr net.Error
	if err == nil || !waitable || mode != redisstore.Standalone || !errors.As(err, &netErr) {
		return client, err
	}
	opt.ForceSingleClient = true // a client even though its connection failed
	if c, _ := rueidis.NewClient(opt); c != nil {
		return c, err
	}
	return nil, err
}

// tlsConfig builds the TLS configuration of a Redis connection: its files,
// read again when they change; with insecure_skip_verify, a configuration
// that verifies nothing (tests only), read once.
func tlsConfig(t *config.TLS) (*tls.Config, *tlsfiles.ClientFiles, error) {
	if !t.InsecureSkipVerify {
		files, err := tlsfiles.NewClient(tlsfiles.Client{CA: t.CA, Cert: t.Cert, Key: t.Key, ServerName: t.ServerName})
		if err != nil {
			return nil, nil, fmt.Errorf("store.redis.tls: %w", err)
		}
		return files.Config(), files, nil
	}
	tc := &tls.Config{ServerName: t.ServerName, InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}
	if t.Cert != "" {
		cert, err := tls.LoadX509KeyPair(t.Cert, t.Key)
		if err != nil {
			return nil, nil, fmt.Errorf("store.redis.tls: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil, nil
}

// useTLSFiles makes every connection of opt, to Redis servers and
// sentinels alike, take its TLS configuration from files at the dial: the
// server's name is the node's host unless the files name one.
func useTLSFiles(opt *rueidis.ClientOption, files *tlsfiles.ClientFiles) {
	opt.TLSConfig = files.Config()
	if opt.Sentinel.MasterSet != "" {
		opt.Sentinel.TLSConfig = opt.TLSConfig
	}
	opt.DialCtxFn = func(ctx context.Context, dst string, dialer *net.Dialer, _ *tls.Config) (net.Conn, error) {
		cfg := files.Config()
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(dst)
		}
		return (&tls.Dialer{NetDialer: dialer, Config: cfg}).DialContext(ctx, "tcp", dst)
	}
}

// windowReset returns how sluice serve empties windows on st (for POST
// /v1/envoy/reset): deleting their Redis keys; nil for the in-memory store.
func windowReset(st *openedStore) func(ctx context.Context, req *store.Request) (int, error) {
	if st.Redis == nil {
		return nil
	}
	return func(ctx context.Context, req *store.Request) (int, error) {
		n := 0
		for _, k := range st.Redis.Keys(req) {
			deleted, err := st.Client.Do(ctx, st.Client.B().Del().Key(k).Build()).AsInt64()
			if err != nil {
				return n, fmt.Errorf("deleting %s: %w", k, err)
			}
			n += int(deleted)
		}
		return n, nil
	}
}
