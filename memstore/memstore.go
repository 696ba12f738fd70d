// Package memstore is the in-memory store of sluice (a store.Store): exact sliding-window logs
// kept in this process, with the same semantics as the Redis store. It is the
// embedded default for a single process, and the reference the conformance
// suite holds every other store to.
//
// The store is sharded: keys are spread over independently locked shards, so
// decisions on different keys rarely contend. A policy whose rules fall into
// several shards locks them in a fixed order, so every decision is atomic.
// Idle keys are dropped once their window (plus minimum gap) has passed, so
// memory stays bounded by the keys active within their windows; a calendar
// quota's once its period (and the History periods after it) has passed.
// A credits balance is kept until Close: it is money, and does not expire.
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
	leases leases // the leases' records (see lease.go)

	overrides overrides // runtime overrides (see overrides.go)
}

var _ store.Local = (*Store)(nil)

// Local marks the store as a store.Local: the Limiter calls it without a
// deadline or circuit breaker.
func (*Store) Local() {}

// shard is one lock's share of the windows: a hash table of the windows
// (see table.go), and the expiry queues.
//
// Its first cache line holds what every decision reads (the lock, the
// table, when eviction is next due), its second the rest; shards are two
// lines apart, so no two share a line.
type shard struct {
	mu    sync.Mutex
	tags  []uint16 // per slot: 0 when empty, else the tag of its hash
	slots []*window
	due   int64 // no expiry queue's head expires before it (see evict.go)

	count int                // windows in the table
	names map[nameKey]*names // the names its windows share
	fifos []fifo             // expiry queues, one per distinct TTL (see evict.go)
	_     [24]byte
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

// enter returns the error a call of the store fails with before it starts:
// store.ErrClosed once the store is closed, else ctx's.
func (s *Store) enter(ctx context.Context) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	return ctx.Err()
}

// Close drops every window. Later calls return store.ErrClosed.
func (s *Store) Close() error {
	s.closed.Store(true)
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.tags, sh.slots, sh.names = nil, nil, nil
		sh.count, sh.due = 0, 0
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
	if err := s.enter(ctx); err != nil {
		return err
	}
	if err := store.CheckDecide(req); err != nil {
		return err
	}
	if len(req.Checks) == 1 {
		c := &req.Checks[0]
		s.decideCheck(req.Policy, encodeValues(c.Values), c, req.Mode, req.DryRun, &req.ResultsBuffer()[0])
		return nil
	}
	s.decide(req, nil)
	return nil
}

