package rls

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicerate/sluice/internal/envoy/decide"
)

// metrics are envoyproxy/ratelimit's Prometheus metrics, with the
// names and labels its statsd mapping gives them, beside sluice's own.
type metrics struct {
	totalHits, overLimit, nearLimit, withinLimit, shadowMode *prometheus.CounterVec // domain, key1, key2
	loads, loadErrors                                        *prometheus.CounterVec
	errors                                                   *prometheus.CounterVec // err_type
}

func newMetrics(reg prometheus.Registerer) *metrics {
	vec := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	keys := []string{"domain", "key1", "key2"}
	m := &metrics{
		totalHits:   vec("ratelimit_service_rate_limit_total_hits", "Hits of each descriptor key, as envoyproxy/ratelimit counts them.", keys...),
		overLimit:   vec("ratelimit_service_rate_limit_over_limit", "Hits over the limit, by descriptor key.", keys...),
		nearLimit:   vec("ratelimit_service_rate_limit_near_limit", "Hits within the limit but past 80% of it, by descriptor key.", keys...),
		withinLimit: vec("ratelimit_service_rate_limit_within_limit", "Hits within the limit, by descriptor key.", keys...),
		shadowMode:  vec("ratelimit_service_rate_limit_shadow_mode", "Hits over the limit admitted by shadow_mode or quota_mode, by descriptor key.", keys...),
		loads:       vec("ratelimit_service_config_load_success", "Envoy configuration directory loads that succeeded."),
		loadErrors:  vec("ratelimit_service_config_load_error", "Envoy configuration directory loads that failed."),
		errors:      vec("ratelimit_service_should_rate_limit_error", "ShouldRateLimit calls that failed, by err_type (redis_error, service_error).", "err_type"),
	}
	reg.MustRegister(m.totalHits, m.overLimit, m.nearLimit, m.withinLimit, m.shadowMode, m.loads, m.loadErrors, m.errors)
	return m
}

// count counts a request's descriptors. A key "domain.a.b.c" is labelled
// key1 "a" and key2 "b.c" (key2 empty for a key of one level).
func (m *metrics) count(domain string, ds []decide.DescriptorResult) {
	for _, d := range ds {
		if d.Stat == "" || d.Outcome == decide.Unlimited {
			continue
		}
		rest := d.Stat[min(len(domain)+1, len(d.Stat)):]
		key1, key2 := rest, ""
		if i := indexDot(rest); i >= 0 {
			key1, key2 = rest[:i], rest[i+1:]
		}
		hits := float64(d.Hits)
		m.totalHits.WithLabelValues(domain, key1, key2).Add(hits)
		switch d.Outcome {
		case decide.Over:
			m.overLimit.WithLabelValues(domain, key1, key2).Add(hits)
		case decide.Shadowed:
			m.overLimit.WithLabelValues(domain, key1, key2).Add(hits)
			m.shadowMode.WithLabelValues(domain, key1, key2).Add(hits)
		case decide.Within:
			m.withinLimit.WithLabelValues(domain, key1, key2).Add(hits)
			if d.Near {
				m.nearLimit.WithLabelValues(domain, key1, key2).Add(hits)
			}
		}
	}
}

func indexDot(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			return i
		}
	}
	return -1
}
