package admin

import (
	"cmp"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/sluicerate/sluice/internal/wire"
	"github.com/sluicerate/sluice/store"
)

// Bounds of the admin view's table of denied keys. Together they cap its
// memory: at most deniedRules tables of deniedPerRule keys, each key's
// text at most deniedKeyBytes (longer values are cut and told apart by a
// hash), so about deniedRules × deniedPerRule × 600 bytes ≈ 7.7 MB in the
// worst case, whatever the traffic (TestDeniedKeysBounded measures it).
const (
	deniedPerRule  = 50  // keys kept per rule
	deniedRules    = 256 // rules tracked; the one denied longest ago makes room
	deniedKeyBytes = 256 // bytes of attribute values kept per key
	deniedStale    = 5 * time.Minute
)

// deniedKeys is the admin view's "who is being limited now": per rule, the
// keys denied most often, with when each will be let through. Each rule's
// table is a Space-Saving sketch (Metwally, Agrawal, El Abbadi, 2005) of
// deniedPerRule counters: a key already in the table counts up; a new key
// takes the place of the key denied longest ago when that was more than
// deniedStale ago, else of the key with the smallest count, inheriting
// that count as its error. Any key denied more than N/deniedPerRule times
// of a rule's N denials is in its table, and its count is over by at most
// its error. Memory is fixed by the bounds above, never by the traffic.
// It is safe for concurrent use.
type deniedKeys struct {
	mu    sync.Mutex
	rules map[ruleKey]*deniedTable

	// waitsEnd is the latest wait of any key (until, in ns since the
	// epoch): an admitted check at or after it finds no key to let
	// through, and observe skips the lock.
	waitsEnd atomic.Int64
}

// ruleKey names a rule of a policy.
type ruleKey struct{ policy, rule string }

// deniedTable is one rule's Space-Saving table.
type deniedTable struct {
	index  map[string]int // key → position in keys
	keys   []deniedKey
	last   time.Time // the latest denial
	total  int64     // denials counted, including the keys replaced
	cached int64     // of them, answered by the deny cache
}

// deniedKey is one key of a rule's table.
type deniedKey struct {
	key    string   // the values, joined; the table's identity of the key
	values []string // the rule's By values, each cut to fit deniedKeyBytes
	cut    bool     // a value was cut: the key cannot be inspected as shown
	count  int64    // denials counted, error included
	cached int64    // of them, answered by the deny cache (none inherited)
	err    int64    // how much of count may belong to keys it replaced
	shadow bool     // the latest denial was a shadow rule's (nothing denied)
	first  time.Time
	last   time.Time // the latest denial
	until  time.Time // when the latest denial's wait ends
}

func newDeniedKeys() *deniedKeys {
	return &deniedKeys{rules: map[ruleKey]*deniedTable{}}
}

// observe counts every check of req that did not fit, decided at now by
// the store or the deny cache (cached), and marks a key in the table whose
// check fitted as let through at now, although its latest denial's wait
// had not ended: a runtime override that raised its limit, or a lease
// released, admits it sooner than that denial said. A dry run (a peek)
// changes nothing.
func (d *deniedKeys) observe(req *store.Request, now time.Time, cached bool) {
	if req.DryRun {
		return
	}
	for i := range req.Results {
		if i >= len(req.Checks) {
			continue
		}
		c := &req.Checks[i]
		if req.Results[i].Fits || store.Waived(req.Checks, req.Results, i) {
			if now.UnixNano() < d.waitsEnd.Load() {
				d.letThrough(ruleKey{req.Policy, c.Rule}, c.Values, now)
			}
			continue
		}
		d.add(ruleKey{req.Policy, c.Rule}, c.Values, c.Shadow, now, req.Results[i].RetryAfter, cached)
	}
}

