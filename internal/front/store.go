package front

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicerate/sluice/internal/edge"
	"github.com/sluicerate/sluice/internal/front/quotastore"
	"github.com/sluicerate/sluice/internal/tracing"
	"github.com/sluicerate/sluice/store"
)

// Store is a store whose every call is timed and whose failures are
// counted. It forwards store.Scheduler, store.Leaser, store.Local and
// store.Sharded to a Limiter as the store it wraps has them (ForLimiter),
// and store.Crediter and store.Historian.
type Store struct {
	store.Store
	quotastore.Calls // store.Crediter and store.Historian, timed
	m                *Metrics
	tracer           trace.Tracer // nil: calls are not traced
}

// Observe records one store call of op that started at start.
func (s *Store) Observe(op string, start time.Time, err error) {
	s.observeIn(s.m.storeDuration.WithLabelValues(op), op, start, err)
}

// observeIn is observe with op's histogram.
func (s *Store) observeIn(h prometheus.Observer, op string, start time.Time, err error) {
	took := time.Since(start)
	h.Observe(took.Seconds())
	if s.m.obs != nil {
		s.m.obs.StoreCall(op, took, err)
	}
	if _, bad := edge.Classify(err); err != nil && !bad {
		s.m.storeErrors.WithLabelValues(op).Inc()
	}
}

// Decide implements store.Store.
func (s *Store) Decide(ctx context.Context, req *store.Request) error {
	if s.tracer != nil {
		return s.decideTraced(ctx, req)
	}
	start := time.Now()
	err := s.Store.Decide(ctx, req)
	s.observeIn(s.m.decideDuration, "decide", start, err)
	if err == nil && s.m.obs != nil {
		s.m.obs.Decided(req, false)
	}
	return err
}

var _ store.Store = (*Store)(nil)

// decideTraced is Decide in a span of its own: the policy, the windows,
// whether the request fit, and the store's error.
func (s *Store) decideTraced(ctx context.Context, req *store.Request) error {
	ctx, span := s.tracer.Start(ctx, "sluice.store/Decide", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("sluice.policy", req.Policy), attribute.Int("sluice.windows", len(req.Checks)),
			attribute.Bool("sluice.dry_run", req.DryRun)))
	defer span.End()
	start := time.Now()
	err := s.Store.Decide(ctx, req)
	s.observeIn(s.m.decideDuration, "decide", start, err)
	if err != nil {
		tracing.Failed(span, err)
		return err
	}
	span.SetAttributes(attribute.Bool("sluice.fits", tracing.Fits(req)))
	if s.m.obs != nil {
		s.m.obs.Decided(req, false)
	}
	return nil
}

// CacheHit tells the observer of a request the Limiter's deny cache
// answered (the Limiter's OnCacheHit hook, internal/hooks), as Decide tells it of those the
// store decided: a denial counts whoever answered it.
func (s *Store) CacheHit(req *store.Request) {
	if s.m.obs != nil {
		s.m.obs.Decided(req, true)
	}
}

// ForLimiter returns s for a Limiter, marked as the store it instruments
// is, so that the Limiter calls it as it would the store alone: a
// store.Local without a deadline and a circuit breaker per call, which
// cost more than a decision in memory; a store.Sharded (a Redis Cluster's)
// with a circuit breaker per shard.
//
// A store.Budgeter is forwarded too (its Budget calls timed as op
// "budget"), and only then: a Limiter leases slices of budgeted rules from
// a store that is one, and decides them per request on any other.
func (s *Store) ForLimiter() store.Store {
	_, budgets := s.Store.(store.Budgeter)
	switch st := s.Store.(type) {
	case store.Local:
		if budgets {
			return localBudgetStore{localStore{s}}
		}
		return localStore{s}
	case store.Sharded:
		if budgets {
			return shardedBudgetStore{shardedStore{s, st}}
		}
		return shardedStore{s, st}
	}
	if budgets {
		return budgetStore{s}
	}
	return s
}

// shardedStore is an Store over a store.Sharded.
type shardedStore struct {
	*Store
	sharded store.Sharded
}

// Shard implements store.Sharded.
func (s shardedStore) Shard(req *store.Request) string { return s.sharded.Shard(req) }

// QueueShard implements store.Sharded.
func (s shardedStore) QueueShard(q store.Queue) string { return s.sharded.QueueShard(q) }

var _ store.Sharded = shardedStore{}

// localStore is an Store over a store.Local.
type localStore struct{ *Store }

// Local implements store.Local.
func (localStore) Local() {}

var _ store.Local = localStore{}

// Reserve implements store.Scheduler when the wrapped store does.
func (s *Store) Reserve(ctx context.Context, req *store.ReserveRequest) (store.Reservation, error) {
	sc, err := s.scheduler()
	if err != nil {
		return store.Reservation{}, err
	}
	start := time.Now()
	res, err := sc.Reserve(ctx, req)
	s.Observe("reserve", start, err)
	return res, err
}

// Cancel implements store.Scheduler when the wrapped store does.
func (s *Store) Cancel(ctx context.Context, req *store.CancelRequest) (bool, error) {
	sc, err := s.scheduler()
	if err != nil {
		return false, err
	}
	start := time.Now()
	ok, err := sc.Cancel(ctx, req)
	s.Observe("cancel", start, err)
	return ok, err
}

func (s *Store) scheduler() (store.Scheduler, error) {
	sc, ok := s.Store.(store.Scheduler)
	if !ok {
		return nil, ErrNoSchedules
	}
	return sc, nil
}

var _ store.Scheduler = (*Store)(nil)

// ErrNoSchedules reports a store that keeps no schedules.
var ErrNoSchedules = errors.New("server: the store keeps no schedules")

// Acquire implements store.Leaser when the wrapped store does.
func (s *Store) Acquire(ctx context.Context, req *store.Request, lease *store.LeaseGrant) error {
	lr, ok := s.Store.(store.Leaser)
	if !ok {
		return ErrNoLeases
	}
	start := time.Now()
	err := lr.Acquire(ctx, req, lease)
	s.Observe("acquire", start, err)
	s.m.LeaseAcquired(req, lease, err)
	return err
}

// Finish implements store.Leaser when the wrapped store does.
func (s *Store) Finish(ctx context.Context, req *store.FinishRequest) (store.LeaseState, error) {
	lr, ok := s.Store.(store.Leaser)
	if !ok {
		return store.LeaseState{}, ErrNoLeases
	}
	start := time.Now()
	st, err := lr.Finish(ctx, req)
	op := "finish"
	if req.Op == store.LeaseAbandon {
		op = "abandon" // the Limiter's own, for an acquire that failed
	}
	s.Observe(op, start, err)
	s.m.LeaseFinished(req, st, err)
	return st, err
}

var _ store.Leaser = (*Store)(nil)

// ErrNoLeases reports a store that keeps no leases.
var ErrNoLeases = errors.New("server: the store keeps no leases")
