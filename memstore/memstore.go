// Package memstore is the in-memory store of sluice (a store.Store): exact sliding-window logs
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

	"github.com/sluicerate/sluice/store"
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

var _ store.Local = (*Store)(nil)

// Local marks the store as a store.Local: the Limiter calls it without a
// deadline or circuit breaker.
func (*Store) Local() {}

// shard is one lock's share of the windows: a hash table of the windows
// (see table.go), and the expiry queues.
type shard struct {
	mu    sync.Mutex
	tags  []uint16 // per slot: 0 when empty, else the tag of its hash
	slots []*window
	count int                // windows in the table
	names map[nameKey]*names // the names its windows share
	fifos []fifo             // expiry queues, one per distinct TTL (see evict.go)
	_     [64]byte
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
	return s
}

// Close drops every window. Later calls return store.ErrClosed.
func (s *Store) Close() error {
	s.closed.Store(true)
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.tags, sh.slots, sh.names = nil, nil, nil
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

// maxInlineRules is how many checks a decision handles without allocating
// its bookkeeping.
const maxInlineRules = 8

// Decide implements store.Store. It allocates nothing for up to 8 checks
// when req.Results has room for them, except when a window is created or
// its log grows.
func (s *Store) Decide(ctx context.Context, req *store.Request) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(req.Checks) == 1 {
		s.decideOne(req)
		return nil
	}
	checks := req.Checks
	var (
		keysBuf   [maxInlineRules]key
		hashBuf   [maxInlineRules]uint64
		shardsBuf [maxInlineRules]int
		lockBuf   [maxInlineRules]int
		winBuf    [maxInlineRules]*window
		slotBuf   [maxInlineRules]int
	)
	keys, hashes, shardIdx, wins, slots := keysBuf[:0], hashBuf[:0], shardsBuf[:0], winBuf[:0], slotBuf[:0]
	for i := range checks {
		k := key{policy: req.Policy, rule: checks[i].Rule, values: encodeValues(checks[i].Values)}
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
	results := req.ResultsBuffer()
	allFit := true
	moved := false // whether a slot found may have moved since (see table.go)
	for i := range checks {
		sh := &s.shards[shardIdx[i]]
		j, removed := sh.live(hashes[i], &keys[i], now, checks[i].Window.Microseconds())
		moved = moved || removed
		slots, wins = append(slots, j), append(wins, sh.at(j))
		check(&results[i], &checks[i], wins[i], now)
		allFit = allFit && (results[i].Fits || checks[i].Shadow)
	}
	record := req.Mode == store.ModeRecord || allFit
	for i := range checks {
		// As redisstore does: a window that fits may need a wait after a
		// recorded attempt, which matters when the request is denied.
		if !allFit || !results[i].Fits || req.Mode == store.ModeRecord {
			retry(&results[i], &checks[i], wins[i], record, now)
		}
	}

	if record && !req.DryRun {
		for i := range checks {
			sh := &s.shards[shardIdx[i]]
			j := slots[i]
			if moved && wins[i] != nil {
				j = sh.index(wins[i])
			}
			slots[i] = sh.record(j, hashes[i], &keys[i], &checks[i], now)
			moved = moved || j < 0 // an insertion may move or grow the table
			wins[i] = sh.slots[slots[i]]
		}
		for i := range checks {
			report(&results[i], &checks[i], wins[i], now)
		}
		for i := range checks {
			s.shards[shardIdx[i]].evict(now)
		}
	} else {
		for i := range checks {
			report(&results[i], &checks[i], wins[i], now)
			if record {
				pretend(&results[i], &checks[i], wins[i], now)
			}
		}
	}
	for _, i := range locked {
		s.shards[i].mu.Unlock()
	}
	return nil
}

// decideOne is Decide for a request of one check: one key, one shard.
func (s *Store) decideOne(req *store.Request) {
	c := &req.Checks[0]
	k := key{policy: req.Policy, rule: c.Rule, values: encodeValues(c.Values)}
	h := k.hash(s.seed)
	sh := &s.shards[h&s.mask]
	res := &req.ResultsBuffer()[0]
	sh.mu.Lock()
	now := s.micros()
	j, _ := sh.live(h, &k, now, c.Window.Microseconds())
	w := sh.at(j)
	check(res, c, w, now)
	record := req.Mode == store.ModeRecord || res.Fits || c.Shadow
	if !res.Fits || req.Mode == store.ModeRecord {
		retry(res, c, w, record, now)
	}
	if record && !req.DryRun {
		w = sh.slots[sh.record(j, h, &k, c, now)]
	}
	report(res, c, w, now)
	if record && req.DryRun {
		pretend(res, c, w, now)
	}
	if record && !req.DryRun {
		sh.evict(now)
	}
	sh.mu.Unlock()
}

// live returns the index of the slot of k, whose hash is h, with the entries
// that left the window ending at now trimmed, or -1 when the shard holds no
// window of k or holds one idle past its window and gap, which it drops
// (removed reports that: slots may have moved).
func (sh *shard) live(h uint64, k *key, now, window int64) (j int, removed bool) {
	j = sh.find(h, k)
	if j < 0 {
		return -1, false
	}
	w := sh.slots[j]
	if w.used > 0 && w.oldest <= now-window {
		w.trim(now - window)
	}
	if w.used == 0 && w.expires <= now {
		// Idle past its window and gap: as good as absent.
		sh.remove(w)
		return -1, true
	}
	return j, false
}

// at returns the window in slot j, or nil when j is -1.
func (sh *shard) at(j int) *window {
	if j < 0 {
		return nil
	}
	return sh.slots[j]
}

// check sets res's Used, Fits and Cause for check c before the decision at
// now, given its window (nil: none).
func check(res *store.Result, c *store.Check, w *window, now int64) {
	res.Fits = true
	if w == nil {
		res.Fits = c.Cost <= c.Limit
		if !res.Fits {
			res.Cause = store.CauseLimit
		}
		return
	}
	res.Used = w.used
	full := w.used+c.Cost > c.Limit
	early := c.MinGap > 0 && !w.empty() && now-w.newest < c.MinGap.Microseconds()
	switch {
	case full && early:
		res.Fits = false
		// The cause is the condition that takes longer to clear.
		res.Cause = store.CauseLimit
		if limit, gap := waits(c, w, 0, now); gap > limit {
			res.Cause = store.CauseGap
		}
	case full:
		res.Fits, res.Cause = false, store.CauseLimit
	case early:
		res.Fits, res.Cause = false, store.CauseGap
	}
}

// retry sets res.RetryAfter: the least wait until c fits again, after the
// decision recorded it (pending) or not.
func retry(res *store.Result, c *store.Check, w *window, pending bool, now int64) {
	var p int64
	if pending {
		p = c.Cost
	}
	limit, gap := waits(c, w, p, now)
	res.RetryAfter = time.Duration(max(limit, gap)) * time.Microsecond
}

// waits returns how long, from now, until c's window w (nil: none) has room
// for c's cost, and until its minimum gap has passed, once pending units of
// cost (0 for none) are recorded at now.
func waits(c *store.Check, w *window, pending, now int64) (limit, gap int64) {
	window := c.Window.Microseconds()
	at := now // when the pending entry is recorded: never before the newest
	var used int64
	if w != nil {
		used = w.used
		at = max(now, w.newest)
	}
	if need := used + pending + c.Cost - c.Limit; need > 0 {
		freed := int64(-1)
		if w != nil && need <= used {
			freed = w.freedAt(need, window)
		}
		if freed < 0 {
			freed = at + window // only the pending entry's leaving makes room
		}
		limit = freed - now
	}
	if g := c.MinGap.Microseconds(); g > 0 {
		last := int64(-1)
		switch {
		case pending > 0:
			last = at
		case w != nil && !w.empty():
			last = w.newest
		}
		if last >= 0 {
			gap = max(0, last+g-now)
		}
	}
	return limit, gap
}

// record adds c's cost at now to the window of k, whose hash is h, in slot
// j, or to a new window when j is -1, and returns the window's slot.
func (sh *shard) record(j int, h uint64, k *key, c *store.Check, now int64) int {
	ttl := c.TTL().Microseconds()
	if j < 0 {
		w := &window{h: h}
		w.add(now, c.Cost, ttl, c.Limit)
		sh.enqueue(w, ttl)
		return sh.insert(k, w)
	}
	sh.slots[j].add(now, c.Cost, ttl, c.Limit)
	return j
}

// report sets res's Used and ResetAfter after the decision, given c's
// window (nil: none).
func report(res *store.Result, c *store.Check, w *window, now int64) {
	if w == nil {
		return
	}
	res.Used = w.used
	if w.n > 0 { // then the newest entry is in the window
		res.ResetAfter = time.Duration(w.newest+c.Window.Microseconds()-now) * time.Microsecond
	}
}

// pretend adjusts what report gave for a dry run to what recording c at now
// would have left: the cost counted, and the window ending a window after
// the entry.
func pretend(res *store.Result, c *store.Check, w *window, now int64) {
	at := now
	if w != nil {
		at = max(now, w.newest)
	}
	res.Used += c.Cost
	res.ResetAfter = time.Duration(at+c.Window.Microseconds()-now) * time.Microsecond
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
