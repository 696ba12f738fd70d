package sluice

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluicerate/sluice/store"
)

// Rule is one sliding-window limit: at most Limit units of cost in any window
// of length Window, optionally with at least MinGap between admitted events.
//
// A rule with no By attributes is one window shared by every request of its
// policy (a global cap). A rule with By attributes keeps one window per
// distinct combination of those attributes' values (per user, per category).
//
// A rule may apply to some requests only: when Optional, to those that carry
// every By attribute; with Unless, to those that carry none of its
// attributes; with Match, to those whose attribute values match. Overrides
// give matching values a limit of their own. A request no rule applies to
// is admitted with no limit.
//
// Windows are half-open: at time T a window covers (T-Window, T], so an event
// recorded exactly Window ago no longer counts. Stores work in whole
// microseconds; durations are truncated to microseconds.
type Rule struct {
	// Name identifies the rule within its policy; it appears in
	// Decision.DeniedBy and in store keys. Required.
	Name string

	// Limit is the most cost admitted in any window (in each period, for
	// a calendar quota; the balance a key starts with, for a Credits
	// rule). A Limit of 0 admits nothing: the rule blocks every request
	// it applies to (a Credits rule's, until credits are added).
	Limit int64

	// Window is the length of the sliding window. Required, >= 1µs,
	// except for a calendar quota (Period) and a Credits rule, which take
	// none.
	Window time.Duration

	// MinGap, when > 0, is the least time between two admitted events of
	// this rule's window. Zero means no gap is enforced. The Log algorithm
	// only.
	MinGap time.Duration

	// Algorithm is how the window counts: Log (the default) keeps every
	// event, exact, a few bytes each; GCRA and SlidingCounter keep a
	// constant few bytes per key, GCRA exact for its own definition of a
	// token bucket, SlidingCounter an estimate. See Algorithm.
	Algorithm Algorithm

	// Burst is, for GCRA, the most cost admitted at once: the bucket's
	// size, refilled at Limit per Window. Default Limit. Other algorithms
	// take none.
	Burst int64

	// By names the request attributes that select this rule's window, in
	// order. Empty means one shared window.
	By []string

	// Optional makes the rule apply only to requests that carry every By
	// attribute; it skips the others instead of failing them with
	// ErrMissingAttribute. Per user when the user is known, say, beside a
	// per-IP rule with Unless: [user] for the others.
	Optional bool

	// Unless makes the rule apply only to requests that carry none of
	// these attributes.
	Unless []string

	// Match makes the rule apply only to requests whose attributes match:
	// each key is an attribute, each value a pattern, either the value
	// itself, or a prefix followed by '*' ("/api/*"); "*" matches any value.
	// A request without the attribute does not match.
	Match map[string]string

	// Overrides give requests whose attributes match a limit of their own
	// (plan=free 100 a minute, plan=paid 1000): the first override that
	// matches sets the rule's Limit, or makes the request Unlimited for this
	// rule (it is neither checked nor recorded there).
	Overrides []Override

	// Shadow makes the rule decide and report without denying: a request
	// it would deny is admitted when the other rules allow it, reported with
	// Decision.Shadowed, and recorded here too. Use it to roll out a rule.
	Shadow bool

	// Spread, when more than 1, keeps each of the rule's windows as Spread
	// sub-windows whose keys fall in different Redis Cluster slots, each
	// with an equal share of Limit (and of a GCRA Burst): the one key of a
	// tenant that takes all the traffic becomes Spread keys on several
	// shards. A request goes to the sub-window its SpreadBy value hashes to
	// (a random one when SpreadBy is empty or absent) and, when that one has
	// no room, on to the next, so it is denied only when none has room.
	// The decision reports the sub-window that decided: its share as
	// LimitStatus.Limit. At most 64; each share at least 1; not with MinGap
	// (a gap per sub-window is no gap per tenant); Penalize policies record
	// a denied attempt in one sub-window. See docs/design.md, "Hot keys".
	Spread int

	// SpreadBy names the attribute whose value picks a request's first
	// sub-window (a client id, say, so that one client's requests go to
	// one shard). Optional; Spread rules only.
	SpreadBy string

	// Concurrency, when above 0, makes the rule a concurrency rule: at
	// most Concurrency leases (Limiter.Acquire) of its key alive at once,
	// instead of a limit of cost over a window. A lease takes one slot
	// whatever its cost, and frees it when released, settled, or Lease
	// after it was taken (or last extended), so that a holder that dies
	// does not hold its slot for ever. A concurrency rule has no Limit,
	// Window, MinGap, Algorithm, Burst or Spread; its Overrides' Limit is
	// the number of leases. Only Acquire takes a slot: AllowN and Record
	// on a policy with a concurrency rule that applies are errors, and
	// Peek reports whether a lease would be granted.
	Concurrency int64

	// Lease is how long a lease of a concurrency rule lives unless
	// released or extended. Required with Concurrency, at least 1ms; the
	// concurrency rules of one policy share one Lease.
	Lease time.Duration

	// Budget, when above 0, lets each Limiter lease slices of the rule's
	// capacity from the store and admit from them in memory: the longest
	// it holds a slice before it renews it or gives it back (see
	// docs/budgets.md). What is leased is counted in the store at once, so
	// the rule never admits more than its limit; the price is bounded
	// under-admission. At least MinBudget and at most MaxBudget of the
	// rule's figures; not with MinGap, Spread, Shadow, a concurrency rule,
	// or in a Penalize policy. Beside a calendar quota or a credits rule,
	// a budgeted rule is decided per request, as on a store that leases
	// no slices.
	Budget time.Duration

	// Period, when set (Day, Week, Month or Year), makes the rule a
	// calendar quota: at most Limit in each calendar period in Location,
	// the count starting from 0 at each period's local start, daylight
	// saving changes and month lengths included ("100,000 requests a
	// month, renewed on the 1st"). A denial's RetryAfter is the time to
	// the next period. Not with Window, MinGap, Algorithm, Burst, Spread,
	// Budget or Concurrency. See docs/quotas.md.
	Period Period

	// Location is the time zone of Period and of Refill.Every; nil is UTC.
	Location *time.Location

	// WeekStart is the day a Week period starts on; Sunday (0) by default.
	WeekStart time.Weekday

	// History, for a calendar quota, keeps the totals of this many periods
	// before the current one per key, for Limiter.Usage: a customer's
	// dashboard or a billing export. At most MaxHistory.
	History int

	// Refill, for a Credits rule (Algorithm Credits, Limit the balance a
	// key starts with), renews the balance at each period of Refill.Every:
	// to Refill.To, or by Refill.Add (a rollover plan). A Credits rule
	// without it keeps its balance until AddCredits or SetCredits changes
	// it.
	Refill Refill

	// Covers, for a Credits rule, names a calendar quota of the policy
	// whose overage the credits pay for ("100,000 a month, then credits"):
	// the balance is drawn only by requests that quota has no room for,
	// which it then admits (counting them past its Limit), and a request
	// neither has room for is denied with CauseCredits. The quota comes
	// before the credits rule in the policy and has the same By; a
	// request the quota does not apply to (its conditions, an unlimited
	// override) is not checked against the credits either. Empty: every
	// request draws the balance.
	Covers string
}

