package server

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/config"
)

// The deny cache. With Options.DenyCache above 0 every configured policy
// caches its denials (sluice.Policy.CacheDenials) in its configuration's
// Limiter, so a reload starts with an empty cache: a new policy never meets
// the denials of the old one. The cache's counters are kept over reloads:
// those of the Limiters swapped out are added to the current one's.

// denyTotals is what the deny caches of the configurations swapped out
// counted.
type denyTotals struct {
	mu   sync.Mutex
	base sluice.DenyCacheStats // Entries unused
}

// cacheDenials leaves the policies of cfg that cache their denials (every
// policy of a file but those with deny_cache: false) caching them when the
// server has a deny cache, and returns the size of its Limiter's cache
// (sluice.Config.DenyCache: negative for none).
func (s *Server) cacheDenials(cfg *config.Config) int {
	for i := range cfg.Policies {
		cfg.Policies[i].CacheDenials = cfg.Policies[i].CacheDenials && s.denyCache > 0
	}
	if s.denyCache > 0 {
		return s.denyCache
	}
	return -1
}

// publish makes st the state in use, adding the deny cache counters of the
// one it replaces to the totals, so that they never go back.
func (s *Server) publish(st *state) {
	s.denials.mu.Lock()
	defer s.denials.mu.Unlock()
	if old := s.state.Load(); old != nil {
		o := old.lim.DenyCacheStats()
		s.denials.base.Hits += o.Hits
		s.denials.base.Misses += o.Misses
		s.denials.base.Evictions += o.Evictions
	}
	s.state.Store(st)
}

// denyCacheStats returns the deny cache's counters since the server started
// and the entries the current configuration's cache holds.
func (s *Server) denyCacheStats() sluice.DenyCacheStats {
	s.denials.mu.Lock()
	defer s.denials.mu.Unlock()
	st := s.denials.base
	if cur := s.state.Load(); cur != nil {
		c := cur.lim.DenyCacheStats()
		st.Entries = c.Entries
		st.Hits += c.Hits
		st.Misses += c.Misses
		st.Evictions += c.Evictions
	}
	return st
}

// denyCacheCollectors are the deny cache's metrics.
func (s *Server) denyCacheCollectors() []prometheus.Collector {
	counter := func(name, help string, v func(sluice.DenyCacheStats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(v(s.denyCacheStats())) })
	}
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_deny_cache_entries",
			Help: "Denials held by the deny cache (serve --deny-cache), expired ones included until looked up or evicted.",
		}, func() float64 { return float64(s.denyCacheStats().Entries) }),
		counter("sluice_deny_cache_hits_total", "Decisions answered from the deny cache, without a store call.",
			func(st sluice.DenyCacheStats) uint64 { return st.Hits }),
		counter("sluice_deny_cache_misses_total", "Decisions the deny cache could not answer: they went to the store.",
			func(st sluice.DenyCacheStats) uint64 { return st.Misses }),
		counter("sluice_deny_cache_evictions_total", "Denials the deny cache dropped, least recently used first, to hold newer ones.",
			func(st sluice.DenyCacheStats) uint64 { return st.Evictions }),
	}
}

// DefaultDenyCache is sluice serve's deny cache size (--deny-cache).
const DefaultDenyCache = sluice.DefaultDenyCache
