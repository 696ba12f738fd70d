package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/sluicerate/sluice/store"
)

// Window is the stored state of one rule's window, as Inspect reads it.
type Window struct {
	// Rule is the rule's name and Key the Redis key of its window.
	Rule, Key string

	// Entries are the entries the key holds, oldest first: those in the
	// window and, until the key expires, the newest one even after it left
	// the window (it enforces the rule's minimum gap).
	Entries []Entry

	// TTL is the key's remaining time to live; -1 for a key without one,
	// and 0 when the key does not exist.
	TTL time.Duration

	// State is, for a GCRA bucket, its theoretical arrival time (µs since
	// the Unix epoch: when the bucket is full again), for a sliding
	// counter its bucket index (time / window) and the previous and current
	// buckets' counts, for a calendar quota the index of the period it
	// counts (store.Calendar) and its count, and for a credits balance the
	// balance and the index of the period of its last refill (0 without
	// refills). Empty for a log, whose Entries tell its state.
	State []int64

	// Algorithm is the rule's algorithm: the check's for Inspect, the
	// one the key's name gives for InspectKey (store.Log for a name it
	// cannot read).
	Algorithm store.Algorithm

	// Leases are, for a concurrency rule's window (Algorithm
	// store.Concurrency), the leases alive in it at the store's time,
	// soonest to expire first; Entries and State are then empty. A
	// lease that expired unreleased stays in the key until the rule is
	// next decided, and is not among them.
	Leases []Lease

	// SlicesKey is, for a budgeted log or GCRA bucket (Inspect of a check
	// with a Budget; InspectKey of any log or bucket), the key of the
	// slices leased from it (budget.go), and Slices the slices it holds,
	// earliest first. A log counts a slice's units until At + the
	// window, beside its Entries; a bucket holds them until At.
	SlicesKey string
	Slices    []Slice
}

// Slice is a slice leased from a budgeted window (store.Budgeter), as the
// store counts it.
type Slice struct {
	// Units is how many units the store counts for it: what was granted,
	// or, once it was given back, what was used of it.
	Units int64

	// At is, for a log, the stamp of the slice's entry: its end, or when
	// it was given back if that was earlier; for a GCRA bucket, when the
	// hold ends. On the store's clock.
	At time.Time
}

// Lease is a lease alive in a concurrency rule's window.
type Lease struct {
	// Token names the lease in the window: 32 hex digits of the SHA-256
	// of its id (lease.go), which it does not tell.
	Token string

	// Expires is when the lease expires unless released or extended, on
	// the store's clock.
	Expires time.Time
}

// Entry is one recorded event.
type Entry struct {
	// Time is when it was recorded, on the store's clock.
	Time time.Time

	// Cost is its cost.
	Cost int64
}

// Inspect reads, changing nothing, the window of every check of req, in
// order, and the store's time: the Redis server's, or Config.Clock's when
// set (read with the last window; each window is read on its own). It is for operators looking at a store
// (sluice inspect), not for deciding: the windows may change between
// Inspect and any later call. sluice.Limiter.Resolve gives the request of a policy
// and attributes.
func (s *Store) Inspect(ctx context.Context, req *store.Request) ([]Window, time.Time, error) {
	ks := s.Keys(req)
	// One call per key: with SlotsPerRule the keys of a request may lie in
	// several cluster slots.
	windows := make([]Window, len(ks))
	var now time.Time
	for i, k := range ks {
		alg := req.Checks[i].Algorithm
		w, t, err := s.inspect(ctx, []string{k}, []store.Algorithm{alg}, []bool{keepsSlices(&req.Checks[i])})
		if err != nil {
			return nil, time.Time{}, err
		}
		windows[i], now = w[0], t
		windows[i].Rule = req.Checks[i].Rule
	}
	return windows, now, nil
}

