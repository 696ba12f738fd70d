package front

import (
	"cmp"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicerate/sluice/store"
)

// leaseBook counts the leases this server granted, for the metrics: those
// in flight, per concurrency rule, and those that expired before this
// server released, settled or extended them, a leak of leases (a client
// that never released, or died). It knows only its own: a lease released
// through another server of a fleet counts here as expired. It is a
// prometheus.Collector, swept of expired leases at each scrape. It is
// safe for concurrent use.
type leaseBook struct {
	mu      sync.Mutex
	now     func() time.Time
	held    map[string]*heldLease // by lease id
	flight  map[ruleKey]float64
	expired map[ruleKey]float64

	flightDesc, expiredDesc *prometheus.Desc
}

// ruleKey names a concurrency rule.
type ruleKey struct{ policy, rule string }

// heldLease is a lease this server granted: its concurrency rules, and
// when it expires on this server's clock.
type heldLease struct {
	rules    []ruleKey
	deadline time.Time
}

func newLeaseBook() *leaseBook {
	return &leaseBook{now: time.Now, held: map[string]*heldLease{}, flight: map[ruleKey]float64{}, expired: map[ruleKey]float64{},
		flightDesc: prometheus.NewDesc("sluice_leases_in_flight",
			"Leases this server granted that are alive (not released, settled or expired), by policy and concurrency rule.",
			[]string{"policy", "rule"}, nil),
		expiredDesc: prometheus.NewDesc("sluice_leases_expired_total",
			"Leases this server granted that expired before they were released or settled through it (a leak of leases), by policy and concurrency rule.",
			[]string{"policy", "rule"}, nil),
	}
}

// LeaseAcquired counts the lease of req that an Acquire granted, when it
// returned err nil and a lease (not a denial): a lease of the store, or of
// the fallback store a Limiter takes leases from while the store fails
// (the server's on_error: fallback), so that sluice_leases_in_flight counts
// every lease this server granted, whichever store holds it.
func (m *Metrics) LeaseAcquired(req *store.Request, lease *store.LeaseGrant, err error) {
	if err == nil && !lease.Expires.IsZero() {
		m.leases.granted(req, lease)
	}
}

// LeaseFinished counts what a Finish of req found, when it returned err
// nil: the end or extension of a lease LeaseAcquired counted.
func (m *Metrics) LeaseFinished(req *store.FinishRequest, st store.LeaseState, err error) {
	if err == nil {
		m.leases.finished(req, st)
	}
}

// granted notes the lease of req the store granted.
func (b *leaseBook) granted(req *store.Request, lease *store.LeaseGrant) {
	h := &heldLease{deadline: b.now().Add(lease.TTL)}
	for i := range req.Checks {
		if req.Checks[i].Algorithm == store.Concurrency {
			h.rules = append(h.rules, ruleKey{req.Policy, req.Checks[i].Rule})
		}
	}
	if len(h.rules) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sweep()
	b.held[lease.ID] = h
	for _, k := range h.rules {
		b.flight[k]++
	}
}

// finished notes what Finish of req found.
func (b *leaseBook) finished(req *store.FinishRequest, st store.LeaseState) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sweep()
	h := b.held[req.ID]
	switch {
	case h == nil || !st.Held:
	case req.Op == store.LeaseExtend:
		h.deadline = b.now().Add(req.TTL)
	default:
		delete(b.held, req.ID)
		for _, k := range h.rules {
			b.flight[k]--
		}
	}
}

// sweep moves the leases past their deadline from in flight to expired.
// The caller holds b.mu.
func (b *leaseBook) sweep() {
	now := b.now()
	for id, h := range b.held {
		if now.Before(h.deadline) {
			continue
		}
		delete(b.held, id)
		for _, k := range h.rules {
			b.flight[k]--
			b.expired[k]++
		}
	}
}

// LeaseFigures are the leases this server granted of one concurrency rule,
// as its metrics count them (sluice_leases_in_flight and
// sluice_leases_expired_total).
type LeaseFigures struct {
	Policy, Rule string

	// InFlight counts those alive now: granted and not released, settled
	// or expired.
	InFlight int64

	// Expired counts those that expired before they were released or
	// settled through this server, since it started: a leak of leases.
	Expired int64
}

// Leases returns the figures of every concurrency rule this server granted
// a lease of since it started, by policy and rule, as the metrics would
// be scraped now. It changes nothing but what a scrape does (moving
// leases past their deadline from in flight to expired).
func (m *Metrics) Leases() []LeaseFigures {
	return m.leases.snapshot()
}

// snapshot returns b's figures, by policy and rule.
func (b *leaseBook) snapshot() []LeaseFigures {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sweep()
	out := make([]LeaseFigures, 0, len(b.flight))
	for k, v := range b.flight {
		out = append(out, LeaseFigures{Policy: k.policy, Rule: k.rule, InFlight: int64(v), Expired: int64(b.expired[k])})
	}
	slices.SortFunc(out, func(a, b LeaseFigures) int {
		return cmp.Or(cmp.Compare(a.Policy, b.Policy), cmp.Compare(a.Rule, b.Rule))
	})
	return out
}

// Describe implements prometheus.Collector.
func (b *leaseBook) Describe(ch chan<- *prometheus.Desc) {
	ch <- b.flightDesc
	ch <- b.expiredDesc
}

// Collect implements prometheus.Collector.
func (b *leaseBook) Collect(ch chan<- prometheus.Metric) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sweep()
	for k, v := range b.flight {
		ch <- prometheus.MustNewConstMetric(b.flightDesc, prometheus.GaugeValue, v, k.policy, k.rule)
	}
	for k, v := range b.expired {
		ch <- prometheus.MustNewConstMetric(b.expiredDesc, prometheus.CounterValue, v, k.policy, k.rule)
	}
}
