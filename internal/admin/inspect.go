package admin

import (
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/edge"
	"github.com/sluicerate/sluice/internal/front"
	"github.com/sluicerate/sluice/internal/wire"
	"github.com/sluicerate/sluice/store"
)

// Inspector reads, changing nothing, what a store holds, for the key
// inspector: the entries of a policy's windows (a concurrency rule's: its
// live leases) and the reservations of a schedule's queue, with the
// store's time. sluice serve gives one for Redis (package redisinspect);
// without one the inspector shows a window's figures, from a peek, and no
// queue.
type Inspector interface {
	// Name names the store the view shows ("redis").
	Name() string

	// Windows reads the window of every check of req, in order.
	Windows(ctx context.Context, req *store.Request) ([]Window, time.Time, error)

	// Queue reads the reservations a schedule's queue holds, oldest slot
	// first.
	Queue(ctx context.Context, q store.Queue) ([]QueuedSlot, time.Time, error)
}

// Window is one window as an Inspector reads it.
type Window struct {
	// Key is the store's key of the window.
	Key string

	// Entries are the entries it holds, oldest first: those in the window
	// and, until the key expires, the newest one even after it left the
	// window (it enforces the rule's minimum gap).
	Entries []Entry

	// TTL is the key's remaining time to live; -1 for a key without one,
	// and 0 when the key does not exist.
	TTL time.Duration

	// Leases are, for a concurrency rule's window, the leases alive in it,
	// soonest to expire first (it has no Entries).
	Leases []Lease

	// Slices are, for a budgeted rule's window, the slices leased from it
	// that the store holds, by every process, earliest first.
	Slices []Slice
}

// Slice is a slice leased from a budgeted window: the units the store
// counts for it, and when it ends on the store's clock (a log's: the stamp
// of its entry, its end or when it was given back, which counts for a
// window after; a GCRA bucket's: the end of its hold).
type Slice struct {
	Units int64
	Ends  time.Time
}

// Entry is one entry of a window: when it was recorded, on the store's
// clock, and its cost.
type Entry struct {
	Time time.Time
	Cost int64
}

// Lease is one lease alive in a concurrency rule's window: the token that
// names it in the store (not its id) and when it expires unless released
// or extended, on the store's clock.
type Lease struct {
	Token   string
	Expires time.Time
}

// inspectRequest is the body of POST /api/v1/inspect: a policy or a
// schedule, and the attributes of the key to look at.
type inspectRequest struct {
	Policy     string            `json:"policy"`
	Schedule   string            `json:"schedule"`
	Attributes map[string]string `json:"attributes"`
}

const inspectExample = `{"policy":"notify","attributes":{"category":"errors"}}`

// inspectJSON is the answer of POST /api/v1/inspect.
type inspectJSON struct {
	// Now is the store's time the windows were read at (the server's when
	// the store shows no entries).
	Now      time.Time `json:"now"`
	Policy   string    `json:"policy,omitempty"`
	Schedule string    `json:"schedule,omitempty"`
	Store    string    `json:"store"`

	// Next is what a request of cost 1 would get now (a peek: nothing is
	// recorded). Error, when set, is the store's failure: Next is then the
	// failure policy's answer.
	Next  *wire.DecisionJSON `json:"next,omitempty"`
	Error string             `json:"error,omitempty"`

	// Windows are the policy's rules that apply to the attributes, in
	// order, with their entries when the store keeps a log to show
	// (Redis); EntriesShown says whether it does.
	Windows      []inspectWindowJSON `json:"windows,omitempty"`
	EntriesShown bool                `json:"entries_shown"`

	// Queue is a schedule's queue, when the store's can be read.
	Queue *queueJSON `json:"queue,omitempty"`
}