// MinBudget is the shortest Rule.Budget.
const MinBudget = time.Millisecond

// MinLease is the shortest Rule.Lease.
const MinLease = time.Millisecond

// concurrent reports whether r is a concurrency rule.
func (r *Rule) concurrent() bool { return r.Concurrency > 0 }

// maxSpread is the most sub-windows a rule may spread a window over.
const maxSpread = 64

// Override gives some of a rule's windows figures of their own. It comes
// from one of two places, with one meaning: a rule's Overrides, for the
// requests whose attributes match (Match, with Limit or Unlimited), part of
// the policy; or the Limiter's Overrides (Config.Overrides), for one window
// at runtime (Limit, and Window, Burst or MinGap when above 0), which an
// operator changes while the Limiter runs. See Overrides for the
// precedence.
type Override struct {
	// Match holds attribute patterns, as Rule.Match; every one must match.
	// At least one in a rule's Overrides; a runtime override is for the
	// window it was given for, and its Match is not read.
	Match map[string]string

	// Limit replaces the rule's limit (0 blocks).
	Limit int64

	// Unlimited exempts the matching requests from the rule instead. Only
	// in a rule's Overrides.
	Unlimited bool

	// Window replaces the rule's window when above 0. Only at runtime.
	Window time.Duration

	// Burst replaces a GCRA rule's burst when above 0; otherwise the
	// rule's Burst applies, or Limit when the rule sets none. Only at
	// runtime.
	Burst int64

	// MinGap replaces a log rule's minimum gap when above 0. Only at
	// runtime.
	MinGap time.Duration
}

