package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/internal/edge"
	"github.com/sluicerate/sluice/internal/resolve"
	"github.com/sluicerate/sluice/internal/wire"
	"github.com/sluicerate/sluice/redisstore"
	storepkg "github.com/sluicerate/sluice/store"
)

// inspectOutput is what `sluice inspect --json` prints.
type inspectOutput struct {
	Policy  string          `json:"policy"`
	Store   string          `json:"store"`
	Now     time.Time       `json:"now"`
	Windows []inspectWindow `json:"windows"`

	// Next is, with --config, what a request of cost 1 would get now:
	// the decision of a peek (nothing recorded).
	Next *nextJSON `json:"next,omitempty"`
}

// nextJSON is the part of a peek's decision inspect shows.
type nextJSON struct {
	Allowed      bool   `json:"allowed"`
	DeniedBy     string `json:"denied_by"`
	Cause        string `json:"cause"`
	RetryAfterMS int64  `json:"retry_after_ms"`
}

// inspectWindow is one rule's window. Limit, WindowMS, LeaseMS, Used and
// Counts are known only with --config, which gives the rules.
type inspectWindow struct {
	Rule     string         `json:"rule"`
	Key      string         `json:"key"`
	Limit    int64          `json:"limit,omitempty"` // a concurrency rule's: the most leases alive at once
	WindowMS int64          `json:"window_ms,omitempty"`
	LeaseMS  int64          `json:"lease_ms,omitempty"` // a concurrency rule's lease time
	Used     *int64         `json:"used,omitempty"`     // a concurrency rule's: its leases alive
	Cause    string         `json:"cause,omitempty"`    // why a request of cost 1 would not fit now
	TTLMS    int64          `json:"ttl_ms"`             // -1: no expiry; 0: no key
	Entries  []inspectEntry `json:"entries"`
	State    []int64        `json:"state,omitempty"` // gcra: arrival time µs; sliding-counter: bucket, previous, current

	// Leases are a concurrency rule's leases alive, soonest to expire
	// first; absent for a rate rule's window.
	Leases []inspectLease `json:"leases,omitzero"`

	// Slices are, for a budgeted log or GCRA bucket, the slices leased
	// from it that the store still holds, earliest first; SlicesKey is
	// their key. A log's Used counts the units of those that count.
	SlicesKey string         `json:"slices_key,omitempty"`
	Slices    []inspectSlice `json:"slices,omitempty"`
}

// inspectSlice is a slice leased from a budgeted window: the units the
// store counts for it and when it ends (a log: its entry's stamp, its end
// or when it was given back; GCRA: the end of its hold).
type inspectSlice struct {
	Units    int64     `json:"units"`
	Ends     time.Time `json:"ends"`
	EndsInMS int64     `json:"ends_in_ms"`       // negative once it ended
	Counts   *bool     `json:"counts,omitempty"` // a log's: inside the window now
}

// inspectLease is a lease alive in a concurrency rule's window: the token
// that names it there (not its id) and when it expires unless released or
// extended.
type inspectLease struct {
	Token       string    `json:"token"`
	Expires     time.Time `json:"expires"`
	ExpiresInMS int64     `json:"expires_in_ms"`
}

type inspectEntry struct {
	Time   time.Time `json:"time"`
	AgeMS  int64     `json:"age_ms"`
	Cost   int64     `json:"cost"`
	Counts *bool     `json:"counts,omitempty"` // inside the window now
}