// decide decides req under the locks of its windows' shards and returns
// the time it decided at. With a lease (Acquire), an admitted request also
// holds the lease's token in its concurrency windows, and lease.receipts
// notes what it recorded in the others.
func (s *Store) decide(req *store.Request, lease *leaseRecord) int64 {
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
	keys, hashes, shardIdx = s.keysOf(req.Policy, checks, keys, hashes, shardIdx)
	locked := s.lock(lockBuf[:0], shardIdx)

	now := s.micros()
	results := req.ResultsBuffer()
	moved := false // whether a slot found may have moved since (see table.go)
	allFit, covers := true, false
	for i := range checks {
		sh := &s.shards[shardIdx[i]]
		j, removed := sh.live(hashes[i], &keys[i], &checks[i], now)
		moved = moved || removed
		slots, wins = append(slots, j), append(wins, sh.at(j))
		check(&results[i], &checks[i], wins[i], now)
		allFit = allFit && (results[i].Fits || checks[i].Shadow)
		covers = covers || checks[i].Covers > 0
	}
	if covers {
		cover(checks, results)
		allFit = true
		for i := range checks {
			allFit = allFit && (results[i].Fits || checks[i].Shadow || store.Waived(checks, results, i))
		}
	}
	record := req.Mode == store.ModeRecord || allFit
	for i := range checks {
		// As redisstore does: a window that fits may need a wait after a
		// recorded attempt, which matters when the request is denied.
		if !allFit || !results[i].Fits || req.Mode == store.ModeRecord {
			retry(&results[i], &checks[i], wins[i], record && draws(checks, results, i), now)
		}
	}
	if covers {
		coverRetry(checks, results)
	}

	if record && !req.DryRun {
		var token int64
		if lease != nil {
			token = lease.token
		}
		for i := range checks {
			if !draws(checks, results, i) {
				continue // a covering check not drawn: its window as it was
			}
			sh := &s.shards[shardIdx[i]]
			j := slots[i]
			if moved && wins[i] != nil {
				j = sh.index(wins[i])
			}
			var balance int64
			if lease != nil && checks[i].Algorithm == store.Credits {
				balance = creditsBalance(&checks[i], wins[i])
			}
			slots[i] = sh.record(j, hashes[i], &keys[i], &checks[i], now, token)
			moved = moved || j < 0 // an insertion may move or grow the table
			wins[i] = sh.slots[slots[i]]
			if lease != nil {
				lease.receipts[i] = receiptOf(&checks[i], wins[i], now)
				if checks[i].Algorithm == store.Credits {
					lease.receipts[i].interval = balance - wins[i].used // what was drawn
				}
			}
		}
		for i := range checks {
			report(&results[i], &checks[i], wins[i], now)
		}
		for i := range checks {
			s.shards[shardIdx[i]].evict(now)
		}
	} else {
		for i := range checks {
			if record && draws(checks, results, i) {
				pretend(&results[i], &checks[i], wins[i], now)
			} else {
				report(&results[i], &checks[i], wins[i], now)
			}
		}
	}
	s.unlock(locked)
	if lease != nil {
		lease.granted = record && !req.DryRun
	}
	return now
}

// keysOf appends to keys, hashes and shardIdx the key of each check of
// policy, its hash and its shard.
func (s *Store) keysOf(policy string, checks []store.Check, keys []key, hashes []uint64, shardIdx []int) ([]key, []uint64, []int) {
	for i := range checks {
		k := key{policy: policy, rule: checks[i].Rule, values: encodeValues(checks[i].Values)}
		h := k.hash(s.seed)
		keys = append(keys, k)
		hashes = append(hashes, h)
		shardIdx = append(shardIdx, int(h&s.mask))
	}
	return keys, hashes, shardIdx
}

// lock locks the distinct shards of shardIdx in ascending order and
// returns them, appended to dst, for unlock.
func (s *Store) lock(dst, shardIdx []int) []int {
	locked := lockOrder(dst, shardIdx)
	for _, i := range locked {
		s.shards[i].mu.Lock()
	}
	return locked
}

func (s *Store) unlock(locked []int) {
	for _, i := range locked {
		s.shards[i].mu.Unlock()
	}
}

var _ store.CheckDecider = (*Store)(nil)

// DecideCheck implements store.CheckDecider: Decide's road for a request of
// one check, without a Request, so that the caller needs none (see
// store.CheckDecider).
func (s *Store) DecideCheck(ctx context.Context, policy string, c *store.Check, value string, cost int64, mode store.Mode, dry bool) (store.Result, error) {
	if err := s.enter(ctx); err != nil {
		return store.Result{}, err
	}
	if c.Algorithm == store.Concurrency && !dry {
		return store.Result{}, store.ErrLeaseOnly
	}
	// The check as Decide would see it: c's figures with the request's
	// cost (c itself when it already has that cost, as a Limiter's check
	// for a cost of 1 does: the store only reads it). Its Values stay c's:
	// the key's values are value, encoded as encodeValues encodes one value
	// (itself).
	if c.Cost != cost {
		one := *c
		one.Cost = cost
		c = &one
	}
	var res store.Result
	s.decideCheck(policy, value, c, mode, dry, &res)
	return res, nil
}