// InspectKey reads, changing nothing, one window key found without the
// policy's definition (by SCAN with PolicyPattern, say): its rule and
// algorithm are the ones its name gives, and its entries (a concurrency
// rule's window: its leases), TTL and the server's time are read as by
// Inspect, with the slices leased from a log or GCRA bucket. The key of a
// window's slices reads that window: Key is the window's. A key of another layout than the store's (Config.Layout) is not
// read: the error says which layout it is in; nor is a schedule's queue or
// a lease's record, which are no windows (a lease shows in the windows of
// its policy's concurrency rules).
func (s *Store) InspectKey(ctx context.Context, key string) (Window, time.Time, error) {
	name, ok := s.names.parse(key)
	if ok && name.layout != s.names.layout {
		return Window{}, time.Time{}, fmt.Errorf("redisstore: %s is a key of layout %d and this store reads layout %d; inspect it with a store of that layout (redisstore.Config.Layout)", key, name.layout, s.names.layout)
	}
	alg := store.Log
	if ok {
		switch name.kind {
		case queueKind:
			return Window{}, time.Time{}, fmt.Errorf("redisstore: %s is a schedule's queue, not a window; inspect a policy's windows", key)
		case leaseKind:
			return Window{}, time.Time{}, fmt.Errorf("redisstore: %s is the record of a lease, not a window; the lease shows in its policy's concurrency windows", key)
		}
		if i := slices.Index(kinds[:], name.kind); i >= 0 {
			alg = store.Algorithm(i)
		}
	}
	if ok && name.slices {
		key = s.names.windowOfSlices(key)
	}
	windows, now, err := s.inspect(ctx, []string{key}, []store.Algorithm{alg}, []bool{ok && (alg == store.Log || alg == store.GCRA)})
	if err != nil {
		return Window{}, time.Time{}, err
	}
	w := windows[0]
	if len(w.Slices) == 0 {
		w.SlicesKey = "" // a window nothing was leased from, or not budgeted
	}
	w.Rule, _ = url.PathUnescape(name.rule)
	return w, now, nil
}

