package sluice

import (
	"encoding/binary"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicerate/sluice/store"
)

// The deny cache. Under an abuse flood most requests are for keys already
// over their limit, and each denial would cost a store call. A denial is
// stable: when rule R denies a request of cost c on its window K with
// RetryAfter T, R denies every request of cost c or more on K until T has
// passed, unless something frees room in K first. So a Limiter whose policy
// sets CacheDenials remembers, per denying rule, the window, the cost and
// the instant until which it denies, and answers the requests that rule
// would deny itself, without a store call.
//
// The instant is measured from when the request was sent, s, on the
// Limiter's clock (Config.Clock, else the monotonic clock): the store
// decided at some t0 >= s, so s+T comes no later than t0+T, the store's
// first instant of room. Until s+T the store itself would deny, whatever
// happened meanwhile, except for what frees room early; at s+T the entry
// has expired and the next request goes to the store.
//
// Each rule that denied has an entry, keyed by everything that decides
// whether a request fits the rule's window: the policy, the rule, the
// values of its attributes, its limit (after overrides), window, minimum
// gap, algorithm, burst and spread. A request hits an entry when one of its
// checks has the same key, a cost at least the entry's and the entry has
// not expired. A policy loaded again with a rule changed in any of those
// figures therefore never finds the old rule's entries, and one loaded
// unchanged finds entries that are still the store's answer.
//
// Why waiting is exact for each algorithm, absent frees: a window's room
// for a cost only grows with time and only shrinks with writes, and a
// larger cost fits no sooner than a smaller one. The log's entries only
// leave the window, and a minimum gap only runs out; GCRA's arrival time
// only moves forward with admissions; the sliding counter's estimate only
// falls with time (at a bucket's start the previous count becomes the
// whole estimate, never more than the moment before). A spread rule denies
// only after every sub-window denied; its entry holds until the soonest of
// them, each measured from when it was asked, and is kept only when all of
// them were asked in a row.
//
// What frees room early, and makes a cached answer deny what the store
// would admit (under-admission, never over-admission: the cache never
// admits): a cross-slot decision's rollback that a concurrent request saw
// as an admission; an admission lost on a Redis failover; windows emptied
// by an operator (sluice's Envoy reset); a memory store evicting windows
// when full; another Limiter with other limits for the same names; clocks
// whose rates differ (an hour's entry, 50 ppm: 180 ms). Record and Penalize
// only add entries, so they make a cached wait shorter than the store's,
// never wrong.

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

// denial is one entry: rule status.Rule denies requests of cost or more
// on its window until until; status holds the figures the store reported
// for the window at at (no later than the store's time).
type denial struct {
	key        string
	prev, next *denial
	cost       int64
	at, until  time.Time
	status     LimitStatus
}

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

// get returns the status of the entry key names, its waits counted down to
// now, when it denies cost at now.
func (c *denyCache) get(key []byte, cost int64, now time.Time) (LimitStatus, bool) {
	sh := c.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := sh.entries[string(key)]
	switch {
	case e == nil || cost < e.cost:
		return LimitStatus{}, false
	case !now.Before(e.until):
		sh.unlink(e)
		delete(sh.entries, e.key)
		return LimitStatus{}, false
	}
	if sh.lru.next != e {
		sh.unlink(e)
		sh.pushFront(e)
	}
	s := e.status
	s.RetryAfter = e.until.Sub(now)
	s.ResetAfter = max(0, s.ResetAfter-now.Sub(e.at))
	return s, true
}

// put remembers that s's rule denies cost or more on the window key names
// until until, its figures those of the window at at. The latest denial of
// a window replaces the one before.
func (c *denyCache) put(key []byte, cost int64, at, until time.Time, s LimitStatus) {
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
	e.cost, e.at, e.until, e.status = cost, at, until, s
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

// lookup answers s's request from the cache at now: a denial by every
// rule whose entry denies it, or false when none does.
func (c *denyCache) lookup(s *scratch, now time.Time) (Decision, bool) {
	var d Decision
	for i := range s.req.Checks {
		ch := &s.req.Checks[i]
		if ch.Shadow {
			continue
		}
		s.key = appendDenyKey(s.key[:0], s.req.Policy, ch, s.spreadOf(i))
		st, ok := c.get(s.key, ch.Cost, now)
		if !ok {
			continue
		}
		if len(d.Limits) == 0 {
			d.DeniedBy, d.Cause, d.Remaining = st.Rule, st.Cause, st.Remaining
		}
		d.Remaining = min(d.Remaining, st.Remaining)
		d.RetryAfter = max(d.RetryAfter, st.RetryAfter)
		d.ResetAfter = max(d.ResetAfter, st.ResetAfter)
		d.Limits = append(d.Limits, st)
	}
	if len(d.Limits) == 0 {
		c.misses.Add(1)
		return Decision{}, false
	}
	c.hits.Add(1)
	d.Cached = true
	return d, true
}

// fill remembers the rules that denied s's request in d, a decision of the
// store whose last call was sent at s.sent. A spread rule is remembered
// only when every one of its sub-windows denied in a row.
func (c *denyCache) fill(s *scratch, d *Decision) {
	for i := range s.req.Checks {
		ch := &s.req.Checks[i]
		st := &d.Limits[i]
		if ch.Shadow || st.Fits || st.RetryAfter <= 0 {
			continue
		}
		at, until := s.sent, s.sent.Add(st.RetryAfter)
		sp := s.spreadOf(i)
		if sp != nil {
			if sp.seen < sp.n {
				continue
			}
			at, until = sp.until.Add(-st.RetryAfter), sp.until
		}
		s.key = appendDenyKey(s.key[:0], s.req.Policy, ch, sp)
		c.put(s.key, ch.Cost, at, until, *st)
	}
}

// appendDenyKey appends the key of ch's window and of everything that
// decides whether a request fits it. For a spread rule (sp not nil) it is
// the whole window's: its values without the sub-window, its whole limit
// and burst, and the number of sub-windows.
func appendDenyKey(b []byte, policy string, ch *store.Check, sp *spreading) []byte {
	str := func(b []byte, s string) []byte {
		return append(binary.AppendUvarint(b, uint64(len(s))), s...)
	}
	b = str(b, policy)
	b = str(b, ch.Rule)
	values, limit, burst, parts := ch.Values, ch.Limit, ch.Burst, 0
	if sp != nil {
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
	return binary.AppendUvarint(b, uint64(parts))
}
