package server

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// viewCollectors are the gauges the alert rules in deploy/ need beside the
// counters of metrics.go: whether the store answers, the circuit breaker's
// state, and whether the latest reload took. They are read when scraped.
func (s *Server) viewCollectors() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_store_up",
			Help: "Whether the store answered a ping made for this scrape (1) or not (0), within 1 s.",
		}, func() float64 {
			// Not counted in sluice_store_* by op: this gauge reports it, and
			// counters gathered in the same scrape, before or after it, would
			// otherwise disagree from scrape to scrape.
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			if err := s.Ready(ctx); err != nil {
				return 0
			}
			return 1
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_store_breaker_open",
			Help: "Whether the circuit breaker over the store is open or half-open (1): store calls are not made and decisions are degraded.",
		}, func() float64 {
			if s.state.Load().lim.Circuit() == "closed" {
				return 0
			}
			return 1
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_config_last_reload_successful",
			Help: "Whether the latest reload of the configuration file took (1) or failed, leaving the previous configuration in use (0); 1 before any reload.",
		}, func() float64 {
			s.view.mu.Lock()
			defer s.view.mu.Unlock()
			if !s.view.reload.At.IsZero() && !s.view.reload.OK {
				return 0
			}
			return 1
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_config_loaded_timestamp_seconds",
			Help: "When the configuration in use was loaded, in Unix seconds.",
		}, func() float64 {
			return float64(s.state.Load().loaded.UnixMilli()) / 1000
		}),
	}
}
