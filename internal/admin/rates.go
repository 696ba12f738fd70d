package admin

import (
	"cmp"
	"slices"
	"strings"
	"sync"
	"time"
)

// rateSeconds is how far back the admin view keeps per-second counts: five
// minutes. rateSeries caps how many series it keeps (policy × rule ×
// outcome, from the configuration, so only a file with that many rules
// reaches it): the decisions of further series are not kept, and the
// answer says how many were dropped. A series takes 300 × 16 bytes, so at
// most 1024 × 4.8 KB ≈ 4.9 MB; a file of 20 policies of 5 rules makes
// about 300 series, 1.4 MB.
const (
	rateSeconds = 300
	rateSeries  = 1024
)

// Outcomes of the admin view's series: the outcome label of
// sluice_decisions_total, and degraded for sluice_degraded_decisions_total.
const (
	outcomeAllowed  = "allowed"
	outcomeDenied   = "denied"
	outcomeShadowed = "shadowed"
	outcomeDegraded = "degraded"
)

// rates counts decisions per second for the admin view, by policy, rule
// and outcome, exactly as the server's counters count them (the same call
// increments both). It is safe for concurrent use.
type rates struct {
	mu      sync.Mutex
	series  map[seriesKey]*series
	dropped int64
}

// seriesKey names a series: rule is the denying rule for denied and
// shadowed, empty for allowed and degraded.
type seriesKey struct{ policy, rule, outcome string }

// series is one ring of per-second counts and their total since start.
type series struct {
	total int64
	count [rateSeconds]int64
	sec   [rateSeconds]int64 // the Unix second count[i] holds
}

func newRates() *rates { return &rates{series: map[seriesKey]*series{}} }

// add counts one decision at now.
func (r *rates) add(k seriesKey, now time.Time) {
	sec := now.Unix()
	i := int(((sec % rateSeconds) + rateSeconds) % rateSeconds)
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.series[k]
	if s == nil {
		if len(r.series) >= rateSeries {
			r.dropped++
			return
		}
		s = &series{}
		r.series[k] = s
	}
	if s.sec[i] != sec {
		s.sec[i], s.count[i] = sec, 0
	}
	s.count[i]++
	s.total++
}

// ratesJSON is the answer of GET /api/v1/rates.
type ratesJSON struct {
	// Now is the server's time; the series' last second is Now's.
	Now time.Time `json:"now"`

	// Start is the Unix second of every series' first count; Seconds the
	// number of counts each holds, one per second up to Now.
	Start   int64 `json:"start"`
	Seconds int   `json:"seconds"`

	Series []seriesJSON `json:"series"`

	// Dropped counts decisions not kept because too many series exist.
	Dropped int64 `json:"dropped,omitempty"`
}

// seriesJSON is one series of a ratesJSON.
type seriesJSON struct {
	Policy  string `json:"policy"`
	Rule    string `json:"rule"`
	Outcome string `json:"outcome"`

	// Total counts every decision since the server started: the value of
	// sluice_decisions_total{policy, rule, outcome} (for degraded: the sum
	// of sluice_degraded_decisions_total{policy} over its outcomes).
	Total int64 `json:"total"`

	// PerSecond holds the decisions of each second from Start.
	PerSecond []int64 `json:"per_second"`
}

// snapshot returns the last seconds (at most rateSeconds) up to now.
func (r *rates) snapshot(now time.Time, seconds int) ratesJSON {
	seconds = min(max(seconds, 1), rateSeconds)
	end := now.Unix()
	start := end - int64(seconds) + 1
	out := ratesJSON{Now: now.UTC(), Start: start, Seconds: seconds, Series: []seriesJSON{}}
	r.mu.Lock()
	out.Dropped = r.dropped
	for k, s := range r.series {
		sj := seriesJSON{Policy: k.policy, Rule: k.rule, Outcome: k.outcome, Total: s.total, PerSecond: make([]int64, seconds)}
		for j := range seconds {
			sec := start + int64(j)
			i := int(((sec % rateSeconds) + rateSeconds) % rateSeconds)
			if s.sec[i] == sec {
				sj.PerSecond[j] = s.count[i]
			}
		}
		out.Series = append(out.Series, sj)
	}
	r.mu.Unlock()
	slices.SortFunc(out.Series, func(a, b seriesJSON) int {
		return cmp.Or(strings.Compare(a.Policy, b.Policy), strings.Compare(a.Rule, b.Rule), strings.Compare(a.Outcome, b.Outcome))
	})
	return out
}
