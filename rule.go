package sluice

import (
	"fmt"
	"time"
)

// Rule is one sliding-window limit: at most Limit units of cost in any window
// of length Window, optionally with at least MinGap between admitted events.
//
// A rule with no By attributes is one window shared by every request of its
// policy (a global cap). A rule with By attributes keeps one window per
// distinct combination of those attributes' values (per user, per category).
//
// Windows are half-open: at time T a window covers (T-Window, T], so an event
// recorded exactly Window ago no longer counts. Stores work in whole
// microseconds; durations are truncated to microseconds.
type Rule struct {
	// Name identifies the rule within its policy; it appears in
	// Decision.DeniedBy and in store keys. Required.
	Name string

	// Limit is the most cost admitted in any window. Required, > 0.
	Limit int64

	// Window is the length of the sliding window. Required, >= 1µs.
	Window time.Duration

	// MinGap, when > 0, is the least time between two admitted events of
	// this rule's window. Zero means no gap is enforced.
	MinGap time.Duration

	// By names the request attributes that select this rule's window, in
	// order. Empty means one shared window.
	By []string
}

// validate reports why r cannot be enforced, or nil.
func (r *Rule) validate() error {
	switch {
	case r.Name == "":
		return fmt.Errorf("%w: a rule has no name; give every rule a name such as \"global\" or \"per-user\"", ErrInvalidPolicy)
	case r.Limit <= 0:
		return fmt.Errorf("%w: rule %q has limit %d; a limit must be at least 1", ErrInvalidPolicy, r.Name, r.Limit)
	case r.Window < time.Microsecond:
		return fmt.Errorf("%w: rule %q has window %v; a window must be at least 1µs", ErrInvalidPolicy, r.Name, r.Window)
	case r.MinGap < 0:
		return fmt.Errorf("%w: rule %q has negative min gap %v", ErrInvalidPolicy, r.Name, r.MinGap)
	}
	for i, a := range r.By {
		if a == "" {
			return fmt.Errorf("%w: rule %q has an empty attribute name in By[%d]", ErrInvalidPolicy, r.Name, i)
		}
		for _, b := range r.By[:i] {
			if a == b {
				return fmt.Errorf("%w: rule %q names attribute %q twice in By", ErrInvalidPolicy, r.Name, a)
			}
		}
	}
	return nil
}

// TTL is how long after its newest entry a window of r can matter: the window
// plus the minimum gap. Stores expire idle keys after this long.
func (r *Rule) TTL() time.Duration { return r.Window + r.MinGap }