// PolicyPattern returns the SCAN MATCH pattern of every key of the policy
// named policy, and a function that reports whether such a key is a window,
// or the slices leased from one, of the store's layout for the attribute
// values given: every value in its name (in the hash tag and after the
// rule) is one of values. A rule without attributes matches any values.
// InspectKey reads either as its window.
func (s *Store) PolicyPattern(policy string, values []string) (pattern string, match func(key string) bool) {
	enc := string(appendPart(nil, policy))
	head := s.names.prefix + ":{" + enc
	var b strings.Builder
	for _, c := range head {
		if strings.ContainsRune(`*?[]\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	b.WriteByte('*')
	encoded := make(map[string]bool, len(values))
	for _, v := range values {
		encoded[string(appendPart(nil, v))] = true
	}
	return b.String(), func(key string) bool {
		name, ok := s.names.parse(key)
		if !ok || name.layout != s.names.layout || name.rule == "" || name.tag[0] != enc { // rule "": a queue or a lease's record
			return false
		}
		for _, p := range append(name.tag[1:], name.values...) {
			if !encoded[p] {
				return false
			}
		}
		return true
	}
}

// keyName is what a key's name says, its parts still encoded.
type keyName struct {
	layout Layout
	slices bool     // the key of a window's slices (slicesMark after the tag); the rest names the window
	kind   byte     // what it holds: Layout2's letter (kinds, queueKind, leaseKind), in Layout1 read from the rule's mark
	tag    []string // the hash tag's parts: the policy or schedule, then values
	rule   string   // the rule; "" for a queue or a lease's record
	values []string // the values after the rule
}

// parse reads the name of a key under n's prefix, of either layout. It
// reports false for a name that is not one a Store writes.
func (n namer) parse(key string) (keyName, bool) {
	var k keyName
	rest, ok := strings.CutPrefix(key, n.prefix+":{")
	if !ok {
		return k, false
	}
	tag, rest, ok := strings.Cut(rest, "}")
	if !ok || tag == "" {
		return k, false
	}
	k.tag = strings.Split(tag, ",")
	if rest, k.slices = strings.CutPrefix(rest, slicesMark); k.slices && !strings.HasPrefix(rest, ":") && !strings.HasPrefix(rest, "2") {
		return k, false
	}
	switch {
	case strings.HasPrefix(rest, ":"): // Layout1: :<policy>:<rule>[<mark>][:<values>]
		k.layout = Layout1
		parts := strings.SplitN(rest[1:], ":", 3)
		if len(parts) < 2 || parts[0] != k.tag[0] {
			return k, false
		}
		k.rule, k.kind = parts[1], kinds[store.Log]
		for alg, m := range layout1Marks {
			if rule, ok := strings.CutSuffix(k.rule, m); ok && m != "" {
				k.rule, k.kind = rule, kinds[alg]
				break
			}
		}
		switch k.rule {
		case "@queue", "@lease":
			if k.slices {
				return k, false
			}
		}
		switch k.rule {
		case "@queue":
			k.rule, k.kind = "", queueKind
		case "@lease": // :<policy>:@lease:<token>
			k.rule, k.kind = "", leaseKind
			return k, len(parts) == 3
		}
		if len(parts) == 3 {
			k.values = strings.Split(parts[2], ",")
		}
	case len(rest) >= 2 && rest[0] == '2': // Layout2: 2<kind>[:<rule>[:<values>]]
		k.layout, k.kind = Layout2, rest[1]
		if k.slices && k.kind != kinds[store.Log] && k.kind != kinds[store.GCRA] {
			return k, false
		}
		switch k.kind {
		case queueKind:
			return k, len(rest) == 2
		case leaseKind: // 2e:<token>
			return k, len(rest) > 3 && rest[2] == ':'
		}
		if !slices.Contains(kinds[:], k.kind) || len(rest) < 4 || rest[2] != ':' {
			return k, false
		}
		rule, values, ok := strings.Cut(rest[3:], ":")
		k.rule = rule
		if ok {
			k.values = strings.Split(values, ",")
		}
	default:
		return k, false
	}
	return k, true
}

// inspect runs inspect.lua over keys, which share one slot and whose
// rules have the algorithms algs, reading the slices of those whose sliced
// is true.
func (s *Store) inspect(ctx context.Context, ks []string, algs []store.Algorithm, sliced []bool) ([]Window, time.Time, error) {
	if s.closed.Load() {
		return nil, time.Time{}, store.ErrClosed
	}
	marks := make([]byte, len(ks))
	all := ks
	for i, k := range ks {
		marks[i] = '-'
		if sliced[i] {
			marks[i] = 's'
			if len(all) == len(ks) {
				all = append([]string(nil), ks...)
			}
			all = append(all, s.names.slicesKey(k))
		}
	}
	kinds := make([]byte, len(ks))
	for i, a := range algs {
		switch a {
		case store.Concurrency:
			kinds[i] = 'n'
		case store.GCRA:
			kinds[i] = 'g'
		case store.SlidingCounter:
			kinds[i] = 'c'
		case store.Periodic:
			kinds[i] = 'p'
		case store.Credits:
			kinds[i] = 'b'
		default:
			kinds[i] = '-'
		}
	}
	reply, err := run(ctx, s.ev, inspectScript, all, []string{s.nowArg(), string(kinds), string(marks)})
	if err != nil {
		return nil, time.Time{}, err
	}
	bad := func() ([]Window, time.Time, error) {
		return nil, time.Time{}, fmt.Errorf("redisstore: inspect.lua replied %d integers, which do not describe %d keys", len(reply), len(ks))
	}
	if len(reply) < 1 {
		return bad()
	}
	now := time.UnixMicro(reply[0])
	out := make([]Window, len(ks))
	i := 1
	for k := range ks {
		if i+2 > len(reply) {
			return bad()
		}
		w := Window{Key: ks[k], Algorithm: algs[k]}
		switch pttl := reply[i]; {
		case pttl == -1:
			w.TTL = -1
		case pttl > 0:
			w.TTL = time.Duration(pttl) * time.Millisecond
		}
		n := reply[i+1]
		i += 2
		if kinds[k] == 'n' {
			// n leases of 5 integers: the expiry, then the token's four
			// words of 8 hex digits.
			if n < 0 || int64(len(reply)-i) < 5*n {
				return bad()
			}
			w.Leases = make([]Lease, n)
			for j := range w.Leases {
				tok := make([]byte, 0, 32)
				for _, word := range reply[i+1 : i+5] {
					if word < 0 || word > 0xffffffff {
						return bad()
					}
					tok = fmt.Appendf(tok, "%08x", word)
				}
				w.Leases[j] = Lease{Token: string(tok), Expires: time.UnixMicro(reply[i])}
				i += 5
			}
			out[k] = w
			continue
		}
		switch {
		case n < 0 && int64(len(reply)-i) >= -n:
			w.State = append([]int64(nil), reply[i:i-int(n)]...)
			i -= int(n)
		case n < 0 || int64(len(reply)-i) < 2*n:
			return bad()
		default:
			for range n {
				w.Entries = append(w.Entries, Entry{Time: time.UnixMicro(reply[i]), Cost: reply[i+1]})
				i += 2
			}
		}
		if sliced[k] {
			w.SlicesKey = s.names.slicesKey(ks[k])
			if i >= len(reply) {
				return bad()
			}
			m := reply[i]
			i++
			if m < 0 || int64(len(reply)-i) < 2*m {
				return bad()
			}
			for range m {
				w.Slices = append(w.Slices, Slice{At: time.UnixMicro(reply[i]), Units: reply[i+1]})
				i += 2
			}
		}
		out[k] = w
	}
	if i != len(reply) {
		return bad()
	}
	return out, now, nil
}
