package memstore

import (
	"container/heap"
	"context"
	"sync"
	"time"

	"github.com/sluicerate/sluice/store"
)

// Leases. An admitted Acquire holds its lease's token (a number unique in
// the store) in its concurrency windows and keeps a record of the lease
// under its id: its expiry, the estimate, and what it recorded in each rate
// window (a receipt), which Finish reads to release, settle or extend it.
// Records are dropped when their lease ends or expires; a heap of expiries
// finds the expired ones. An abandon of a lease not alive leaves a record
// marked dead, a tombstone, until its TTL has passed: an Acquire of its id
// takes nothing meanwhile.

var _ store.Leaser = (*Store)(nil)

// leases is the store's lease records. Its lock is taken before any
// shard's (Finish), never while one is held.
type leases struct {
	mu      sync.Mutex
	records map[string]*leaseRecord
	expiry  expiryHeap[string] // lease ids
	tokens  int64              // the last token given
	expired int64              // leases that expired while alive, see Store.ExpiredLeases
}

// leaseRecord is one lease alive.
type leaseRecord struct {
	token    int64
	expires  int64 // µs
	cost     int64 // the estimate
	receipts []receipt
	granted  bool // set by decide: the request was admitted
	dead     bool // a tombstone: the lease was abandoned before it was taken
}

// receipt is what an Acquire recorded in a rate window: a log entry's time,
// the time a sliding counter recorded at (its bucket is found by the window
// the settle is decided with, as the Redis store's is), a GCRA bucket's
// interval, a calendar quota's period index (at), what a credits balance
// gave (interval; 0 when a covered quota had room) and the period of its
// last refill (at).
type receipt struct {
	at       int64
	interval int64
}

// receiptOf returns the receipt of c's cost just recorded in w at now.
func receiptOf(c *store.Check, w *window, now int64) receipt {
	switch c.Algorithm {
	case store.Log:
		return receipt{at: logAt(c, w, now)}
	case store.SlidingCounter:
		return receipt{at: now}
	case store.GCRA:
		return receipt{interval: gcraInterval(c)}
	case store.Periodic:
		return receipt{at: w.oldest} // the period's index
	case store.Credits:
		return receipt{at: w.oldest} // the period of the balance's last refill
	}
	return receipt{}
}

// Acquire implements store.Leaser.
func (s *Store) Acquire(ctx context.Context, req *store.Request, lease *store.LeaseGrant) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	if err := store.CheckQuotas(req.Checks); err != nil {
		return err
	}
	s.leases.mu.Lock()
	if s.leases.kept(lease.ID, s.micros()) {
		s.leases.mu.Unlock()
		lease.Expires = time.Time{}
		store.DenyAbandoned(req)
		return nil
	}
	s.leases.tokens++
	rec := &leaseRecord{token: s.leases.tokens, cost: req.Checks[0].Cost, receipts: make([]receipt, len(req.Checks))}
	s.leases.mu.Unlock()
	for i := range req.Checks {
		if req.Checks[i].Algorithm != store.Concurrency {
			rec.cost = req.Checks[i].Cost
			break
		}
	}
	now := s.decide(req, rec)
	lease.Expires = time.Time{}
	if !rec.granted {
		return nil
	}
	rec.expires = now + lease.TTL.Microseconds()
	lease.Expires = time.UnixMicro(rec.expires)
	s.leases.mu.Lock()
	defer s.leases.mu.Unlock()
	if s.leases.records == nil {
		s.leases.records = map[string]*leaseRecord{}
	}
	if s.leases.kept(lease.ID, now) {
		// Abandoned while it was decided: the abandon wins, as if it had
		// come after the Acquire.
		s.end(&store.FinishRequest{Policy: req.Policy, Checks: req.Checks, Op: store.LeaseSettle}, rec)
		lease.Expires = time.Time{}
		store.DenyAbandoned(req)
		return nil
	}
	s.leases.records[lease.ID] = rec
	heap.Push(&s.leases.expiry, expiring[string]{item: lease.ID, at: rec.expires})
	return nil
}

// kept reports whether the store keeps a record of the lease id alive at
// now, the lease's or a tombstone (sweep drops the others): an Acquire of
// id then takes nothing.
func (ls *leases) kept(id string, now int64) bool {
	ls.sweep(now)
	_, ok := ls.records[id]
	return ok
}

// Finish implements store.Leaser.
func (s *Store) Finish(ctx context.Context, req *store.FinishRequest) (store.LeaseState, error) {
	if err := s.enter(ctx); err != nil {
		return store.LeaseState{}, err
	}
	s.leases.mu.Lock()
	defer s.leases.mu.Unlock()
	now := s.micros()
	s.leases.sweep(now)
	rec := s.leases.records[req.ID]
	if rec == nil || rec.dead || rec.expires <= now || len(rec.receipts) != len(req.Checks) {
		if req.Op == store.LeaseAbandon && (rec == nil || rec.dead || rec.expires <= now) && req.TTL > 0 {
			// A tombstone until the lease time has passed: an Acquire
			// of the id sent before and arriving later takes nothing.
			if s.leases.records == nil {
				s.leases.records = map[string]*leaseRecord{}
			}
			t := &leaseRecord{dead: true, expires: now + req.TTL.Microseconds()}
			s.leases.records[req.ID] = t
			heap.Push(&s.leases.expiry, expiring[string]{item: req.ID, at: t.expires})
		}
		return store.LeaseState{}, nil
	}
	if req.Op == store.LeaseExtend {
		rec.expires = s.micros() + req.TTL.Microseconds()
		heap.Push(&s.leases.expiry, expiring[string]{item: req.ID, at: rec.expires})
	} else {
		delete(s.leases.records, req.ID)
	}
	s.end(req, rec)
	return store.LeaseState{Held: true, Expires: time.UnixMicro(rec.expires)}, nil
}