// validate reports why r cannot be enforced, or nil.
func (r *Rule) validate() error {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w: rule %q: %s", ErrInvalidPolicy, r.Name, fmt.Sprintf(format, args...))
	}
	if r.Name == "" {
		return fmt.Errorf("%w: a rule has no name; give every rule a name such as \"global\" or \"per-user\"", ErrInvalidPolicy)
	}
	if r.quota() {
		if err := r.validateQuota(); err != nil {
			return invalid("%v", err)
		}
		return r.validateConditions(invalid)
	}
	if err := r.validateNotQuota(); err != nil {
		return invalid("%v", err)
	}
	if r.Concurrency != 0 || r.Lease != 0 {
		if err := r.validateConcurrency(); err != nil {
			return invalid("%v", err)
		}
		return r.validateConditions(invalid)
	}
	switch {
	case r.Limit < 0:
		return invalid("limit %d is negative; use 0 to block, or a positive limit", r.Limit)
	case r.Limit > MaxCost:
		return invalid("limit %d is more than 2^53 (%d), the most sluice counts", r.Limit, int64(MaxCost))
	case r.Window < time.Microsecond:
		return fmt.Errorf("%w: rule %q has window %v; a window must be at least 1µs", ErrInvalidPolicy, r.Name, r.Window)
	case r.MinGap < 0:
		return fmt.Errorf("%w: rule %q has negative min gap %v", ErrInvalidPolicy, r.Name, r.MinGap)
	case r.Algorithm > SlidingCounter:
		return invalid("unknown algorithm %v", r.Algorithm)
	case r.MinGap > 0 && r.Algorithm != Log:
		return invalid("a min gap needs the log algorithm (the %v keeps no event's time); with gcra, a burst of 1 spaces events by window/limit", r.Algorithm)
	case r.Burst != 0 && r.Algorithm != GCRA:
		return invalid("a burst is gcra's; the %v takes none", r.Algorithm)
	case r.Burst < 0 || r.Burst > MaxCost:
		return invalid("burst %d; leave it out for the limit, or give 1 to 2^53", r.Burst)
	case r.Algorithm == GCRA && r.Limit > 0 && r.Window/time.Microsecond < time.Duration(r.Limit):
		return invalid("%d per %v is more than one event per µs, what gcra's interval can hold", r.Limit, r.Window)
	case r.Algorithm == GCRA && !gcraSpans(r.Limit, r.burst(r.Limit), r.Window):
		return invalid("a burst of %d at %d per %v takes more than 2^50µs (about 35 years) to refill; give a smaller burst or a shorter window", r.burst(r.Limit), r.Limit, r.Window)
	case r.Spread < 0 || r.Spread > maxSpread:
		return invalid("spread %d; spread a window over 2 to %d sub-windows, or leave it out", r.Spread, maxSpread)
	case r.Spread > 1 && r.MinGap > 0:
		return invalid("a min gap cannot be spread: each sub-window would keep a gap of its own; leave spread out")
	case r.Spread > 1 && r.Limit > 0 && r.Limit < int64(r.Spread):
		return invalid("limit %d spread over %d sub-windows leaves some with none; spread over at most %d", r.Limit, r.Spread, r.Limit)
	case r.Spread > 1 && r.Algorithm == GCRA && r.Burst > 0 && r.Burst < int64(r.Spread):
		return invalid("burst %d spread over %d sub-windows leaves some with none; spread over at most %d", r.Burst, r.Spread, r.Burst)
	case r.SpreadBy != "" && r.Spread < 2:
		return invalid("spread_by %q without a spread of 2 or more", r.SpreadBy)
	}
	if r.Budget != 0 {
		if err := r.validateBudget(); err != nil {
			return invalid("%v", err)
		}
	}
	return r.validateConditions(invalid)
}