// letThrough ends at now the wait of the key values of rule, when the table
// holds it and its wait runs past now.
func (d *deniedKeys) letThrough(rule ruleKey, values []string, now time.Time) {
	key := ""
	if len(values) == 1 && len(values[0]) < deniedKeyBytes {
		key = values[0] // keyOf's identity of it, without its copies
	} else {
		key, _, _ = keyOf(values)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.rules[rule]
	if t == nil {
		return
	}
	if i, ok := t.index[key]; ok && t.keys[i].until.After(now) {
		t.keys[i].until = now
	}
}

// add counts one denial of the key values of rule at now, let through
// after wait, answered by the deny cache when cached.
func (d *deniedKeys) add(rule ruleKey, values []string, shadow bool, now time.Time, wait time.Duration, cached bool) {
	key, kept, cut := keyOf(values)
	d.mu.Lock()
	defer d.mu.Unlock()
	t := d.rules[rule]
	if t == nil {
		if len(d.rules) >= deniedRules {
			d.dropOldestRule()
		}
		t = &deniedTable{index: make(map[string]int, deniedPerRule), keys: make([]deniedKey, 0, deniedPerRule)}
		d.rules[rule] = t
	}
	t.last = now
	t.total++
	if end := now.Add(wait).UnixNano(); end > d.waitsEnd.Load() {
		d.waitsEnd.Store(end) // under mu: no other writer
	}
	hit := int64(0)
	if cached {
		t.cached++
		hit = 1
	}
	if i, ok := t.index[key]; ok {
		k := &t.keys[i]
		k.count++
		k.cached += hit
		k.shadow, k.last, k.until = shadow, now, now.Add(wait)
		return
	}
	nk := deniedKey{key: key, values: kept, cut: cut, count: 1, cached: hit, shadow: shadow, first: now, last: now, until: now.Add(wait)}
	if len(t.keys) < deniedPerRule {
		t.index[key] = len(t.keys)
		t.keys = append(t.keys, nk)
		return
	}
	v := t.victim(now)
	old := &t.keys[v]
	delete(t.index, old.key)
	if now.Sub(old.last) <= deniedStale {
		// Space-Saving: the newcomer may have been denied as often as the
		// key it replaces.
		nk.count, nk.err = old.count+1, old.count
	}
	t.keys[v] = nk
	t.index[key] = v
}

// victim returns the position of the key to replace at now: the one
// denied longest ago if that was more than deniedStale ago, else the one
// with the smallest count (the oldest among equals).
func (t *deniedTable) victim(now time.Time) int {
	oldest, least := 0, 0
	for i := range t.keys {
		k := &t.keys[i]
		if k.last.Before(t.keys[oldest].last) {
			oldest = i
		}
		if l := &t.keys[least]; k.count < l.count || (k.count == l.count && k.last.Before(l.last)) {
			least = i
		}
	}
	if now.Sub(t.keys[oldest].last) > deniedStale {
		return oldest
	}
	return least
}

// dropOldestRule forgets the rule denied longest ago. d.mu is held.
func (d *deniedKeys) dropOldestRule() {
	var oldest ruleKey
	var at time.Time
	first := true
	for r, t := range d.rules {
		if first || t.last.Before(at) {
			oldest, at, first = r, t.last, false
		}
	}
	delete(d.rules, oldest)
}

// keyOf returns the identity of the key values, the values as kept (cut
// so that together they take at most deniedKeyBytes) and whether any was
// cut. A cut key's identity ends with a hash of the whole values, so two
// long keys that share their beginning stay apart.
func keyOf(values []string) (key string, kept []string, cut bool) {
	n := 0
	for _, v := range values {
		n += len(v) + 1
	}
	kept = make([]string, len(values))
	if n <= deniedKeyBytes {
		copy(kept, values)
		return strings.Join(values, "\x00"), kept, false
	}
	h := fnv.New64a()
	room := deniedKeyBytes / max(len(values), 1)
	for i, v := range values {
		_, _ = h.Write([]byte(v))
		_, _ = h.Write([]byte{0})
		if len(v) > room {
			v = truncateUTF8(v, room-3) + "…"
		}
		kept[i] = strings.Clone(v)
	}
	return strings.Join(kept, "\x00") + "\x00#" + strconv.FormatUint(h.Sum64(), 16), kept, true
}

// truncateUTF8 returns at most n bytes of s, not cutting a character.
func truncateUTF8(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// deniedRuleJSON is one rule's table in GET /api/v1/denied.
type deniedRuleJSON struct {
	Policy string `json:"policy"`
	Rule   string `json:"rule"`

	// Denials counts every denial the table saw, Cached those of them the
	// deny cache answered; Capacity is how many keys it keeps.
	Denials  int64           `json:"denials"`
	Cached   int64           `json:"cached"`
	Capacity int             `json:"capacity"`
	Keys     []deniedKeyJSON `json:"keys"`

	// By names the rule's attributes, the Values of each key in order;
	// null when the rule is no longer configured.
	By []string `json:"by"`
}

// deniedKeyJSON is one key in a deniedRuleJSON.
type deniedKeyJSON struct {
	// Values are the rule's By values, in order (cut when Truncated).
	Values    []string `json:"values"`
	Truncated bool     `json:"truncated,omitempty"`

	// Count is the denials counted, of which up to Error may be other
	// keys' (Space-Saving's overestimate), and Cached were answered by the
	// deny cache (counted since the key took its place in the table).
	Count  int64 `json:"count"`
	Error  int64 `json:"error"`
	Cached int64 `json:"cached"`

	// Shadow reports that the latest denial was a shadow rule's: logged,
	// not enforced.
	Shadow bool `json:"shadow,omitempty"`

	FirstDenied time.Time `json:"first_denied"`
	LastDenied  time.Time `json:"last_denied"`

	// LetThroughAt is when the latest denial's wait ends, and WaitMS the
	// time until then from the answer's now (0: it would fit now, if
	// nothing else came).
	LetThroughAt time.Time `json:"let_through_at"`
	WaitMS       int64     `json:"wait_ms"`
}

// snapshot returns every rule's keys denied within deniedStale of now,
// most denied first, rules in name order.
func (d *deniedKeys) snapshot(now time.Time) []deniedRuleJSON {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]deniedRuleJSON, 0, len(d.rules))
	for r, t := range d.rules {
		dr := deniedRuleJSON{Policy: r.policy, Rule: r.rule, Denials: t.total, Cached: t.cached, Capacity: deniedPerRule, Keys: []deniedKeyJSON{}}
		for i := range t.keys {
			k := &t.keys[i]
			if now.Sub(k.last) > deniedStale {
				continue
			}
			dr.Keys = append(dr.Keys, deniedKeyJSON{Values: slices.Clone(k.values), Truncated: k.cut,
				Count: k.count, Error: k.err, Cached: k.cached, Shadow: k.shadow, FirstDenied: k.first.UTC(), LastDenied: k.last.UTC(),
				LetThroughAt: k.until.UTC(), WaitMS: wire.Millis(k.until.Sub(now))})
		}
		slices.SortFunc(dr.Keys, func(a, b deniedKeyJSON) int {
			if c := cmp.Compare(b.Count, a.Count); c != 0 {
				return c
			}
			return b.LastDenied.Compare(a.LastDenied)
		})
		out = append(out, dr)
	}
	slices.SortFunc(out, func(a, b deniedRuleJSON) int {
		if c := strings.Compare(a.Policy, b.Policy); c != 0 {
			return c
		}
		return strings.Compare(a.Rule, b.Rule)
	})
	return out
}

// size returns the number of rules tracked and keys held.
func (d *deniedKeys) size() (rules, keys int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, t := range d.rules {
		keys += len(t.keys)
	}
	return len(d.rules), keys
}
