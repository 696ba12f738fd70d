package wire

import (
	"fmt"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/store"
)

// RuleJSON is a rule as GET /v1/policies and the admin view show it.
type RuleJSON struct {
	Name      string   `json:"name"`
	By        []string `json:"by"`
	Limit     int64    `json:"limit"`
	WindowMS  int64    `json:"window_ms"`
	MinGapMS  int64    `json:"min_gap_ms"`
	Algorithm string   `json:"algorithm"`
	Burst     int64    `json:"burst,omitempty"`
	Spread    int      `json:"spread,omitempty"`
	BudgetMS  int64    `json:"budget_ms,omitempty"` // Rule.Budget: answered from slices each server leases
	Optional  bool     `json:"optional"`
	Shadow    bool     `json:"shadow"` // the rule's or its policy's

	// A concurrency rule's: the most leases alive at once, and the lease
	// time. Its algorithm is "concurrency", and its limit and window are
	// these two, as its window in the store counts them.
	Concurrency int64 `json:"concurrency,omitempty"`
	LeaseMS     int64 `json:"lease_ms,omitempty"`
}

// NewRuleJSON is the rule r of p as GET /v1/policies and the admin view
// show it.
func NewRuleJSON(p *sluice.Policy, r *sluice.Rule) RuleJSON {
	j := RuleJSON{Name: r.Name, By: NonNil(r.By), Limit: r.Limit, WindowMS: Millis(r.Window), MinGapMS: Millis(r.MinGap),
		Algorithm: r.Algorithm.String(), Burst: r.Burst, Spread: r.Spread, BudgetMS: Millis(r.Budget), Optional: r.Optional, Shadow: r.Shadow || p.Shadow,
		Concurrency: r.Concurrency, LeaseMS: Millis(r.Lease)}
	if r.Concurrency > 0 {
		j.Algorithm, j.Limit, j.WindowMS = store.Concurrency.String(), r.Concurrency, j.LeaseMS
	}
	return j
}

// NewScheduleJSON is sc as GET /v1/policies and the admin view show it.
func NewScheduleJSON(sc *sluice.Schedule) ScheduleJSON {
	return ScheduleJSON{Name: sc.Name, By: NonNil(sc.By), Rate: fmt.Sprintf("%d/%s", sc.Rate.Events, sc.Rate.Per),
		IntervalMS: float64(sc.Rate.Interval()) / float64(time.Millisecond), MaxDelayMS: Millis(sc.MaxDelay), MaxQueue: sc.MaxQueue}
}

// ScheduleJSON is a schedule as GET /v1/policies and the admin view show
// it.
type ScheduleJSON struct {
	Name       string   `json:"name"`
	By         []string `json:"by"`
	Rate       string   `json:"rate"`
	IntervalMS float64  `json:"interval_ms"`
	MaxDelayMS int64    `json:"max_delay_ms"`
	MaxQueue   int64    `json:"max_queue"`
}

// NonNil is s, or an empty list for nil: a JSON list is never null.
func NonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
