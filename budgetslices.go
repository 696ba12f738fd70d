package sluice

import (
	"cmp"
	"slices"
	"time"
)

// SliceStatus is one slice of a budgeted rule's window that a Limiter
// holds (see Rule.Budget).
type SliceStatus struct {
	// Policy and Rule name the rule, Values its window (the values of its
	// attributes, in the order of its By).
	Policy, Rule string
	Values       []string

	// Granted is the slice's size, Used how much of it was admitted.
	Granted, Used int64

	// Left is how long the Limiter may still admit from the slice.
	Left time.Duration
}

// Slices returns the slices the Limiter holds now that it may still
// admit from, by policy, rule and values. It is for display: the slices
// change as decisions are made.
func (l *Limiter) Slices() []SliceStatus {
	now := l.clock().Now()
	b := &l.budgets
	b.mu.RLock()
	all := make([]*slice, 0, len(b.slices))
	for _, sl := range b.slices {
		all = append(all, sl)
	}
	b.mu.RUnlock()
	var out []SliceStatus
	for _, sl := range all {
		sl.mu.Lock()
		if sl.granted > 0 && now.Before(sl.deadline) {
			out = append(out, SliceStatus{Policy: sl.policy, Rule: sl.check.Rule, Values: slices.Clone(sl.check.Values),
				Granted: sl.granted, Used: sl.used, Left: sl.deadline.Sub(now)})
		}
		sl.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b SliceStatus) int {
		return cmp.Or(cmp.Compare(a.Policy, b.Policy), cmp.Compare(a.Rule, b.Rule), slices.Compare(a.Values, b.Values))
	})
	return out
}
