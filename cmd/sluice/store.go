package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicerate/sluice/internal/config"
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
}

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

// keepWarm warms a Redis store every interval until Close, so that a node
// that joined (a promoted replica, a new master) or lost its scripts (a
// restart, SCRIPT FLUSH) holds them again before decisions find it out.
// Failures are left to the readiness checks and the decisions to report.
func (s *openedStore) keepWarm(every time.Duration) {
	if s.Redis == nil || s.stopWarming != nil {
		return
	}
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
	prefix := "sluice"
	if cfg != nil && cfg.Store != nil && cfg.Store.Prefix != "" {
		prefix = cfg.Store.Prefix
	}
	var (
		rcfg  redisstore.Config
		where string
	)
	switch {
	case url != "":
		var err error
		if rcfg, err = redisstore.ParseURL(url); err != nil {
			return nil, fmt.Errorf("--redis: %v; write it as redis://[user:password@]host:port[/db][?addr=host:port&mode=cluster|sentinel&master=name&wait_for_replicas=true&replica_grace=30s]", err)
		}
		where = fmt.Sprintf("Redis (%s) at %s", rcfg.Mode, strings.Join(rcfg.Addrs, ","))
	case cfg != nil && cfg.Store != nil && cfg.Store.Redis != nil:
		r := cfg.Store.Redis
		mode, err := redisstore.ParseMode(r.Mode)
		if err != nil {
			return nil, fmt.Errorf("store.redis.mode: %w", err)
		}
		rcfg = redisstore.Config{Mode: mode, Addrs: r.Addrs, MasterName: r.MasterName,
			Username: r.Username, Password: r.Password, DB: r.DB, WaitForReplicas: r.WaitForReplicas, ReplicaGrace: r.ReplicaGrace}
		if r.TLS != nil {
			if rcfg.TLS, err = tlsConfig(r.TLS); err != nil {
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
	client, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", where, err)
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
	}, nil
}

// tlsConfig builds the TLS configuration of a Redis connection.
func tlsConfig(t *config.TLS) (*tls.Config, error) {
	tc := &tls.Config{ServerName: t.ServerName, InsecureSkipVerify: t.InsecureSkipVerify, MinVersion: tls.VersionTLS12}
	if t.CA != "" {
		pem, err := os.ReadFile(t.CA)
		if err != nil {
			return nil, fmt.Errorf("store.redis.tls.ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("store.redis.tls.ca: %s holds no PEM certificate", t.CA)
		}
		tc.RootCAs = pool
	}
	if t.Cert != "" {
		cert, err := tls.LoadX509KeyPair(t.Cert, t.Key)
		if err != nil {
			return nil, fmt.Errorf("store.redis.tls: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}
