package launch

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicerate/sluice/internal/admin"
	"github.com/sluicerate/sluice/internal/admin/redisinspect"
	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/store"
)

// Store is the store a command runs on, with what it needs besides the
// store.Store interface. Its methods are safe for concurrent use, except
// KeepWarm and Close, which its owner calls once each.
type Store struct {
	store.Store

	// Redis is the Redis store and Client its client; nil for the
	// in-memory store.
	Redis  *redisstore.Store
	Client rueidis.Client

	// Where describes the store for messages.
	Where string

	// Unreachable is why the store did not answer when it was opened, for
	// a store opened to be waited for (Dial.Waitable); nil when it
	// answered.
	Unreachable error

	// ping checks that the store answers and is warm (every script loaded
	// on every node); nil for the in-memory store.
	ping func(ctx context.Context) error

	// stopWarming, once warming started, stops it.
	stopWarming context.CancelFunc

	// closeClient closes the Redis client after the store.
	closeClient func()
}

var _ store.Scheduler = (*Store)(nil)

// firstWarm bounds KeepWarm's first warming, which sluice serve waits for
// at its start: a Redis that does not answer delays the start by this much
// (the readiness checks then report it).
const firstWarm = 2 * time.Second

// Ping reports whether the store answers and is ready for decisions as
// fast as later ones: on Redis, every node the client knows holds every
// script (redisstore.Store.Warm, which loads those missing). The server's
// readiness (/readyz, gRPC health) is this.
func (s *Store) Ping(ctx context.Context) error {
	if s.ping == nil {
		return nil
	}
	return s.ping(ctx)
}

// KeepWarm warms a Redis store once now, for at most firstWarm, and then
// every interval until Close, so that a node that joined (a promoted
// replica, a new master) or lost its scripts (a restart, SCRIPT FLUSH)
// holds them again before decisions find it out. The first warming comes
// before anything the server does at its start (the runtime overrides'
// first read), which would otherwise send its script by source. Failures
// are left to the readiness checks and the decisions to report.
func (s *Store) KeepWarm(every time.Duration) {
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

// WaitReady pings the store every interval until it answers, then logs so
// once: the end of a start unready (Unreachable). The readiness checks ping
// it too and become ready at the same time.
func (s *Store) WaitReady(ctx context.Context, log *slog.Logger, every time.Duration) {
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
// Limiter over a Store can reserve.
func (s *Store) Reserve(ctx context.Context, req *store.ReserveRequest) (store.Reservation, error) {
	sc, ok := s.Store.(store.Scheduler)
	if !ok {
		return store.Reservation{}, fmt.Errorf("%s keeps no schedules", s.Where)
	}
	return sc.Reserve(ctx, req)
}

// Cancel implements store.Scheduler over the opened store.
func (s *Store) Cancel(ctx context.Context, req *store.CancelRequest) (bool, error) {
	sc, ok := s.Store.(store.Scheduler)
	if !ok {
		return false, fmt.Errorf("%s keeps no schedules", s.Where)
	}
	return sc.Cancel(ctx, req)
}

// Inspector is the admin view's reader of s's windows and queues: Redis's
// (package redisinspect); nil for the in-memory store, whose windows the
// view shows from a peek.
func (s *Store) Inspector() admin.Inspector {
	if s.Redis == nil || s.Client == nil {
		return nil
	}
	return redisinspect.Inspector{Store: s.Redis, Client: s.Client}
}

// WindowReset returns how sluice serve empties windows on s (for POST
// /v1/envoy/reset): deleting their Redis keys; nil for the in-memory store.
func (s *Store) WindowReset() func(ctx context.Context, req *store.Request) (int, error) {
	if s.Redis == nil {
		return nil
	}
	return func(ctx context.Context, req *store.Request) (int, error) {
		n := 0
		for _, k := range s.Redis.Keys(req) {
			deleted, err := s.Client.Do(ctx, s.Client.B().Del().Key(k).Build()).AsInt64()
			if err != nil {
				return n, fmt.Errorf("deleting %s: %w", k, err)
			}
			n += int(deleted)
		}
		return n, nil
	}
}

// Close closes the store and its client.
func (s *Store) Close() error {
	if s.stopWarming != nil {
		s.stopWarming()
	}
	err := s.Store.Close()
	if s.closeClient != nil {
		s.closeClient()
	}
	return err
}