// inspectWindowJSON is one rule's window.
type inspectWindowJSON struct {
	Rule      string `json:"rule"`
	Key       string `json:"key,omitempty"`
	Algorithm string `json:"algorithm"`
	Limit     int64  `json:"limit"`
	WindowMS  int64  `json:"window_ms"`
	MinGapMS  int64  `json:"min_gap_ms"`
	Shadow    bool   `json:"shadow"`

	// Used, Remaining, RetryAfterMS and ResetAfterMS are the peek's
	// figures for this rule; Cause why a request of cost 1 would not fit.
	Used         int64  `json:"used"`
	Remaining    int64  `json:"remaining"`
	RetryAfterMS int64  `json:"retry_after_ms"`
	ResetAfterMS int64  `json:"reset_after_ms"`
	Cause        string `json:"cause,omitempty"`

	// GapLeftMS is, for a rule with a minimum gap, the time until the gap
	// since the newest entry has passed (0: it has).
	GapLeftMS int64 `json:"gap_left_ms"`

	// TTLMS is the key's time to live (-1 none, 0 no key).
	TTLMS   int64              `json:"ttl_ms"`
	Entries []inspectEntryJSON `json:"entries"`

	// Alive is, for a concurrency rule, its leases alive now, before the
	// peek's (Used counts the peek's lease too when the request would be
	// admitted, as every rule's figures count its cost). A concurrency
	// rule's Limit is its concurrency, WindowMS its lease time, and
	// RetryAfterMS, when it is full, the time until its earliest lease
	// expires. Absent for other rules.
	Alive *int64 `json:"alive,omitempty"`

	// Leases are, for a concurrency rule when the store shows them
	// (EntriesShown), the leases alive in its window, soonest to expire
	// first; absent for other rules.
	Leases []inspectLeaseJSON `json:"leases,omitzero"`

	// Slices are, for a budgeted rule, the slices leased from its window
	// that count now, earliest end first, and Sliced their units: those
	// of every process when the store shows them (EntriesShown), else
	// those this server holds (on the memory store, every slice there
	// is). Used counts them: the store's count is what was admitted plus
	// what is leased. Absent for other rules.
	Slices []inspectSliceJSON `json:"slices,omitzero"`
	Sliced *int64             `json:"sliced,omitempty"`
}

// inspectSliceJSON is one slice leased from a budgeted window: its units,
// and when it ends (a log's slice counts for a window after).
type inspectSliceJSON struct {
	Units    int64     `json:"units"`
	Ends     time.Time `json:"ends"`
	EndsInMS int64     `json:"ends_in_ms"` // negative once it ended
}

// inspectLeaseJSON is one lease alive in a concurrency rule's window.
type inspectLeaseJSON struct {
	Token       string    `json:"token"`
	Expires     time.Time `json:"expires"`
	ExpiresInMS int64     `json:"expires_in_ms"`
}

// inspectEntryJSON is one entry of a window.
type inspectEntryJSON struct {
	Time  time.Time `json:"time"`
	AgeMS int64     `json:"age_ms"`
	Cost  int64     `json:"cost"`

	// Counts reports whether the entry is inside the window now, and
	// LeavesInMS when it leaves it (0 when it has: it is kept for the
	// minimum gap).
	Counts     bool  `json:"counts"`
	LeavesInMS int64 `json:"leaves_in_ms"`
}

func (a *admin) handleInspect(w http.ResponseWriter, r *http.Request) {
	req, p := wire.ReadJSON[inspectRequest](w, r, a.f.MaxBody, inspectExample)
	if p == nil {
		var out inspectJSON
		if out, p = a.inspect(r.Context(), a.f.State(), &req); p == nil {
			front.WriteJSON(w, out)
			return
		}
	}
	p.Write(w)
}

// inspect answers req under st.
func (a *admin) inspect(ctx context.Context, st *front.State, req *inspectRequest) (inspectJSON, *httplimit.Problem) {
	switch {
	case req.Policy != "" && req.Schedule != "":
		return inspectJSON{}, front.BadRequest("bad_request", "name a policy or a schedule, not both; send an object such as %s", inspectExample)
	case req.Schedule != "":
		return a.inspectSchedule(ctx, st, req)
	case req.Policy == "":
		return inspectJSON{}, front.BadRequest("bad_request", "the request names no policy or schedule; send an object such as %s", inspectExample)
	}
	p := st.Config.Policy(req.Policy)
	if p == nil {
		names := make([]string, len(st.Config.Policies))
		for i := range st.Config.Policies {
			names[i] = st.Config.Policies[i].Name
		}
		return inspectJSON{}, front.BadRequest("unknown_policy", "%v: %q; the configured policies are %q", edge.ErrUnknownPolicy, req.Policy, names)
	}
	resolved, err := st.Limiter.Resolve(p, req.Attributes, 1)
	if err != nil {
		if pr := front.InputProblem(err); pr != nil {
			return inspectJSON{}, pr
		}
		return inspectJSON{}, front.BadRequest("bad_request", "%v", err)
	}
	out := inspectJSON{Policy: p.Name, Store: a.storeKind(), Now: a.v.clock.Now().UTC(), Windows: []inspectWindowJSON{}}
	// The store's figures, not the deny cache's: a cached denial keeps the
	// figures the store gave when it denied, and the inspector shows the
	// windows as the store holds them now.
	storeOnly := *p
	storeOnly.CacheDenials = false
	d, err := st.Limiter.Peek(ctx, &storeOnly, req.Attributes, 1)
	if err != nil {
		if pr := front.InputProblem(err); pr != nil {
			return inspectJSON{}, pr
		}
		out.Error = err.Error()
	}
	next := wire.NewDecisionJSON(&d)
	out.Next = &next
	var windows []Window
	if a.insp != nil && out.Error == "" {
		var now time.Time
		if windows, now, err = a.insp.Windows(ctx, resolved); err != nil {
			out.Error = "reading the windows: " + err.Error()
			windows = nil
		} else {
			out.Now, out.EntriesShown = now.UTC(), true
		}
	}
	counted := out.Error == "" && peekCounted(resolved, &d)
	var held []sluice.SliceStatus
	if windows == nil {
		held = st.Limiter.Slices()
	}
	for i := range resolved.Checks {
		c := &resolved.Checks[i]
		var win *Window
		if i < len(windows) {
			win = &windows[i]
		}
		wj := windowJSON(c, &d, counted, win, out.Now)
		if c.Budget > 0 && (win == nil || c.Algorithm != store.SlidingCounter) { // a counter's slices are cost in its bucket
			wj.slices(c, p.Name, win, held, out.Now)
		}
		out.Windows = append(out.Windows, wj)
	}
	return out, nil
}