func runInspect(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("inspect", stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: sluice inspect --redis URL --policy P --attr k=v ... [--config FILE] [--prefix P] [--json]

Shows, changing nothing, the Redis windows that policy P keeps for the
given attributes: each key, its entries with their ages and costs, and its
time to live; for a concurrency rule, its leases alive, each by its token
with when it expires; for a budgeted rule, the slices leased from its
window (their units, and when each ends), counted in its use. With --config, the policy's rules name the keys
exactly and the counts in each window are shown (a concurrency rule's
leases alive of its most); without it, the keys are found with SCAN (every
window of P whose attribute values are among those given; the records of
leases are not windows, and are skipped). Redis is --redis, else the
file's store.
Exit status: 0 ok, 2 usage, configuration or store error.

flags:`)
		fs.PrintDefaults()
	}
	var attrs attrFlag
	file := fs.String("config", "", "the configuration `file` that defines the policy")
	policy := fs.String("policy", "", "the policy's `name` (required)")
	fs.Var(&attrs, "attr", "an attribute `name=value`; repeat for several")
	redisURL := fs.String("redis", "", "Redis at this `URL` (redis://host:port/db), instead of the file's store")
	asJSON := fs.Bool("json", false, "print JSON")
	prefix := fs.String("prefix", "", "the key `prefix` (default: the file's, else sluice)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	fail := func(format string, a ...any) int { return usageError(stderr, "inspect", format, a...) }
	switch {
	case *file == "" && *redisURL == "":
		return fail("--redis URL is required (or --config FILE with a Redis store)")
	case *policy == "":
		return fail("--policy NAME is required")
	}
	var cfg *config.Config
	var p *sluice.Policy
	if *file != "" {
		var err error
		if cfg, err = config.Load(*file); err != nil {
			fmt.Fprintln(stderr, err)
			return exitUsage
		}
		if p = cfg.Policy(*policy); p == nil {
			return fail("%v: %q is not in %s", edge.ErrUnknownPolicy, *policy, *file)
		}
	}
	if *prefix != "" {
		if cfg == nil {
			cfg = &config.Config{}
		}
		if cfg.Store == nil {
			cfg.Store = &config.Store{}
		}
		cfg.Store.Prefix = *prefix
	}
	store, err := openConfiguredStore(cfg, *redisURL)
	if err != nil {
		return fail("%v", err)
	}
	defer store.Close()
	if store.Redis == nil {
		return fail("the file has no Redis store and --redis is not set; inspect reads Redis")
	}
	var windows []redisstore.Window
	var now time.Time
	var req *storepkg.Request // the windows of the rules that apply, with --config
	if p != nil {
		if req, err = resolve.Request(p, attrs.values, 1); err != nil {
			return fail("%v", err)
		}
		windows, now, err = store.Redis.Inspect(ctx, req)
	} else {
		windows, now, err = scanWindows(ctx, store, *policy, attrs.values)
	}
	if err != nil {
		return fail("%v", err)
	}
	out := inspectOutput{Policy: *policy, Store: store.Where, Now: now.UTC(), Windows: []inspectWindow{}}
	var next sluice.Decision
	if p != nil {
		lim := sluice.NewLimiter(store.Redis, sluice.Config{Timeout: 5 * time.Second})
		if next, err = lim.Peek(ctx, p, attrs.values, 1); err != nil {
			return fail("%v", err)
		}
		out.Next = &nextJSON{Allowed: next.Allowed, DeniedBy: next.DeniedBy, Cause: string(next.Cause),
			RetryAfterMS: wire.NewDecisionJSON(&next).RetryAfterMS}
	}
	for i, w := range windows {
		iw := inspectWindow{Rule: w.Rule, Key: w.Key, TTLMS: w.TTL.Milliseconds(), Entries: []inspectEntry{}}
		if w.TTL < 0 {
			iw.TTLMS = -1
		}
		var r *storepkg.Check
		if req != nil {
			r = &req.Checks[i]
			iw.Limit, iw.WindowMS, iw.Used = r.Limit, r.Window.Milliseconds(), new(int64)
			iw.Cause = string(next.Limits()[i].Cause)
		}
		if w.Algorithm == storepkg.Concurrency {
			iw.Leases = []inspectLease{}
			for _, l := range w.Leases {
				iw.Leases = append(iw.Leases, inspectLease{Token: l.Token, Expires: l.Expires.UTC(), ExpiresInMS: wire.Millis(l.Expires.Sub(now))})
			}
			if r != nil {
				iw.WindowMS, iw.LeaseMS, *iw.Used = 0, r.Window.Milliseconds(), int64(len(w.Leases))
			}
		}
		iw.SlicesKey = w.SlicesKey
		for _, sl := range w.Slices {
			is := inspectSlice{Units: sl.Units, Ends: sl.At.UTC(), EndsInMS: sl.At.Sub(now).Milliseconds()}
			if r != nil && w.Algorithm == storepkg.Log {
				counts := now.Sub(sl.At) < r.Window // its entry leaves the window at its stamp plus the window
				if counts {
					*iw.Used += sl.Units
				}
				is.Counts = &counts
			}
			iw.Slices = append(iw.Slices, is)
		}
		if len(w.State) > 0 {
			iw.State, iw.Used = w.State, nil // a bucket or a counter: no entries to count
		}
		for _, e := range w.Entries {
			age := now.Sub(e.Time)
			ie := inspectEntry{Time: e.Time.UTC(), AgeMS: age.Milliseconds(), Cost: e.Cost}
			if r != nil {
				counts := age < r.Window
				if counts {
					*iw.Used += e.Cost
				}
				ie.Counts = &counts
			}
			iw.Entries = append(iw.Entries, ie)
		}
		out.Windows = append(out.Windows, iw)
	}
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(out); err != nil {
			return exitUsage
		}
		return exitOK
	}
	fmt.Fprintf(stdout, "policy %q on %s, server time %s\n", *policy, store.Where, now.UTC().Format(time.RFC3339Nano))
	if len(out.Windows) == 0 {
		fmt.Fprintln(stdout, "no windows")
	}
	if n := out.Next; n != nil {
		switch {
		case n.Allowed:
			fmt.Fprintln(stdout, "a request of cost 1 now: allowed")
		case n.Cause == string(sluice.CauseGap):
			fmt.Fprintf(stdout, "a request of cost 1 now: denied by rule %s, too soon after the last event; retry in %v\n",
				n.DeniedBy, time.Duration(n.RetryAfterMS)*time.Millisecond)
		case n.Cause == string(sluice.CauseConcurrency):
			fmt.Fprintf(stdout, "a request of cost 1 now: denied by rule %s, all its leases are alive; retry in %v (when the earliest expires), sooner when one is released\n",
				n.DeniedBy, time.Duration(n.RetryAfterMS)*time.Millisecond)
		default:
			fmt.Fprintf(stdout, "a request of cost 1 now: denied by rule %s, its window is full; retry in %v\n",
				n.DeniedBy, time.Duration(n.RetryAfterMS)*time.Millisecond)
		}
	}
	for _, w := range out.Windows {
		ttl := "no key"
		switch {
		case w.TTLMS < 0:
			ttl = "no expiry"
		case w.TTLMS > 0:
			ttl = "expires in " + (time.Duration(w.TTLMS) * time.Millisecond).String()
		}
		switch {
		case w.Leases != nil && w.Used != nil:
			fmt.Fprintf(stdout, "\nrule %s: %d/%d leases alive (lease %v); %s\n  key %s\n", w.Rule, *w.Used, w.Limit,
				time.Duration(w.LeaseMS)*time.Millisecond, ttl, w.Key)
		case w.Leases != nil:
			fmt.Fprintf(stdout, "\nrule %s: %d leases alive; %s\n  key %s\n", w.Rule, len(w.Leases), ttl, w.Key)
		case w.Used != nil:
			fmt.Fprintf(stdout, "\nrule %s: %d/%d used per %v; %d entries; %s\n  key %s\n", w.Rule, *w.Used, w.Limit,
				time.Duration(w.WindowMS)*time.Millisecond, len(w.Entries), ttl, w.Key)
		default:
			fmt.Fprintf(stdout, "\nrule %s: %d entries; %s\n  key %s\n", w.Rule, len(w.Entries), ttl, w.Key)
		}
		if n := len(w.Slices); n > 0 {
			var units int64
			for _, sl := range w.Slices {
				units += sl.Units
			}
			fmt.Fprintf(stdout, "  %d slices leased, %d units; key %s\n", n, units, w.SlicesKey)
		}
		switch len(w.State) {
		case 1:
			fmt.Fprintf(stdout, "  gcra: the bucket is full again at %s\n", time.UnixMicro(w.State[0]).UTC().Format(time.RFC3339Nano))
		case 3:
			fmt.Fprintf(stdout, "  sliding counter: bucket %d holds %d, the previous one %d\n", w.State[0], w.State[2], w.State[1])
		}
		for _, l := range w.Leases {
			fmt.Fprintf(stdout, "  lease %s  expires in %v (at %s)\n", l.Token, time.Duration(l.ExpiresInMS)*time.Millisecond,
				l.Expires.Format(time.RFC3339Nano))
		}
		for _, sl := range w.Slices {
			when := "ends in " + (time.Duration(sl.EndsInMS) * time.Millisecond).String()
			if sl.EndsInMS <= 0 {
				when = "ended " + (time.Duration(-sl.EndsInMS) * time.Millisecond).String() + " ago"
			}
			note := ""
			if sl.Counts != nil && !*sl.Counts {
				note = "  (outside the window)"
			}
			fmt.Fprintf(stdout, "  slice of %d units  %s (at %s)%s\n", sl.Units, when, sl.Ends.Format(time.RFC3339Nano), note)
		}
		for j, e := range w.Entries {
			note := ""
			if e.Counts != nil && !*e.Counts {
				note = "  (outside the window; kept for the min gap)"
			}
			fmt.Fprintf(stdout, "  #%-4d age %-12v cost %d%s\n", j+1, (time.Duration(e.AgeMS) * time.Millisecond).String(), e.Cost, note)
		}
	}
	return exitOK
}

// scanWindows finds, with SCAN on every node, the windows of the policy
// named policy whose attribute values are among attrs' values, and reads
// them, sorted by key.
func scanWindows(ctx context.Context, store *openedStore, policy string, attrs map[string]string) ([]redisstore.Window, time.Time, error) {
	values := make([]string, 0, len(attrs))
	for _, v := range attrs {
		values = append(values, v)
	}
	pattern, match := store.Redis.PolicyPattern(policy, values)
	nodes := store.Client.Nodes()
	seen := map[string]bool{}
	var keys []string
	for _, node := range nodes {
		var cursor uint64
		for {
			entry, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match(pattern).Count(1000).Build()).AsScanEntry()
			if err != nil {
				return nil, time.Time{}, fmt.Errorf("scanning for %s: %w", pattern, err)
			}
			for _, k := range entry.Elements {
				if match(k) && !seen[k] {
					seen[k] = true
					keys = append(keys, k)
				}
			}
			if cursor = entry.Cursor; cursor == 0 {
				break
			}
		}
	}
	slices.Sort(keys)
	var out []redisstore.Window
	var now time.Time
	read := map[string]bool{} // a window's key and its slices' read it once
	for _, k := range keys {
		w, t, err := store.Redis.InspectKey(ctx, k)
		if err != nil {
			return nil, time.Time{}, err
		}
		if read[w.Key] || w.TTL == 0 && len(w.Slices) == 0 {
			continue // read already, or expired since the scan
		}
		read[w.Key] = true
		out, now = append(out, w), t
	}
	slices.SortFunc(out, func(a, b redisstore.Window) int { return strings.Compare(a.Key, b.Key) })
	if now.IsZero() {
		now = time.Now()
	}
	return out, now, nil
}