// validateConcurrency reports why a rule with a Concurrency or a Lease is
// not a valid concurrency rule, or nil.
func (r *Rule) validateConcurrency() error {
	switch {
	case r.Concurrency < 0:
		return fmt.Errorf("concurrency %d is negative; give the most leases alive at once, at least 1", r.Concurrency)
	case r.Concurrency == 0:
		return fmt.Errorf("a lease of %v without a concurrency; give concurrency: N, the most leases alive at once", r.Lease)
	case r.Lease == 0:
		return fmt.Errorf("concurrency %d without a lease; give lease: D, how long a lease lives unless released (such as 30s)", r.Concurrency)
	case r.Lease < MinLease:
		return fmt.Errorf("lease %v is shorter than %v", r.Lease, MinLease)
	case r.Limit != 0 || r.Window != 0:
		return fmt.Errorf("a concurrency rule counts leases alive, not cost over a window: it takes no limit or window; put the rate in a rule of its own beside it")
	case r.MinGap != 0 || r.Algorithm != Log || r.Burst != 0:
		return fmt.Errorf("a concurrency rule takes no min gap, algorithm or burst")
	case r.Spread != 0 || r.SpreadBy != "":
		return fmt.Errorf("a concurrency rule cannot be spread")
	case r.Budget != 0:
		return fmt.Errorf("a concurrency rule cannot be budgeted: a slot is held by one lease, not shared out in slices; leave budget out")
	}
	return nil
}

// validateConditions reports why r's attributes, conditions or overrides
// cannot hold, or nil.
func (r *Rule) validateConditions(invalid func(format string, args ...any) error) error {
	if err := checkNames("By", r.By); err != nil {
		return invalid("%v", err)
	}
	if err := checkNames("Unless", r.Unless); err != nil {
		return invalid("%v", err)
	}
	for _, a := range r.Unless {
		if slices.Contains(r.By, a) {
			return invalid("it is keyed by %q and applies unless %q is present: it would never apply", a, a)
		}
	}
	if err := checkPatterns(r.Match); err != nil {
		return invalid("match: %v", err)
	}
	for i, o := range r.Overrides {
		switch {
		case len(o.Match) == 0:
			return invalid("override %d has no match; an override applies to the requests its match selects", i+1)
		case o.Limit < 0:
			return invalid("override %d has limit %d; use 0 to block, or a positive limit", i+1, o.Limit)
		case o.Unlimited && o.Limit != 0:
			return invalid("override %d is unlimited and has limit %d; keep one", i+1, o.Limit)
		case o.Window != 0 || o.Burst != 0 || o.MinGap != 0:
			return invalid("override %d sets a window, burst or min gap, which only a runtime override (Config.Overrides) may; give a rule of its own other figures", i+1)
		}
		if err := checkPatterns(o.Match); err != nil {
			return invalid("override %d: %v", i+1, err)
		}
	}
	return nil
}

// checkNames reports an empty or repeated attribute name in the list field.
func checkNames(field string, names []string) error {
	for i, a := range names {
		if a == "" {
			return fmt.Errorf("an empty attribute name in %s[%d]", field, i)
		}
		if slices.Contains(names[:i], a) {
			return fmt.Errorf("%s names attribute %q twice", field, a)
		}
	}
	return nil
}