// decideCheck decides check c of policy, whose key's encoded values are
// values, in mode (dry: recording nothing) into res: Decide for a request
// of one check, one key, one shard.
func (s *Store) decideCheck(policy, values string, c *store.Check, mode store.Mode, dry bool, res *store.Result) {
	k := key{policy: policy, rule: c.Rule, values: values}
	h := k.hash(s.seed)
	sh := &s.shards[h&s.mask]
	sh.mu.Lock()
	now := s.micros()
	j, _ := sh.live(h, &k, c, now)
	w := sh.at(j)
	check(res, c, w, now)
	record := mode == store.ModeRecord || res.Fits || c.Shadow
	if !res.Fits || mode == store.ModeRecord {
		retry(res, c, w, record, now)
	}
	if record && !dry {
		w = sh.slots[sh.record(j, h, &k, c, now, 0)]
	}
	if record && dry {
		pretend(res, c, w, now)
	} else {
		report(res, c, w, now)
	}
	if record && !dry {
		sh.evict(now)
	}
	sh.mu.Unlock()
}

// live returns the index of the slot of k, whose hash is h, brought up to
// now for check c (a log's entries that left the window trimmed, a sliding
// counter's buckets rolled), or -1 when the shard holds no window of k or
// holds one expired by now, which it drops (removed reports that: slots may
// have moved). A window expires when it would decide as no window does.
func (sh *shard) live(h uint64, k *key, c *store.Check, now int64) (j int, removed bool) {
	j = sh.find(h, k)
	if j < 0 {
		return -1, false
	}
	w := sh.slots[j]
	switch c.Algorithm {
	case store.Log:
		// By its entries, not its count: an entry settled to 0 leaves the
		// window too (a lease's, see lease.go).
		if w.n > 0 && w.oldest <= now-c.Window.Microseconds() {
			w.trim(now - c.Window.Microseconds())
		}
	case store.SlidingCounter:
		counterRoll(w, c, now)
	case store.GCRA:
		if w.n > 0 { // slices held (budget.go)
			gcraSettle(w, c, now)
		}
	case store.Concurrency:
		concPrune(w, now)
	case store.Periodic:
		periodicRoll(w, c, now)
	case store.Credits:
		creditsRoll(w, c, now)
	}
	if w.expires <= now {
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

// The algorithms. Each decides a check from the state its window keeps
// (nil: none yet) in five steps: check (Fits and Cause before the
// decision), retry (RetryAfter, once the decision recorded pending cost or
// not), add (record the cost), report (Used, Remaining and ResetAfter as
// the window holds them) and pretend (the same after a write a dry run
// does not make). log.go, gcra.go and counter.go hold them.

func check(res *store.Result, c *store.Check, w *window, now int64) {
	res.Fits, res.Cause = true, store.CauseNone
	switch c.Algorithm {
	case store.GCRA:
		gcraCheck(res, c, w, now)
	case store.SlidingCounter:
		counterCheck(res, c, w, now)
	case store.Concurrency:
		concCheck(res, c, w)
	case store.Periodic:
		periodicCheck(res, c, w)
	case store.Credits:
		creditsCheck(res, c, w)
	default:
		logCheck(res, c, w, now)
	}
}

func retry(res *store.Result, c *store.Check, w *window, pending bool, now int64) {
	var wait int64
	switch c.Algorithm {
	case store.GCRA:
		wait = gcraWait(c, w, pending, now)
	case store.SlidingCounter:
		wait = counterWait(c, w, pending, now)
	case store.Concurrency:
		wait = concWait(c, w, pending, now)
	case store.Periodic:
		wait = periodicWait(c, w, pending, now)
	case store.Credits:
		wait = creditsWait(c, w, pending, now)
	default:
		limit, gap := logWaits(c, w, pending, now)
		wait = max(limit, gap)
	}
	res.RetryAfter = min(time.Duration(wait)*time.Microsecond, store.MaxRetry)
}

// add records c's cost in w at now and sets its expiry; for a concurrency
// check, it holds the lease of token.
func add(w *window, c *store.Check, now, token int64) {
	switch c.Algorithm {
	case store.GCRA:
		gcraAdd(w, c, now)
	case store.SlidingCounter:
		counterAdd(w, c, now)
	case store.Concurrency:
		concAdd(w, c, now, token)
	case store.Periodic:
		periodicAdd(w, c, now)
	case store.Credits:
		creditsAdd(w, c, now)
	default:
		if c.Budget > 0 && now < w.newest {
			// Before a slice's future entry: in time order (budget.go).
			w.ringInsert(now, c.Cost, c.Limit)
			w.expires = max(w.expires, now+c.TTL().Microseconds())
			return
		}
		w.add(now, c.Cost, c.TTL().Microseconds(), c.Limit)
	}
}

func report(res *store.Result, c *store.Check, w *window, now int64) {
	switch c.Algorithm {
	case store.GCRA:
		gcraReport(res, c, gcraTAT(w, now), now)
	case store.SlidingCounter:
		counterReport(res, c, w, 0, now)
	case store.Concurrency:
		concReport(res, c, w, 0, now)
	case store.Periodic:
		periodicReport(res, c, w, 0, now)
	case store.Credits:
		creditsReport(res, c, w, false)
	default:
		logReport(res, c, w, now)
	}
}

func pretend(res *store.Result, c *store.Check, w *window, now int64) {
	switch c.Algorithm {
	case store.GCRA:
		gcraReport(res, c, gcraAfter(c, gcraTAT(w, now), now), now)
	case store.SlidingCounter:
		counterReport(res, c, w, c.Cost, now)
	case store.Concurrency:
		concReport(res, c, w, c.Cost, now)
	case store.Periodic:
		periodicReport(res, c, w, c.Cost, now)
	case store.Credits:
		creditsReport(res, c, w, true)
	default:
		logPretend(res, c, w, now)
	}
}

// Covers (store.Check.Covers): a Credits check that covers a Periodic
// check of its request is drawn, and decides, only when that check does
// not fit; then, when the credits fit, the Periodic check's denial is
// waived (store.Waived). cover, draws and coverRetry say so for a decision.

// cover sets the result of each Credits check that covers a check that
// fits to fitting (it neither draws nor denies).
func cover(checks []store.Check, results []store.Result) {
	for i := range checks {
		if k := checks[i].Covers - 1; k >= 0 && results[k].Fits {
			results[i].Fits, results[i].Cause = true, store.CauseNone
		}
	}
}

// draws reports whether recording the request records check i: all but
// a Credits check covering a check that fits.
func draws(checks []store.Check, results []store.Result, i int) bool {
	k := checks[i].Covers - 1
	return k < 0 || !results[k].Fits
}

// coverRetry sets the RetryAfter of each covering Credits check and of
// the check it covers to the lesser of the two: the request passes both
// once either has room.
func coverRetry(checks []store.Check, results []store.Result) {
	for i := range checks {
		if k := checks[i].Covers - 1; k >= 0 {
			r := min(results[i].RetryAfter, results[k].RetryAfter)
			results[i].RetryAfter, results[k].RetryAfter = r, r
		}
	}
}

// record adds c's cost at now (a concurrency check: the lease of token)
// to the window of k, whose hash is h, in slot j, or to a new window when j
// is -1, and returns the window's slot.
func (sh *shard) record(j int, h uint64, k *key, c *store.Check, now, token int64) int {
	if j < 0 {
		w := &window{h: h}
		add(w, c, now, token)
		sh.enqueue(w, expiryClass(c))
		return sh.insert(k, w)
	}
	add(sh.slots[j], c, now, token)
	return j
}

// expiryClass is the expiry queue of c's windows: windows in one queue
// expire about as long after their writes (see evict.go).
func expiryClass(c *store.Check) int64 {
	switch c.Algorithm {
	case store.GCRA:
		return c.Burst * gcraInterval(c)
	case store.SlidingCounter:
		return 2 * c.Window.Microseconds()
	case store.Periodic:
		return (1 + int64(c.History)) * store.MaxPeriodLength.Microseconds()
	case store.Credits:
		return -1 // never expires
	}
	return c.TTL().Microseconds()
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
