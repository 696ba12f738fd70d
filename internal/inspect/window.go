package inspect

import (
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/wire"
	"github.com/sluicerate/sluice/store"
)

// Report is what the inspector shows of a policy's windows or a
// schedule's queue: `sluice inspect --json` prints it and POST
// /api/v1/inspect answers it.
type Report struct {
	// Now is the store's time the windows were read at (the caller's when
	// the store shows none).
	Now      time.Time `json:"now"`
	Policy   string    `json:"policy,omitempty"`
	Schedule string    `json:"schedule,omitempty"`
	Store    string    `json:"store"`

	// Next is, when the policy's rules are known, what a request of cost 1
	// would get now (a peek: nothing is recorded). Error, when set, is the
	// store's failure: Next is then the failure policy's answer.
	Next  *wire.DecisionJSON `json:"next,omitempty"`
	Error string             `json:"error,omitempty"`

	// Windows are the windows of the policy's rules that apply to the
	// attributes, in order (without the rules: those the store holds,
	// by key), with their entries when the store shows them;
	// EntriesShown says whether it does.
	Windows      []Window `json:"windows,omitzero"`
	EntriesShown bool     `json:"entries_shown"`

	// Queue is a schedule's queue, when the store's can be read.
	Queue *Queue `json:"queue,omitempty"`
}

// Window is one rule's window. The rule's definition (Limit, WindowMS,
// MinGapMS, Shadow), the peek's figures (Used, Remaining, RetryAfterMS,
// ResetAfterMS, Cause) and what is computed from them are known only when
// the rule is (sluice inspect without --config finds the windows by their
// keys, and shows those as zero or absent); Key, TTLMS and the lists only
// when the store shows its windows.
type Window struct {
	Rule      string `json:"rule"`
	Key       string `json:"key,omitempty"`
	Algorithm string `json:"algorithm"`

	// Limit is the rule's limit and WindowMS its window; for a concurrency
	// rule, its most leases alive at once and its lease time, which
	// LeaseMS repeats (absent for other rules).
	Limit    int64 `json:"limit"`
	WindowMS int64 `json:"window_ms"`
	LeaseMS  int64 `json:"lease_ms,omitempty"`
	MinGapMS int64 `json:"min_gap_ms"`
	Shadow   bool  `json:"shadow"`

	// Used, Remaining, RetryAfterMS and ResetAfterMS are the peek's
	// figures for this rule, which count the peeked request when it would
	// be admitted; Cause is why a request of cost 1 would not fit.
	Used         int64  `json:"used"`
	Remaining    int64  `json:"remaining"`
	RetryAfterMS int64  `json:"retry_after_ms"`
	ResetAfterMS int64  `json:"reset_after_ms"`
	Cause        string `json:"cause,omitempty"`

	// GapLeftMS is, for a rule with a minimum gap, the time until the gap
	// since the newest entry has passed (0: it has).
	GapLeftMS int64 `json:"gap_left_ms"`

	// TTLMS is the key's time to live (-1 none, 0 no key).
	TTLMS   int64   `json:"ttl_ms"`
	Entries []Entry `json:"entries"`

	// State is, for a GCRA bucket, its theoretical arrival time (µs since
	// the Unix epoch: when the bucket is full again), and for a sliding
	// counter its bucket index and the previous and current buckets'
	// counts; absent for a log.
	State []int64 `json:"state,omitempty"`

	// Counted is what the store holds in the window now, before the peek:
	// a log's entries inside it and the units of the slices leased from it
	// that count, or a concurrency rule's leases alive. Absent without the
	// rule, or the store's windows, and for a bucket or counter (State).
	Counted *int64 `json:"counted,omitempty"`

	// Alive is, for a concurrency rule, its leases alive now by the peek,
	// before the peek's own lease (which Used counts when the request would
	// be admitted). Absent for other rules.
	Alive *int64 `json:"alive,omitempty"`

	// Leases are, for a concurrency rule when the store shows them, the
	// leases alive in its window, soonest to expire first; absent for
	// other rules.
	Leases []Lease `json:"leases,omitzero"`

	// Slices are, for a budgeted rule, the slices leased from its window,
	// earliest end first, and Sliced the units of those that count: those
	// of every process when the store shows them, else those this server
	// holds (on the memory store, every slice there is). With the rule
	// only the slices that count now are listed (Used counts them: the
	// store's count is what was admitted plus what is leased); without
	// it, every slice the store holds. SlicesKey is their key.
	SlicesKey string  `json:"slices_key,omitempty"`
	Slices    []Slice `json:"slices,omitzero"`
	Sliced    *int64  `json:"sliced,omitempty"`
}

// Entry is one entry of a window.
type Entry struct {
	Time  time.Time `json:"time"`
	AgeMS int64     `json:"age_ms"`
	Cost  int64     `json:"cost"`

	// Counts reports whether the entry is inside the window now, and
	// LeavesInMS when it leaves it (0 when it has: it is kept for the
	// minimum gap); both absent when the rule is not known.
	Counts     *bool  `json:"counts,omitempty"`
	LeavesInMS *int64 `json:"leaves_in_ms,omitempty"`
}