// checkPatterns reports a pattern with a '*' elsewhere than at its end, or
// an empty attribute name.
func checkPatterns(match map[string]string) error {
	for a, p := range match {
		if a == "" {
			return fmt.Errorf("an empty attribute name")
		}
		if i := strings.IndexByte(p, '*'); i >= 0 && i != len(p)-1 {
			return fmt.Errorf("pattern %q for %q has a '*' before its end; a pattern is a value, or a prefix followed by '*'", p, a)
		}
	}
	return nil
}

// matches reports whether attrs carries every attribute of match with a
// value its pattern matches.
func matches(match map[string]string, attrs map[string]string) bool {
	for a, p := range match {
		v, ok := attrs[a]
		if !ok {
			return false
		}
		if prefix, wild := strings.CutSuffix(p, "*"); wild {
			if !strings.HasPrefix(v, prefix) {
				return false
			}
		} else if v != p {
			return false
		}
	}
	return true
}

// applies reports whether r applies to a request with attrs: its Optional,
// Unless and Match conditions hold. A required By attribute that is missing
// does not make r not apply: the request is then bad input.
func (r *Rule) applies(attrs map[string]string) bool {
	if r.Optional {
		for _, a := range r.By {
			if _, ok := attrs[a]; !ok {
				return false
			}
		}
	}
	for _, a := range r.Unless {
		if _, ok := attrs[a]; ok {
			return false
		}
	}
	return matches(r.Match, attrs)
}

// limitFor returns r's limit for attrs, after the first override that
// matches, and whether that override makes the request unlimited.
func (r *Rule) limitFor(attrs map[string]string) (limit int64, unlimited bool) {
	for i := range r.Overrides {
		if o := &r.Overrides[i]; matches(o.Match, attrs) {
			return o.Limit, o.Unlimited
		}
	}
	if r.concurrent() {
		return r.Concurrency, false
	}
	return r.Limit, false
}

// conditional reports whether r applies to some requests only, or has
// overrides: what a decision must evaluate per request.
func (r *Rule) conditional() bool {
	return r.Optional || len(r.Unless) > 0 || len(r.Match) > 0 || len(r.Overrides) > 0
}

// Algorithm is how a rule's window counts; see the constants.
type Algorithm = store.Algorithm

// The algorithms a Rule may use.
const (
	// Log keeps every event of the window: exact, one small entry per
	// event. The default.
	Log = store.Log

	// GCRA is a token bucket of Burst units refilled at Limit per Window,
	// kept as one time per key: constant memory, exact for its own
	// definition (a request of cost c is admitted when the bucket holds c).
	GCRA = store.GCRA

	// SlidingCounter estimates the sliding window's count from two fixed
	// windows' counts, weighting the previous one by the part of it the
	// sliding window still covers: constant memory; in the worst case (the
	// previous window's events all at its end) it admits up to twice Limit
	// in one window.
	SlidingCounter = store.SlidingCounter

	// Credits keeps a balance per key that requests draw down by their
	// cost: a request fits when the balance is at least its cost (Cause
	// CauseCredits otherwise). Limit is the balance a key starts with;
	// the balance changes only by requests, settles, Refill, and
	// Limiter.AddCredits and SetCredits. Window is not used.
	Credits = store.Credits
)

// ParseAlgorithm returns the algorithm named s: "log" (or ""), "gcra" or
// "sliding-counter".
func ParseAlgorithm(s string) (Algorithm, error) {
	for _, a := range []Algorithm{Log, GCRA, SlidingCounter} {
		if s == a.String() {
			return a, nil
		}
	}
	if s == "" {
		return Log, nil
	}
	return Log, fmt.Errorf("%w: unknown algorithm %q; use log, gcra or sliding-counter", ErrInvalidPolicy, s)
}

// burst returns the cost a GCRA rule admits at once for limit: its Burst,
// or limit.
func (r *Rule) burst(limit int64) int64 {
	if r.Burst > 0 {
		return r.Burst
	}
	return limit
}
