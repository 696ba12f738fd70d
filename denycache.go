package sluice

import (
	"encoding/binary"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// The deny cache. Under an abuse flood most requests are for keys already
// over their limit, and each denial would cost a store call. A denial is
// stable: when rule R denies a request of cost c on its window K with
// RetryAfter T, R denies every request of cost c or more on K until T has
// passed, unless something frees room in K first. So a Limiter whose policy
// sets CacheDenials remembers the store's denial of a request and answers
// the same request again itself, without a store call, until the first
// rule that did not fit could fit.
//
// An entry is keyed by the request: the policy, the cost and, for every
// rule that applied, everything that decides whether the request fits the
// rule's window: the rule, the values of its attributes, its limit (after
// overrides), window, minimum gap, algorithm, burst, spread and shadow
// mode, and a calendar quota's period and time zone. It holds the store's decision whole, one status per rule, so that
// a cached answer has the store's shape: the same rules in Limits, in the
// same order, with the figures the store gave (Used, Remaining, Fits,
// Cause) and the waits counted down (RetryAfter, ResetAfter). A request
// with another cost, or whose rules resolve to other windows (the same
// user from another address), is another key: the store answers it, and
// its denial is remembered in turn. A policy loaded again with a rule
// changed in any of those figures therefore never finds the old rule's
// entries, and one loaded unchanged finds entries that are still the
// store's answer.
//
// The entry holds until the soonest instant a rule that did not fit could
// fit: then the set of rules that deny, and so DeniedBy, could change.
// Each instant is measured from when the request was sent, s, on the
// Limiter's clock (Config.Clock, else the monotonic clock): the store
// decided at some t0 >= s, so s+T comes no later than t0+T, the store's
// first instant of room for a rule whose RetryAfter is T. Until then the
// store itself would deny with the same rules, whatever happened
// meanwhile, except for what frees room early.
//
// Why waiting is exact for each algorithm, absent frees: a window's room
// for a cost only grows with time and only shrinks with writes. The log's
// entries only leave the window, and a minimum gap only runs out; GCRA's
// arrival time only moves forward with admissions; the sliding counter's
// estimate only falls with time (at a bucket's start the previous count
// becomes the whole estimate, never more than the moment before); a
// calendar quota's count only starts again from 0 at its next period. A
// credits balance is another matter: a purchase adds to it at any time, so
// a policy with a credits rule is never answered from the cache. A spread
// rule denies only after every sub-window denied; its status holds until
// the soonest of them, each measured from when it was asked, and a denial
// is kept only when all of them were asked in a row.
//
// What the figures do not follow: writes to a window since the denial
// (other requests admitted on a rule that fit, Record, Penalize) leave
// the cached Used and Remaining as the store reported them, and a rule
// that fit may since have filled up; such a rule's figures are the
// store's of that instant, as any answer's are a moment later.
//
// What frees room early, and makes a cached answer deny what the store
// would admit (under-admission, never over-admission: the cache never
// admits): a cross-slot decision's rollback that a concurrent request saw
// as an admission; an admission lost on a Redis failover; windows emptied
// by an operator (sluice's Envoy reset); a memory store evicting windows
// when full; another Limiter with other limits for the same names; clocks
// whose rates differ (an hour's entry, 50 ppm: 180 ms).

// DefaultDenyCache is Config.DenyCache's default: the most denials a
// Limiter remembers.
const DefaultDenyCache = 10_000

// DenyCacheStats counts what a Limiter's deny cache did (see
// Config.DenyCache).
type DenyCacheStats struct {
	// Entries is the number of denials held: at most the cache's size,
	// expired ones included until they are looked up or evicted.
	Entries int

	// Hits counts requests answered from the cache, Misses requests of
	// policies with CacheDenials that it could not answer (they went to
	// the store), and Evictions denials dropped for newer ones when the
	// cache was full.
	Hits, Misses, Evictions uint64
}

// denyCache is a Limiter's deny cache: shards of least-recently-used
// entries whose sizes add up to the cache's. It is safe for concurrent use.
type denyCache struct {
	seed                    maphash.Seed
	shards                  []denyShard
	hits, misses, evictions atomic.Uint64
}

// denyShard is one shard: a map of entries and their use order.
type denyShard struct {
	mu      sync.Mutex
	size    int
	entries map[string]*denial
	lru     denial // sentinel: lru.next is the most recently used, lru.prev the least
	_       [64]byte
}

// denial is one entry: the store's denial of the request key names, which
// holds until until. limits are the decision's statuses; retryAt and
// resetAt, one per status, the instants their RetryAfter and ResetAfter
// end (zero for a wait of 0).
type denial struct {
	key        string
	prev, next *denial
	until      time.Time
	remaining  int64
	deniedBy   string
	cause      Cause
	limits     []LimitStatus
	ends       []waitEnds
}

// waitEnds are the instants a status's RetryAfter and ResetAfter end.
type waitEnds struct{ retry, reset time.Time }

// newDenyCache returns a cache of size entries, in shards of at least 256
// entries (up to 16), so that a small cache is one exact LRU.
func newDenyCache(size int) *denyCache {
	n := 1
	for n < 16 && size/(2*n) >= 256 {
		n *= 2
	}
	c := &denyCache{seed: maphash.MakeSeed(), shards: make([]denyShard, n)}
	for i := range c.shards {
		sh := &c.shards[i]
		sh.size = size / n
		if i < size%n {
			sh.size++
		}
		sh.lru.next, sh.lru.prev = &sh.lru, &sh.lru
	}
	return c
}

func (c *denyCache) shard(key []byte) *denyShard {
	if len(c.shards) == 1 {
		return &c.shards[0]
	}
	return &c.shards[maphash.Bytes(c.seed, key)&uint64(len(c.shards)-1)]
}

// get returns the denial key names, its waits counted down to now, when
// it still holds at now.
func (c *denyCache) get(key []byte, now time.Time) (Decision, bool) {
	sh := c.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.entries[string(key)]
	switch {
	case e == nil:
		return Decision{}, false
	case !now.Before(e.until):
		sh.unlink(e)
		delete(sh.entries, e.key)
		return Decision{}, false
	}
	if sh.lru.next != e {
		sh.unlink(e)
		sh.pushFront(e)
	}
	d := Decision{Remaining: e.remaining, DeniedBy: e.deniedBy, Cause: e.cause, Cached: true}
	if len(e.limits) == 1 {
		d.hasOne = true
	} else {
		d.more = make([]LimitStatus, len(e.limits))
	}
	limits := d.Limits()
	for i := range e.limits {
		s := e.limits[i]
		s.RetryAfter, s.ResetAfter = left(e.ends[i].retry, now), left(e.ends[i].reset, now)
		if !s.Shadow {
			d.RetryAfter = max(d.RetryAfter, s.RetryAfter)
		}
		d.ResetAfter = max(d.ResetAfter, s.ResetAfter)
		limits[i] = s
	}
	return d, true
}

// left returns the time from now until end, 0 for a zero end.
func left(end, now time.Time) time.Duration {
	if end.IsZero() {
		return 0
	}
	return max(0, end.Sub(now))
}

// put remembers d, the store's denial of the request key names, until
// until; ends holds the instants each status's waits end. The latest
// denial of a request replaces the one before.
func (c *denyCache) put(key []byte, until time.Time, d *Decision, ends []waitEnds) {
	sh := c.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.size < 1 {
		return
	}
	e := sh.entries[string(key)]
	switch {
	case e != nil:
		sh.unlink(e)
	case len(sh.entries) >= sh.size:
		e = sh.lru.prev // the least recently used, reused for the new key
		sh.unlink(e)
		delete(sh.entries, e.key)
		c.evictions.Add(1)
		e.key = string(key)
		sh.entries[e.key] = e
	default:
		if sh.entries == nil {
			sh.entries = make(map[string]*denial)
		}
		e = &denial{key: string(key)}
		sh.entries[e.key] = e
	}
	e.until, e.remaining, e.deniedBy, e.cause = until, d.Remaining, d.DeniedBy, d.Cause
	e.limits = append(e.limits[:0], d.Limits()...)
	e.ends = append(e.ends[:0], ends...)
	sh.pushFront(e)
}

func (sh *denyShard) unlink(e *denial) {
	e.prev.next, e.next.prev = e.next, e.prev
	e.prev, e.next = nil, nil
}

func (sh *denyShard) pushFront(e *denial) {
	e.prev, e.next = &sh.lru, sh.lru.next
	sh.lru.next.prev = e
	sh.lru.next = e
}

func (c *denyCache) stats() DenyCacheStats {
	st := DenyCacheStats{Hits: c.hits.Load(), Misses: c.misses.Load(), Evictions: c.evictions.Load()}
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		st.Entries += len(sh.entries)
		sh.mu.Unlock()
	}
	return st
}