// Lease is one lease alive in a concurrency rule's window: the token that
// names it in the store (not its id) and when it expires unless released
// or extended.
type Lease struct {
	Token       string    `json:"token"`
	Expires     time.Time `json:"expires"`
	ExpiresInMS int64     `json:"expires_in_ms"`
}

// Slice is one slice leased from a budgeted window: its units and when it
// ends (a log's slice counts for a window after its end).
type Slice struct {
	Units    int64     `json:"units"`
	Ends     time.Time `json:"ends"`
	EndsInMS int64     `json:"ends_in_ms"` // negative once it ended

	// Counts reports whether the store counts it now; absent when the rule
	// is not known.
	Counts *bool `json:"counts,omitempty"`
}

// rule is what is known of a window's rule: the check it resolves to,
// the peek's status of it, and whether the peek's figures count the
// request it would admit.
type rule struct {
	check   *store.Check
	status  *sluice.LimitStatus
	counted bool
}

// newWindow computes the window of r (r.check nil: a window found without
// its rule) at now: from sw, the window as the store holds it (nil when
// the store shows none), and slices, those leased from it (sw's, or this
// server's when the store shows none).
func newWindow(r rule, sw *StoredWindow, slices []StoredSlice, now time.Time) Window {
	w := Window{Entries: []Entry{}}
	alg := store.Log
	if c := r.check; c != nil {
		alg = c.Algorithm
		w.Rule, w.Limit, w.WindowMS, w.MinGapMS, w.Shadow = c.Rule, c.Limit, wire.Millis(c.Window), wire.Millis(c.MinGap), c.Shadow
	} else if sw != nil {
		alg, w.Rule = sw.Algorithm, sw.Rule
	}
	w.Algorithm = alg.String()
	if alg == store.Concurrency {
		w.LeaseMS = w.WindowMS
	}
	if l := r.status; l != nil {
		w.Used, w.Remaining, w.RetryAfterMS, w.ResetAfterMS = l.Used, l.Remaining, wire.Millis(l.RetryAfter), wire.Millis(l.ResetAfter)
		w.Cause = string(l.Cause)
		if alg == store.Concurrency {
			alive := l.Used
			if r.counted {
				alive -= r.check.Cost
			}
			w.Alive = &alive
		}
	}
	if sw != nil {
		w.stored(r.check, sw, now)
	}
	if c := r.check; c == nil && len(slices) > 0 || c != nil && c.Budget > 0 && (sw == nil || c.Algorithm != store.SlidingCounter) {
		w.slices(r.check, slices, now) // a counter's slices are cost in its bucket
	}
	if w.Counted != nil && w.Sliced != nil && alg == store.Log {
		*w.Counted += *w.Sliced
	}
	return w
}

// stored sets what w shows of sw, the window of check c (nil: not known)
// as the store holds it at now.
func (w *Window) stored(c *store.Check, sw *StoredWindow, now time.Time) {
	w.Key, w.TTLMS, w.State, w.SlicesKey = sw.Key, sw.TTL.Milliseconds(), sw.State, sw.SlicesKey
	if sw.TTL < 0 {
		w.TTLMS = -1
	}
	var counted int64
	for _, e := range sw.Entries {
		age := now.Sub(e.Time)
		ej := Entry{Time: e.Time.UTC(), AgeMS: age.Milliseconds(), Cost: e.Cost}
		if c != nil {
			counts, leaves := age < c.Window, wire.Millis(c.Window-age)
			ej.Counts, ej.LeavesInMS = &counts, &leaves
			if counts {
				counted += e.Cost
			}
		}
		w.Entries = append(w.Entries, ej)
	}
	if n := len(sw.Entries); c != nil && n > 0 && c.MinGap > 0 {
		w.GapLeftMS = wire.Millis(c.MinGap - now.Sub(sw.Entries[n-1].Time))
	}
	if w.Algorithm == store.Concurrency.String() {
		w.Leases = []Lease{}
		counted = int64(len(sw.Leases))
	}
	for _, l := range sw.Leases {
		w.Leases = append(w.Leases, Lease{Token: l.Token, Expires: l.Expires.UTC(), ExpiresInMS: wire.Millis(l.Expires.Sub(now))})
	}
	if c != nil && len(sw.State) == 0 {
		w.Counted = &counted // a bucket or a counter has no entries to count
	}
}

// slices sets the slices of w, the window of budgeted check c (nil: not
// known), from list at now: with c, those the store counts now (a log's
// until it leaves the window, a bucket's until its hold ends) and Sliced
// their units; without, every one.
func (w *Window) slices(c *store.Check, list []StoredSlice, now time.Time) {
	if c != nil {
		w.Slices, w.Sliced = []Slice{}, new(int64)
	}
	for _, s := range list {
		left := s.Ends.Sub(now)
		sj := Slice{Units: s.Units, Ends: s.Ends.UTC(), EndsInMS: left.Milliseconds()}
		if c != nil {
			if c.Algorithm == store.Log && left <= -c.Window || c.Algorithm != store.Log && left <= 0 {
				continue // left the window, or its hold ended: the store no longer counts it
			}
			counts := true
			sj.Counts = &counts
			*w.Sliced += s.Units
		}
		w.Slices = append(w.Slices, sj)
	}
}
