package front

import (
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicerate/sluice/store"
)

// overLimitKeys bounds the keys OverLimit remembers within a minute: past
// it, more keys over a limit that minute are counted, and summed up in one
// line when the minute ends, but not logged one by one. The memory is
// about overLimitKeys × the keys' length, whatever the traffic.
const overLimitKeys = 1000

// OverLimit counts and logs the costs a record or a lease's settle counted
// above a rate rule's limit (the Limiter's OnOverLimit hook, internal/hooks): such a cost keeps
// the key denied until it leaves the window, and is most often a unit
// mistake (10,000,000 bytes against a limit of 100,000 a minute). Every
// one is counted in sluice_over_limit_total{policy, rule}; each key is
// logged at warn once a minute at most, so that a client repeating the
// mistake does not flood the log. It is safe for concurrent use.
type OverLimit struct {
	total *prometheus.CounterVec // policy, rule
	log   *slog.Logger
	now   func() time.Time

	mu      sync.Mutex
	minute  int64               // the minute logged holds, since the epoch
	logged  map[string]struct{} // the keys logged in that minute
	dropped int                 // keys of that minute not logged: logged was full
}

// NewOverLimit returns an OverLimit that logs to log, on the clock now
// (nil: time.Now), and registers its counter in reg.
func NewOverLimit(reg prometheus.Registerer, log *slog.Logger, now func() time.Time) *OverLimit {
	if now == nil {
		now = time.Now
	}
	o := &OverLimit{log: log, now: now, logged: map[string]struct{}{},
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_over_limit_total",
			Help: "Records and lease settles whose cost was above a rate rule's limit (the key is denied until the cost leaves the window; most often a unit mistake), by policy and rule.",
		}, []string{"policy", "rule"})}
	reg.MustRegister(o.total)
	return o
}

// Observe counts a cost above c's limit, and logs it unless c's key was
// logged this minute. It is the Limiter's OnOverLimit hook.
func (o *OverLimit) Observe(policy string, c *store.Check, cost int64) {
	o.total.WithLabelValues(policy, c.Rule).Inc()
	now := o.now()
	key := policy + "\x00" + c.Rule + "\x00" + strings.Join(c.Values, "\x00")

	o.mu.Lock()
	if m := now.Unix() / 60; m != o.minute {
		if o.dropped > 0 {
			o.log.Warn("more keys than these were recorded over a rule's limit in the last minute; sluice_over_limit_total counts them all",
				slog.Int("keys_not_logged", o.dropped))
		}
		o.minute, o.dropped = m, 0
		clear(o.logged)
	}
	_, seen := o.logged[key]
	full := !seen && len(o.logged) >= overLimitKeys
	switch {
	case full:
		o.dropped++
	case !seen:
		o.logged[key] = struct{}{}
	}
	o.mu.Unlock()
	if seen || full {
		return
	}
	o.log.Warn("a cost above the rule's limit was recorded: the key is denied until it leaves the window; check the cost's unit (logged once a minute per key)",
		slog.String("policy", policy), slog.String("rule", c.Rule), slog.Any("values", c.Values),
		slog.Int64("cost", cost), slog.Int64("limit", c.Limit*int64(max(c.Parts, 1))), slog.Duration("window", c.Window))
}