// lookup answers s's request from the cache at now: the store's denial
// of the same request, or false when the cache holds none.
func (c *denyCache) lookup(s *scratch, now time.Time) (Decision, bool) {
	s.key = appendDenyKey(s.key[:0], s)
	d, ok := c.get(s.key, now)
	if !ok {
		c.misses.Add(1)
		return Decision{}, false
	}
	c.hits.Add(1)
	return d, true
}

// fill remembers d, the store's denial of s's request, whose last store
// call was sent at s.sent, until the soonest instant a rule that did not
// fit could fit. It remembers nothing when a spread rule that denied was
// not asked on every sub-window in a row, or a rule that did not fit
// reported no wait.
func (c *denyCache) fill(s *scratch, d *Decision) {
	var buf [8]waitEnds
	ends := buf[:0]
	var until time.Time
	limits := d.Limits()
	for i := range limits {
		st := &limits[i]
		e := waitEnds{}
		if st.RetryAfter > 0 {
			e.retry = s.sent.Add(st.RetryAfter)
		}
		if st.ResetAfter > 0 {
			e.reset = s.sent.Add(st.ResetAfter)
		}
		if !st.Fits {
			if st.RetryAfter <= 0 {
				return
			}
			if sp := s.spreadOf(i); sp != nil && !st.Shadow {
				if sp.seen < sp.n {
					return
				}
				e.retry = sp.until
			}
			if until.IsZero() || e.retry.Before(until) {
				until = e.retry
			}
		}
		ends = append(ends, e)
	}
	if until.IsZero() {
		return
	}
	s.key = appendDenyKey(s.key[:0], s)
	c.put(s.key, until, d, ends)
}