// end does req's operation on the lease of rec in its windows: an abandon
// settles it to 0. The caller holds the leases' lock and has kept or
// dropped rec (an extension has moved rec.expires).
func (s *Store) end(req *store.FinishRequest, rec *leaseRecord) {
	op, cost := req.Op, req.Cost
	if op == store.LeaseAbandon {
		op, cost = store.LeaseSettle, 0
	}
	var (
		keysBuf   [maxInlineRules]key
		hashBuf   [maxInlineRules]uint64
		shardsBuf [maxInlineRules]int
		lockBuf   [maxInlineRules]int
	)
	keys, hashes, shardIdx := s.keysOf(req.Policy, req.Checks, keysBuf[:0], hashBuf[:0], shardsBuf[:0])
	locked := s.lock(lockBuf[:0], shardIdx)
	defer s.unlock(locked)
	now := s.micros()
	for i := range req.Checks {
		c := &req.Checks[i]
		sh := &s.shards[shardIdx[i]]
		j, _ := sh.live(hashes[i], &keys[i], c, now)
		w := sh.at(j)
		switch {
		case c.Algorithm == store.Concurrency:
			if w == nil {
				continue
			}
			if k := w.concFind(rec.token); k >= 0 {
				if op == store.LeaseExtend {
					w.ring[k].ts = rec.expires
					w.expires = max(w.expires, rec.expires)
				} else {
					w.concRemoveAt(k)
				}
			}
		case op == store.LeaseSettle:
			sh.settle(j, hashes[i], &keys[i], c, rec.receipts[i], cost-rec.cost, now)
		case op == store.LeaseRelease && (c.Algorithm == store.Periodic || c.Algorithm == store.Credits):
			// A quota's estimate is given back: what was not done is
			// not counted.
			sh.settle(j, hashes[i], &keys[i], c, rec.receipts[i], -rec.cost, now)
		}
	}
}

// settle records delta more cost (less when negative) in the window of k
// in slot j (-1: none), where an Acquire's receipt r says it recorded its
// estimate, as store.Leaser says for each algorithm.
func (sh *shard) settle(j int, h uint64, k *key, c *store.Check, r receipt, delta, now int64) {
	w := sh.at(j)
	switch c.Algorithm {
	case store.Log:
		if w != nil {
			logSettle(w, r.at, delta)
		}
	case store.SlidingCounter:
		if w == nil {
			return
		}
		switch b := r.at / c.Window.Microseconds(); w.oldest { // rolled to now by live
		case b:
			w.used = min(max(0, w.used+delta), store.MaxCost)
		case b + 1:
			w.first = min(max(0, w.first+delta), store.MaxCost)
		}
	case store.Periodic:
		if w != nil {
			periodicSettle(w, r.at, delta)
		}
	case store.Credits:
		if w != nil && r.interval != 0 && !creditsMoot(c, w, r.at) { // drawn by the Acquire, from the balance w still has
			creditsSettle(w, delta)
		}
	case store.GCRA:
		step := gcraSettleStep(delta, r.interval)
		tat := min(max(now, now+step), now+store.MaxBucket)
		if w != nil {
			tat = min(max(now, gcraTAT(w, now)+step), now+store.MaxBucket)
		}
		switch {
		case w != nil:
			w.newest, w.expires = tat, tat
		case tat > now:
			w = &window{h: h, newest: tat, expires: tat}
			sh.enqueue(w, expiryClass(c))
			sh.insert(k, w)
			sh.evict(now)
		}
	}
}

// gcraSettleStep returns how far delta units of interval iv move a TAT,
// within store.MaxBucket either way: a TAT moves at most that far past now.
func gcraSettleStep(delta, iv int64) int64 {
	if lim := store.MaxBucket / iv; delta > lim || delta < -lim {
		if delta < 0 {
			return -store.MaxBucket
		}
		return store.MaxBucket
	}
	return delta * iv
}

// logSettle adds delta to the cost of the entries of w recorded at at
// (their sum, when delta is negative, never below 0): entries of one time
// count alike, so which of them holds the lease's estimate does not matter.
// An entry settled to 0 stays, counting nothing: its request happened at
// its time, so a minimum gap still counts from it (w.newest is kept), and
// it leaves the window when it would have.
func logSettle(w *window, at, delta int64) {
	if delta > 0 {
		delta = min(delta, store.MaxCost-w.used) // the window saturates
	}
	for i := w.n - 1; i >= 0 && delta != 0; i-- {
		e := w.at(i)
		if e.ts < at {
			break
		}
		if e.ts != at {
			continue
		}
		d := max(delta, -e.cost) // all of a positive delta
		e.cost += d
		w.used += d
		delta -= d
	}
	if w.n > 0 {
		w.first = w.at(0).cost
	}
}

// sweep drops the records of leases expired by now, counting those that
// were neither released nor settled.
func (ls *leases) sweep(now int64) {
	for len(ls.expiry) > 0 && ls.expiry[0].at <= now {
		x := heap.Pop(&ls.expiry).(expiring[string])
		if rec := ls.records[x.item]; rec != nil && rec.expires <= now {
			delete(ls.records, x.item)
			if !rec.dead {
				ls.expired++
			}
		}
	}
}

// ExpiredLeases returns how many leases expired in the store before their
// holders released or settled them, counted when their records are
// dropped (at the next lease call after their expiry): a count that grows
// is a leak of leases.
func (s *Store) ExpiredLeases() int64 {
	s.leases.mu.Lock()
	defer s.leases.mu.Unlock()
	s.leases.sweep(s.micros())
	return s.leases.expired
}
