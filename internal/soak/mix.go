package soak

import (
	"fmt"
	"time"

	"github.com/sluicerate/sluice"
)

// The mix of policies the workers decide, every one saturated (each key is
// asked several times what its limits admit), so that every window is full
// when a fault strikes and a lost or doubled admission shows.

// Window is the length of every limit's window but the minimum gap's.
const Window = 10 * time.Second

// Kind is how the checker bounds a window.
type Kind uint8

const (
	// Sliding: at most Limit in any window of length Window (the log; a
	// minimum gap is Limit 1 per window of the gap).
	Sliding Kind = iota
	// Bucket: GCRA's token bucket of Burst refilled one unit per
	// Interval.
	Bucket
	// Counter: the sliding counter's own bound, twice Limit in any window
	// (each fixed bucket admits at most Limit, and a window overlaps two).
	Counter
)

// Bound is one limit the checker holds a window to.
type Bound struct {
	Kind     Kind
	Limit    int64
	Window   time.Duration
	Burst    int64
	Interval time.Duration
}

// Win is one window: one rule's state for one combination of attribute
// values.
type Win struct {
	Name   string
	Bounds []Bound
	// Rule is the rule's name in its policy, whose LimitStatus a peek
	// reads; Peek reports whether the store's count is exact (the log), so
	// that a peek measures admissions lost.
	Rule string
	Peek bool
}

// Target is one request the workers send: a policy and its attributes,
// and the windows an admission is recorded in.
type Target struct {
	Policy *sluice.Policy
	Attrs  map[string]string
	Wins   []int
	// Peek reports whether the auditor peeks at this target.
	Peek bool
}

// Mix is the load: its targets with their weights, and the windows.
type Mix struct {
	Targets []Target
	Weights []float64 // a target's share of the decisions
	Wins    []Win
}

// Sizes of the mix.
const (
	categories = 8
	users      = 64
	devices    = 16
	tenants    = 8
	counters   = 8
)

// Limits of the mix, per Window.
const (
	globalLimit   = 250
	categoryLimit = 40
	userLimit     = 20
	deviceLimit   = 80
	minGap        = 100 * time.Millisecond
	tenantLimit   = 50
	tenantBurst   = 10
	counterLimit  = 50
)

// NewMix returns the load's policies and targets: the notifier's global
// cap over a per-category cap (hierarchical, a quarter of the decisions),
// a per-user limit (a quarter), a per-device limit with a minimum gap (a
// fifth), a GCRA rule per tenant and a sliding-counter rule per key (the
// rest, equally).
func NewMix() *Mix {
	m := &Mix{}
	win := func(name, rule string, peek bool, bounds ...Bound) int {
		m.Wins = append(m.Wins, Win{Name: name, Rule: rule, Peek: peek, Bounds: bounds})
		return len(m.Wins) - 1
	}
	add := func(p *sluice.Policy, attrs map[string]string, share float64, peek bool, wins ...int) {
		m.Targets = append(m.Targets, Target{Policy: p, Attrs: attrs, Wins: wins, Peek: peek})
		m.Weights = append(m.Weights, share)
	}

	notify := &sluice.Policy{Name: "notify", Rules: []sluice.Rule{
		{Name: "global", Limit: globalLimit, Window: Window},
		{Name: "category", Limit: categoryLimit, Window: Window, By: []string{"category"}},
	}}
	global := win("notify global", "global", true, Bound{Kind: Sliding, Limit: globalLimit, Window: Window})
	for i := range categories {
		c := fmt.Sprintf("c%d", i)
		w := win("notify category "+c, "category", true, Bound{Kind: Sliding, Limit: categoryLimit, Window: Window})
		add(notify, map[string]string{"category": c}, 0.25/categories, true, global, w)
	}

	user := &sluice.Policy{Name: "user", Rules: []sluice.Rule{
		{Name: "user", Limit: userLimit, Window: Window, By: []string{"user"}},
	}}
	for i := range users {
		u := fmt.Sprintf("u%d", i)
		w := win("user "+u, "user", true, Bound{Kind: Sliding, Limit: userLimit, Window: Window})
		add(user, map[string]string{"user": u}, 0.25/users, true, w)
	}

	device := &sluice.Policy{Name: "device", Rules: []sluice.Rule{
		{Name: "device", Limit: deviceLimit, Window: Window, MinGap: minGap, By: []string{"device"}},
	}}
	for i := range devices {
		d := fmt.Sprintf("d%d", i)
		w := win("device "+d, "device", true,
			Bound{Kind: Sliding, Limit: deviceLimit, Window: Window},
			Bound{Kind: Sliding, Limit: 1, Window: minGap})
		add(device, map[string]string{"device": d}, 0.2/devices, true, w)
	}

	tenant := &sluice.Policy{Name: "tenant", Rules: []sluice.Rule{
		{Name: "tenant", Limit: tenantLimit, Window: Window, Algorithm: sluice.GCRA, Burst: tenantBurst, By: []string{"tenant"}},
	}}
	interval := (Window/tenantLimit + time.Microsecond - 1).Truncate(time.Microsecond)
	for i := range tenants {
		tn := fmt.Sprintf("t%d", i)
		w := win("tenant "+tn, "tenant", false, Bound{Kind: Bucket, Burst: tenantBurst, Interval: interval})
		add(tenant, map[string]string{"tenant": tn}, 0.15/tenants, false, w)
	}

	counter := &sluice.Policy{Name: "counter", Rules: []sluice.Rule{
		{Name: "key", Limit: counterLimit, Window: Window, Algorithm: sluice.SlidingCounter, By: []string{"key"}},
	}}
	for i := range counters {
		k := fmt.Sprintf("k%d", i)
		w := win("counter "+k, "key", false, Bound{Kind: Counter, Limit: counterLimit, Window: Window})
		add(counter, map[string]string{"key": k}, 0.15/counters, false, w)
	}
	return m
}
