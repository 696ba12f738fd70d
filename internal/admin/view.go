// Package admin is sluice serve's admin view: a live page of what the
// server is doing (its policies, decision rates, the leases it granted that
// are in flight, the keys it denies now and when each is let through, a key
// inspector, the store's health), the JSON API the page reads, /metrics and
// pprof, on a listener of its own.
//
// A View counts what the fronts' metrics count, as they count it (it is
// their front.Observer), so that its figures are theirs. It reads a store
// only through an Inspector, which sluice serve gives for Redis (package
// redisinspect): the view knows no store's type.
package admin

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/front"
	"github.com/sluicerate/sluice/store"
)

// View is what the admin view counts as the server works: decision rates,
// denied keys, the store's health and the latest reload. It is safe for
// concurrent use; create one with NewView.
type View struct {
	clock  sluice.Clock
	rates  *rates
	denied *deniedKeys
	health storeHealth

	mu     sync.Mutex
	reload reloadJSON // the latest reload
}

var _ front.Observer = (*View)(nil)

// systemClock is the view's default clock, package time's.
type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// NewView returns a View on clock: the seconds its rates are counted in and
// when a denied key is let through. Nil: the system clock.
func NewView(clock sluice.Clock) *View {
	if clock == nil {
		clock = systemClock{}
	}
	return &View{clock: clock, rates: newRates(), denied: newDeniedKeys()}
}

// Clock returns the view's clock.
func (v *View) Clock() sluice.Clock { return v.clock }

// Decision implements front.Observer.
func (v *View) Decision(policy, rule, outcome string) {
	v.rates.add(seriesKey{policy, rule, outcome}, v.clock.Now())
}

// StoreCall implements front.Observer.
func (v *View) StoreCall(op string, took time.Duration, err error) {
	v.health.observe(op, took, v.clock.Now(), err)
}

// Decided implements front.Observer: the windows of a decided request that
// did not fit are the denied keys, whether the store or the deny cache
// (cached) answered.
func (v *View) Decided(req *store.Request, cached bool) {
	v.denied.observe(req, v.clock.Now(), cached)
}

// Reloaded records a reload of file that ended with err.
func (v *View) Reloaded(file string, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.reload = reloadJSON{File: file, At: v.clock.Now().UTC(), OK: err == nil}
	if err != nil {
		v.reload.Error = err.Error()
	}
}

// lastReload returns the latest reload, or nil before the first.
func (v *View) lastReload() *reloadJSON {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.reload.At.IsZero() {
		return nil
	}
	rl := v.reload
	return &rl
}

// reloadJSON is the latest reload in GET /api/v1/config.
type reloadJSON struct {
	File  string    `json:"file"`
	At    time.Time `json:"at"`
	OK    bool      `json:"ok"`
	Error string    `json:"error,omitempty"`
}

// Collectors are the gauges the alert rules in deploy/ need beside the
// fronts' counters: whether the store answers, the circuit breaker's
// state, and whether the latest reload took. They are read when scraped.
func (v *View) Collectors(f *front.Front) []prometheus.Collector {
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
			if err := f.Ready(ctx); err != nil {
				return 0
			}
			return 1
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_store_breaker_open",
			Help: "Whether the circuit breaker over the store is open or half-open (1): store calls are not made and decisions are degraded.",
		}, func() float64 {
			if f.State().Limiter.Circuit() == "closed" {
				return 0
			}
			return 1
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_config_last_reload_successful",
			Help: "Whether the latest reload of the configuration file took (1) or failed, leaving the previous configuration in use (0); 1 before any reload.",
		}, func() float64 {
			if rl := v.lastReload(); rl != nil && !rl.OK {
				return 0
			}
			return 1
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "sluice_config_loaded_timestamp_seconds",
			Help: "When the configuration in use was loaded, in Unix seconds.",
		}, func() float64 {
			return float64(f.State().Loaded.UnixMilli()) / 1000
		}),
	}
}
