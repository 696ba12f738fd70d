package front

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/internal/edge"
)

// State is one loaded configuration and what is derived from it. It is
// never modified once published.
type State struct {
	Config   *config.Config
	Limiter  *sluice.Limiter
	Policies *edge.Set[*http.Request] // the configured policies and schedules, with forward-auth's keys
	Loaded   time.Time
}

// State returns the state in use. A request reads it once.
func (f *Front) State() *State { return f.state.Load() }

// The deny cache. With a deny cache every configured policy caches its
// denials (sluice.Policy.CacheDenials) in its configuration's Limiter, so
// a reload starts with an empty cache: a new policy never meets the
// denials of the old one. The cache's counters are kept over reloads:
// those of the Limiters swapped out are added to the current one's.

// denyTotals is what the deny caches of the states swapped out counted.
type denyTotals struct {
	mu   sync.Mutex
	base sluice.DenyCacheStats // Entries unused
}

// CacheDenials leaves the policies of cfg that cache their denials (every
// policy of a file but those with deny_cache: false) caching them when
// size, the server's deny cache, is above 0, and returns the size of a
// Limiter's cache (sluice.Config.DenyCache: negative for none).
func CacheDenials(cfg *config.Config, size int) int {
	for i := range cfg.Policies {
		cfg.Policies[i].CacheDenials = cfg.Policies[i].CacheDenials && size > 0
	}
	if size > 0 {
		return size
	}
	return -1
}

// Publish makes st the state of every request that starts after it
// returns, adding the deny cache counters of the one it replaces to the
// totals, so that they never go back, and keeping its Limiter's abandons
// counted while it still sends them, and its slices counted until
// CloseRetired gives them back.
func (f *Front) Publish(st *State) {
	f.denials.mu.Lock()
	defer f.denials.mu.Unlock()
	if old := f.state.Load(); old != nil {
		o := old.Limiter.DenyCacheStats()
		f.denials.base.Hits += o.Hits
		f.denials.base.Misses += o.Misses
		f.denials.base.Evictions += o.Evictions
		f.abandons.retire(old.Limiter)
		f.budgets.retire(old.Limiter)
	}
	f.state.Store(st)
}

// Abandons. A Limiter abandons the leases of acquires whose store call
// failed (sluice.Limiter.AbandonStats) from a goroutine of its own, which
// goes on after a reload swaps the Limiter out: a Limiter swapped out is
// counted until it has nothing pending, then its counts join the totals.

// abandonTotals is what the Limiters swapped out did with the leases of
// failed acquires.
type abandonTotals struct {
	mu      sync.Mutex
	base    sluice.AbandonStats // of the Limiters done; Pending unused
	retired []*sluice.Limiter   // swapped out with abandons pending
}

// retire counts l's abandons from now on as those of a Limiter swapped
// out.
func (a *abandonTotals) retire(l *sluice.Limiter) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.retired = append(a.retired, l)
}

// stats returns the abandons of the Limiters swapped out and of cur, the
// current one (nil: none), since the server started.
func (a *abandonTotals) stats(cur *sluice.Limiter) sluice.AbandonStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	add := func(to *sluice.AbandonStats, st sluice.AbandonStats) {
		to.Pending += st.Pending
		to.Abandoned += st.Abandoned
		to.Held += st.Held
		to.Expired += st.Expired
		to.Dropped += st.Dropped
	}
	var pending sluice.AbandonStats
	kept := a.retired[:0]
	for _, l := range a.retired {
		st := l.AbandonStats()
		if st.Pending == 0 {
			add(&a.base, st)
			continue
		}
		kept = append(kept, l)
		add(&pending, st)
	}
	clear(a.retired[len(kept):])
	a.retired = kept
	total := a.base
	add(&total, pending)
	if cur != nil {
		add(&total, cur.AbandonStats())
	}
	return total
}

// abandonCollectors are the abandons' metrics.
func (f *Front) abandonCollectors() []prometheus.Collector {
	stats := func() sluice.AbandonStats {
		var cur *sluice.Limiter
		if st := f.state.Load(); st != nil {
			cur = st.Limiter
		}
		return f.abandons.stats(cur)
	}
	total := func(outcome, help string, v func(sluice.AbandonStats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sluice_lease_abandons_total", Help: help,
			ConstLabels: prometheus.Labels{"outcome": outcome}},
			func() float64 { return float64(v(stats())) })
	}
	const help = "Leases of acquires whose store call failed, which the store may have taken all the same, by what became of them: " +
		"ended (the store had taken the lease; the abandon freed its slots), nothing_taken (the store had not; a tombstone keeps the late acquire from taking anything), " +
		"expired (the store did not answer within the lease time), dropped (over 10,000 waiting, or the store closed)."
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_lease_abandons_pending",
			Help: "Leases of acquires whose store call failed that wait for the store to answer their abandon.",
		}, func() float64 { return float64(stats().Pending) }),
		total("ended", help, func(st sluice.AbandonStats) int64 { return st.Held }),
		total("nothing_taken", help, func(st sluice.AbandonStats) int64 { return st.Abandoned - st.Held }),
		total("expired", help, func(st sluice.AbandonStats) int64 { return st.Expired }),
		total("dropped", help, func(st sluice.AbandonStats) int64 { return st.Dropped }),
	}
}

// denyCacheStats returns the deny cache's counters since the server
// started and the entries the current state's cache holds.
func (f *Front) denyCacheStats() sluice.DenyCacheStats {
	f.denials.mu.Lock()
	defer f.denials.mu.Unlock()
	st := f.denials.base
	if cur := f.state.Load(); cur != nil {
		c := cur.Limiter.DenyCacheStats()
		st.Entries = c.Entries
		st.Hits += c.Hits
		st.Misses += c.Misses
		st.Evictions += c.Evictions
	}
	return st
}

// denyCacheCollectors are the deny cache's metrics.
func (f *Front) denyCacheCollectors() []prometheus.Collector {
	counter := func(name, help string, v func(sluice.DenyCacheStats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(v(f.denyCacheStats())) })
	}
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_deny_cache_entries",
			Help: "Denials held by the deny cache (serve --deny-cache), expired ones included until looked up or evicted.",
		}, func() float64 { return float64(f.denyCacheStats().Entries) }),
		counter("sluice_deny_cache_hits_total", "Decisions answered from the deny cache, without a store call.",
			func(st sluice.DenyCacheStats) uint64 { return st.Hits }),
		counter("sluice_deny_cache_misses_total", "Decisions the deny cache could not answer: they went to the store.",
			func(st sluice.DenyCacheStats) uint64 { return st.Misses }),
		counter("sluice_deny_cache_evictions_total", "Denials the deny cache dropped, least recently used first, to hold newer ones.",
			func(st sluice.DenyCacheStats) uint64 { return st.Evictions }),
	}
}
