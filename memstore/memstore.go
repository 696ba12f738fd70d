// Package memstore is the in-memory sluice.Store: exact sliding-window logs
// kept in this process, with the same semantics as the Redis store. It is the
// embedded default for a single process, and the reference the conformance
// suite holds every other store to.
//
// The store is sharded: keys are spread over independently locked shards, so
// decisions on different keys rarely contend. A policy whose rules fall into
// several shards locks them in a fixed order, so every decision is atomic.
// Idle keys are dropped once their window (plus minimum gap) has passed, so
// memory stays bounded by the keys active within their windows.
package memstore

import (
	"context"
	"hash/maphash"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicerate/sluice"
)

// Config configures a Store. The zero value is the default.
type Config struct {
	// Clock returns the current time. Default time.Now. Times are truncated
	// to the microsecond.
	Clock func() time.Time

	// Shards is the number of independently locked shards, rounded up to a
	// power of two. Default 256.
	Shards int
}

// Store is an in-memory sluice.Store. It is safe for concurrent use. Create
// one with New; the zero value is not usable.
type Store struct {
	now    func() time.Time
	micros func() int64 // now in µs
	seed   maphash.Seed
	shards []shard
	mask   uint64
	closed atomic.Bool
	queues queues // the schedules' queues (see reserve.go)
}

var _ sluice.LocalStore = (*Store)(nil)

// Local marks the store as a sluice.LocalStore: the Limiter calls it without
// a deadline or circuit breaker.
func (*Store) Local() {}

// shard is one lock's share of the windows: a hash table from a key's hash
// to the windows with that hash (see lookup), and the expiry queues.
type shard struct {
	mu      sync.Mutex
	windows map[uint64]*window
	count   int    // windows in the table
	fifos   []fifo // expiry queues, one per distinct TTL (see evict.go)
	_       [64]byte
}

// New returns an empty Store.
func New(cfg Config) *Store {
	n := cfg.Shards
	if n <= 0 {
		n = 256
	}
	n = 1 << bits.Len(uint(n-1))
	s := &Store{
		now:    cfg.Clock,
		seed:   maphash.MakeSeed(),
		shards: make([]shard, n),
		mask:   uint64(n - 1),
	}
	if s.now == nil {
		// The wall clock at start plus the monotonic time since: one clock
		// read per decision, and immune to steps of the wall clock.
		start := time.Now()
		base := start.UnixMicro()
		s.now = time.Now
		s.micros = func() int64 { return base + time.Since(start).Microseconds() }
	} else {
		now := s.now
		s.micros = func() int64 { return now().UnixMicro() }
	}
	for i := range s.shards {
		s.shards[i].windows = make(map[uint64]*window)
	}
	return s
}

// Close drops every window. Later calls return sluice.ErrStoreClosed.
func (s *Store) Close() error {
	s.closed.Store(true)
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		clear(sh.windows)
		sh.count = 0
		sh.fifos = nil
		sh.mu.Unlock()
	}
	return nil
}

// Len returns the number of windows held, live or not yet swept.
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += sh.count
		sh.mu.Unlock()
	}
	return n
}

// maxInlineRules is how many rules a decision handles without allocating
// its bookkeeping.
const maxInlineRules = 8

// Decide implements sluice.Store. It allocates nothing for a policy of up
// to 8 rules when req.Limits holds a status per rule, except when a window
// is created or its log grows.
func (s *Store) Decide(ctx context.Context, req *sluice.Request) (sluice.Decision, error) {
	if s.closed.Load() {
		return sluice.Decision{}, sluice.ErrStoreClosed
	}
	if err := ctx.Err(); err != nil {
		return sluice.Decision{}, err
	}
	rules := req.Policy.Rules
	var (
		keysBuf   [maxInlineRules]key
		hashBuf   [maxInlineRules]uint64
		shardsBuf [maxInlineRules]int
		lockBuf   [maxInlineRules]int
		winBuf    [maxInlineRules]*window
	)
	keys, hashes, shardIdx, wins := keysBuf[:0], hashBuf[:0], shardsBuf[:0], winBuf[:0]
	for i := range rules {
		k := key{policy: req.Policy.Name, rule: rules[i].Name, values: encodeValues(rules[i].By, req.Attributes)}
		h := k.hash(s.seed)
		keys = append(keys, k)
		hashes = append(hashes, h)
		shardIdx = append(shardIdx, int(h&s.mask))
	}
	locked := lockOrder(lockBuf[:0], shardIdx)
	for _, i := range locked {
		s.shards[i].mu.Lock()
	}

	now := s.micros()
	cost := req.Cost
	limits := req.LimitsBuffer()
	allFit := true
	for i := range rules {
		r := &rules[i]
		sh := &s.shards[shardIdx[i]]
		w := sh.lookup(hashes[i], &keys[i])
		window := r.Window.Microseconds()
		if w != nil {
			w.trim(now - window)
			if w.expires <= now && w.n == 0 {
				// Idle past its window and gap: as good as absent.
				sh.remove(w)
				w = nil
			}
		}
		wins = append(wins, w)
		st := &limits[i]
		st.Rule, st.Limit, st.Window = r.Name, r.Limit, r.Window
		st.Fits = true
		if w == nil {
			continue
		}
		st.Used = w.used
		var retry int64
		if w.used+cost > r.Limit {
			st.Fits = false
			retry = w.freedAt(w.used+cost-r.Limit, window) - now
		}
		if gap := r.MinGap.Microseconds(); gap > 0 && !w.empty() && now-w.newest < gap {
			st.Fits = false
			retry = max(retry, w.newest+gap-now)
		}
		st.RetryAfter = time.Duration(retry) * time.Microsecond
		allFit = allFit && st.Fits
	}

	record := req.Mode == sluice.ModeRecord || (req.Mode == sluice.ModeAllow && allFit)
	for i := range rules {
		r := &rules[i]
		w := wins[i]
		if record {
			sh := &s.shards[shardIdx[i]]
			ttl := r.TTL().Microseconds()
			if w == nil {
				w = &window{k: keys[i], h: hashes[i]}
				w.add(now, cost, ttl, r.Limit)
				sh.insert(w)
				sh.enqueue(w, ttl)
			} else {
				w.add(now, cost, ttl, r.Limit)
			}
			sh.evict(now)
		}
		st := &limits[i]
		if w != nil {
			st.Used = w.used
			if w.n > 0 { // then the newest entry is in the window
				st.ResetAfter = time.Duration(w.newest+r.Window.Microseconds()-now) * time.Microsecond
			}
		}
		st.Remaining = max(0, r.Limit-st.Used)
	}
	for _, i := range locked {
		s.shards[i].mu.Unlock()
	}
	return sluice.NewDecision(limits), nil
}

// lockOrder appends to dst the distinct shard indexes of idx in ascending
// order, the order in which a decision locks them.
func lockOrder(dst, idx []int) []int {
	out := append(dst, idx...)
	if len(out) == 1 {
		return out
	}
	slices.Sort(out)
	j := 0
	for i := range out {
		if i == 0 || out[i] != out[j-1] {
			out[j] = out[i]
			j++
		}
	}
	return out[:j]
}