// appendDenyKey appends the key of s's request: its policy, its cost and,
// for each check, the window and everything that decides whether the
// request fits it. For a spread rule it is the whole window's: its values
// without the sub-window, its whole limit and burst, and the number of
// sub-windows.
func appendDenyKey(b []byte, s *scratch) []byte {
	str := func(b []byte, v string) []byte {
		return append(binary.AppendUvarint(b, uint64(len(v))), v...)
	}
	req := &s.req
	b = str(b, req.Policy)
	b = binary.AppendUvarint(b, uint64(len(req.Checks)))
	for i := range req.Checks {
		ch := &req.Checks[i]
		b = str(b, ch.Rule)
		b = binary.AppendVarint(b, ch.Cost)
		values, limit, burst, parts := ch.Values, ch.Limit, ch.Burst, 0
		if sp := s.spreadOf(i); sp != nil {
			values, limit, burst, parts = values[:len(values)-1], sp.limit, sp.burst, sp.n
		}
		b = binary.AppendUvarint(b, uint64(len(values)))
		for _, v := range values {
			b = str(b, v)
		}
		b = binary.AppendVarint(b, limit)
		b = binary.AppendVarint(b, int64(ch.Window))
		b = binary.AppendVarint(b, int64(ch.MinGap))
		b = append(b, byte(ch.Algorithm))
		b = binary.AppendVarint(b, burst)
		b = binary.AppendUvarint(b, uint64(parts))
		if ch.Shadow {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
		if cal := &ch.Calendar; cal.Period != 0 {
			b = append(b, byte(cal.Period), byte(cal.WeekStart))
			if cal.Location != nil {
				b = str(b, cal.Location.String())
			}
		}
	}
	return b
}
