package server

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/edge"
	"github.com/sluicerate/sluice/store"
)

// metrics are the server's Prometheus collectors.
type metrics struct {
	decisions     *prometheus.CounterVec   // policy, rule, outcome
	degraded      *prometheus.CounterVec   // policy, outcome
	storeDuration *prometheus.HistogramVec // op
	storeErrors   *prometheus.CounterVec   // op
	reservations  *prometheus.CounterVec   // schedule, outcome
	delays        *prometheus.HistogramVec // schedule
	reloads       *prometheus.CounterVec   // result
	requests      *prometheus.CounterVec   // api, code

	decideDuration prometheus.Observer // storeDuration's decide, looked up once

	view *view // the admin view, counted with the metrics; nil: none
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_decisions_total",
			Help: "Decisions made, by policy, outcome (allowed, denied, shadowed: would have been denied) and the rule that denied (empty when allowed).",
		}, []string{"policy", "rule", "outcome"}),
		degraded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_degraded_decisions_total",
			Help: "Decisions made by the failure policy because the store failed, by policy and outcome.",
		}, []string{"policy", "outcome"}),
		storeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sluice_store_duration_seconds",
			Help:    "Latency of store calls, by operation (decide, reserve, cancel, ping).",
			Buckets: []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}, []string{"op"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_store_errors_total",
			Help: "Store calls that failed, by operation.",
		}, []string{"op"}),
		reservations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_reservations_total",
			Help: "Reservations, by schedule and outcome (reserved, rejected_delay, rejected_queue, degraded).",
		}, []string{"schedule", "outcome"}),
		delays: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "sluice_reservation_delay_seconds",
			Help:    "Delay of granted reservations, by schedule.",
			Buckets: []float64{0, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"schedule"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_config_reloads_total",
			Help: "Configuration reloads, by result (ok, error).",
		}, []string{"result"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_requests_total",
			Help: "API requests answered, by API (decide, peek, record, reserve, cancel, forward_auth, grpc, envoy) and status; each request of a batch counted on its own.",
		}, []string{"api", "code"}),
	}
	reg.MustRegister(m.decisions, m.degraded, m.storeDuration, m.storeErrors, m.reservations, m.delays, m.reloads, m.requests)
	m.decideDuration = m.storeDuration.WithLabelValues("decide")
	return m
}

// decision counts one decision of policy.
func (m *metrics) decision(policy string, d *sluice.Decision) {
	outcome := "allowed"
	switch {
	case d.Degraded:
		o := "denied"
		if d.Allowed {
			o = "allowed"
		}
		m.degraded.WithLabelValues(policy, o).Inc()
		if m.view != nil {
			m.view.decision(policy, "", outcomeDegraded)
		}
		return
	case d.Shadowed:
		outcome = "shadowed"
	case !d.Allowed:
		outcome = "denied"
	}
	m.decisions.WithLabelValues(policy, d.DeniedBy, outcome).Inc()
	if m.view != nil {
		m.view.decision(policy, d.DeniedBy, outcome)
	}
}

func (s *Server) metricsHandler() http.Handler {
	return promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{Registry: s.reg})
}

// instrumentedStore times every store call and counts its failures.
type instrumentedStore struct {
	store.Store
	m *metrics
}

// observe records one store call of op that started at start.
func (s *instrumentedStore) observe(op string, start time.Time, err error) {
	s.observeIn(s.m.storeDuration.WithLabelValues(op), op, start, err)
}

// observeIn is observe with op's histogram.
func (s *instrumentedStore) observeIn(h prometheus.Observer, op string, start time.Time, err error) {
	took := time.Since(start)
	h.Observe(took.Seconds())
	if s.m.view != nil {
		s.m.view.storeCall(op, took, err)
	}
	if _, bad := edge.Classify(err); err != nil && !bad {
		s.m.storeErrors.WithLabelValues(op).Inc()
	}
}

// Decide implements store.Store.
func (s *instrumentedStore) Decide(ctx context.Context, req *store.Request) error {
	start := time.Now()
	err := s.Store.Decide(ctx, req)
	s.observeIn(s.m.decideDuration, "decide", start, err)
	if err == nil && s.m.view != nil {
		s.m.view.decided(req)
	}
	return err
}

var _ store.Store = (*instrumentedStore)(nil)

// forLimiter returns s for a Limiter, marked as the store it instruments
// is, so that the Limiter calls it as it would the store alone: a
// store.Local without a deadline and a circuit breaker per call, which
// cost more than a decision in memory; a store.Sharded (a Redis Cluster's)
// with a circuit breaker per shard.
func (s *instrumentedStore) forLimiter() store.Store {
	switch st := s.Store.(type) {
	case store.Local:
		return localStore{s}
	case store.Sharded:
		return shardedStore{s, st}
	}
	return s
}

// shardedStore is an instrumentedStore over a store.Sharded.
type shardedStore struct {
	*instrumentedStore
	sharded store.Sharded
}

// Shard implements store.Sharded.
func (s shardedStore) Shard(req *store.Request) string { return s.sharded.Shard(req) }

// QueueShard implements store.Sharded.
func (s shardedStore) QueueShard(q store.Queue) string { return s.sharded.QueueShard(q) }

var _ store.Sharded = shardedStore{}

// localStore is an instrumentedStore over a store.Local.
type localStore struct{ *instrumentedStore }

// Local implements store.Local.
func (localStore) Local() {}

var _ store.Local = localStore{}