// slices sets the slices of wj, budgeted check c's window of policy, that
// count at now: win's when the store showed it, else those of held (this
// server's) leased from it.
func (wj *inspectWindowJSON) slices(c *store.Check, policy string, win *Window, held []sluice.SliceStatus, now time.Time) {
	var list []Slice
	if win != nil {
		list = win.Slices
	} else {
		for _, s := range held {
			if s.Policy == policy && s.Rule == c.Rule && slices.Equal(s.Values, c.Values) {
				list = append(list, Slice{Units: s.Granted, Ends: now.Add(s.Left)})
			}
		}
		slices.SortFunc(list, func(a, b Slice) int { return a.Ends.Compare(b.Ends) })
	}
	wj.Slices, wj.Sliced = []inspectSliceJSON{}, new(int64)
	for _, s := range list {
		left := s.Ends.Sub(now)
		if c.Algorithm == store.Log && left <= -c.Window || c.Algorithm != store.Log && left <= 0 {
			continue // left the window, or its hold ended: the store no longer counts it
		}
		wj.Slices = append(wj.Slices, inspectSliceJSON{Units: s.Units, Ends: s.Ends.UTC(), EndsInMS: left.Milliseconds()})
		*wj.Sliced += s.Units
	}
}

// peekCounted reports whether the figures of d, a peek of req, count the
// request it would admit (a dry run's do, store.Request.DryRun, and a
// concurrency rule's its lease): when every rule that is not shadow fits.
func peekCounted(req *store.Request, d *sluice.Decision) bool {
	for _, c := range req.Checks {
		for _, l := range d.Limits() {
			if l.Rule == c.Rule && l.Cause != "" && !c.Shadow {
				return false
			}
		}
	}
	return len(d.Limits()) > 0
}

// windowJSON is the window of check c: the figures the peek d gave it
// (counted: they count the peeked request), and when the store showed it
// (win not nil), its entries or leases at the store's time now.
func windowJSON(c *store.Check, d *sluice.Decision, counted bool, win *Window, now time.Time) inspectWindowJSON {
	wj := inspectWindowJSON{Rule: c.Rule, Algorithm: c.Algorithm.String(), Limit: c.Limit, WindowMS: wire.Millis(c.Window),
		MinGapMS: wire.Millis(c.MinGap), Shadow: c.Shadow, Entries: []inspectEntryJSON{}}
	for _, l := range d.Limits() {
		if l.Rule == c.Rule {
			wj.Used, wj.Remaining, wj.RetryAfterMS, wj.ResetAfterMS = l.Used, l.Remaining, wire.Millis(l.RetryAfter), wire.Millis(l.ResetAfter)
			wj.Cause = string(l.Cause)
			if c.Algorithm == store.Concurrency {
				alive := l.Used
				if counted {
					alive -= c.Cost
				}
				wj.Alive = &alive
			}
		}
	}
	if win == nil {
		return wj
	}
	wj.Key, wj.TTLMS = win.Key, win.TTL.Milliseconds()
	if win.TTL < 0 {
		wj.TTLMS = -1
	}
	for _, e := range win.Entries {
		age := now.Sub(e.Time)
		wj.Entries = append(wj.Entries, inspectEntryJSON{Time: e.Time.UTC(), AgeMS: age.Milliseconds(), Cost: e.Cost,
			Counts: age < c.Window, LeavesInMS: wire.Millis(c.Window - age)})
	}
	if n := len(win.Entries); n > 0 && c.MinGap > 0 {
		wj.GapLeftMS = wire.Millis(c.MinGap - now.Sub(win.Entries[n-1].Time))
	}
	if c.Algorithm == store.Concurrency {
		wj.Leases = []inspectLeaseJSON{}
	}
	for _, l := range win.Leases {
		wj.Leases = append(wj.Leases, inspectLeaseJSON{Token: l.Token, Expires: l.Expires.UTC(), ExpiresInMS: wire.Millis(l.Expires.Sub(now))})
	}
	return wj
}
