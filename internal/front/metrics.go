package front

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/store"
)

// Metrics are the fronts' Prometheus collectors, their names and labels
// those of every sluice serve since the first.
type Metrics struct {
	decisions     *prometheus.CounterVec   // policy, rule, outcome
	degraded      *prometheus.CounterVec   // policy, outcome
	storeDuration *prometheus.HistogramVec // op
	storeErrors   *prometheus.CounterVec   // op
	reservations  *prometheus.CounterVec   // schedule, outcome
	delays        *prometheus.HistogramVec // schedule
	reloads       *prometheus.CounterVec   // result
	requests      *prometheus.CounterVec   // api, code

	decideDuration prometheus.Observer // storeDuration's decide, looked up once

	leases *leaseBook // the leases this server granted

	obs Observer // told of what is counted; nil: none
}

// Observer is told of what the metrics count, as they count it: the admin
// view counts with them, so that its figures are theirs.
type Observer interface {
	// Decision counts one decision of policy with the outcome and rule of
	// sluice_decisions_total, or the outcome "degraded".
	Decision(policy, rule, outcome string)

	// StoreCall records a store call of op that took took and ended in
	// err.
	StoreCall(op string, took time.Duration, err error)

	// Decided is told of each request the store decided, and of each the
	// Limiter's deny cache answered (cached): its windows, and in Results
	// the decision's status of each.
	Decided(req *store.Request, cached bool)
}

// NewMetrics registers the metrics on reg; obs, when not nil, is told of
// what they count.
func NewMetrics(reg prometheus.Registerer, obs Observer) *Metrics {
	m := &Metrics{obs: obs,
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
			Help:    "Latency of store calls, by operation (decide, reserve, cancel, acquire, finish: a lease released, settled or extended, abandon, budget: a decision that leases or gives back slices of budgeted rules, ping).",
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
	m.leases = newLeaseBook()
	reg.MustRegister(m.decisions, m.degraded, m.storeDuration, m.storeErrors, m.reservations, m.delays, m.reloads, m.requests, m.leases)
	m.decideDuration = m.storeDuration.WithLabelValues("decide")
	return m
}

// Decision counts one decision of policy.
func (m *Metrics) Decision(policy string, d *sluice.Decision) {
	outcome := "allowed"
	switch {
	case d.Degraded:
		o := "denied"
		if d.Allowed {
			o = "allowed"
		}
		m.degraded.WithLabelValues(policy, o).Inc()
		if m.obs != nil {
			m.obs.Decision(policy, "", "degraded")
		}
		return
	case d.Shadowed:
		outcome = "shadowed"
	case !d.Allowed:
		outcome = "denied"
	}
	m.decisions.WithLabelValues(policy, d.DeniedBy, outcome).Inc()
	if m.obs != nil {
		m.obs.Decision(policy, d.DeniedBy, outcome)
	}
}

// Reload counts a reload of a configuration that ended with err.
func (m *Metrics) Reload(err error) {
	if err != nil {
		m.reloads.WithLabelValues("error").Inc()
		return
	}
	m.reloads.WithLabelValues("ok").Inc()
}

// Reserved counts the reservation res of schedule.
func (m *Metrics) Reserved(schedule string, res *sluice.Reservation) {
	switch {
	case res.Degraded:
		m.reservations.WithLabelValues(schedule, "degraded").Inc()
	case res.OK:
		m.reservations.WithLabelValues(schedule, "reserved").Inc()
		m.delays.WithLabelValues(schedule).Observe(res.Delay.Seconds())
	default:
		m.reservations.WithLabelValues(schedule, "rejected_"+string(res.Reason)).Inc()
	}
}
