package memstore

import (
	"container/heap"
	"context"
	"hash/maphash"
	"math/bits"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicerate/sluice/store"
)

// The scheduler. Each schedule's queue (one per combination of its By
// values) is a list of reservations in slot order. Reservations never
// overlap, so the list is also in order of their ends, and the next free slot
// is the end of the last one. Reservations whose slot has passed are dropped,
// except the latest of them, whose end may still be in the future and is
// needed when every pending reservation after it is cancelled. A queue whose
// last end has passed is as good as absent and is dropped; every shard keeps
// its queues in a min-heap by expiry, and each write drops a bounded number
// of expired ones, so memory stays bounded by the queues in use.

var _ store.Scheduler = (*Store)(nil)

// queues holds the schedules' queues, sharded like the windows: a queue is
// locked on its own shard, so reservations on different queues rarely
// contend. It is set up on first use.
type queues struct {
	once   sync.Once
	seed   maphash.Seed
	shards []queueShard
	mask   uint64
	ids    atomic.Uint64 // the last reservation ID given
}

// qkey names one queue: the schedule's name and the encoded values of its By
// attributes.
type qkey struct {
	name, values string
}

type queueShard struct {
	mu     sync.Mutex
	queues map[qkey]*queue
	expiry expiryHeap[queueRef]
	_      [64]byte // keep shards on separate cache lines
}

// queue is one schedule queue.
type queue struct {
	res     []reservation // in slot order; res[0] may have passed
	expires int64         // the end of the last reservation, µs
}

// reservation is one held slot: [slot, end) in µs.
type reservation struct {
	id        uint64
	slot, end int64
}

// evictQueuesPerWrite bounds the queues examined by one write.
const evictQueuesPerWrite = 4

func (qs *queues) init(n int) {
	qs.once.Do(func() {
		n = 1 << bits.Len(uint(max(n, 1)-1))
		qs.seed = maphash.MakeSeed()
		qs.shards = make([]queueShard, n)
		qs.mask = uint64(n - 1)
		for i := range qs.shards {
			qs.shards[i].queues = make(map[qkey]*queue)
		}
	})
}

// lockQueue locks and returns the shard of the queue at k. The caller
// unlocks it.
func (s *Store) lockQueue(k qkey) *queueShard {
	qs := &s.queues
	qs.init(len(s.shards))
	sh := &qs.shards[maphash.Comparable(qs.seed, k)&qs.mask]
	sh.mu.Lock()
	return sh
}

// live returns the queue at k, dropping it first when it has expired by now.
// It drops the reservations that have passed, except the latest of them.
func (sh *queueShard) live(k qkey, now int64) *queue {
	q := sh.queues[k]
	if q == nil {
		return nil
	}
	if q.expires <= now {
		delete(sh.queues, k)
		return nil
	}
	// res[:i] have passed; keep res[i-1], the latest of them.
	i := 0
	for i < len(q.res) && q.res[i].slot < now {
		i++
	}
	if i > 1 {
		n := copy(q.res, q.res[i-1:])
		q.res = q.res[:n]
	}
	return q
}

// length returns the queue's length at now: the reservations that hold the
// schedule, those whose slot has not passed and the one whose slot has but
// whose time has not ended (only res[0] can be that one, as live keeps one
// passed reservation at most).
func (q *queue) length(now int64) int64 {
	if q == nil {
		return 0
	}
	n := int64(len(q.res))
	if n > 0 && q.res[0].end <= now {
		n--
	}
	return n
}

// Reserve implements store.Scheduler.
func (s *Store) Reserve(ctx context.Context, req *store.ReserveRequest) (store.Reservation, error) {
	if err := s.enter(ctx); err != nil {
		return store.Reservation{}, err
	}
	k := qkey{name: req.Queue.Schedule, values: encodeValues(req.Queue.Values)}
	sh := s.lockQueue(k)
	defer sh.mu.Unlock()

	now := s.micros()
	q := sh.live(k, now)
	slot := now
	if q != nil {
		slot = max(now, q.expires)
	}
	delay := slot - now
	r := store.Reservation{
		Delay: time.Duration(delay) * time.Microsecond,
		Slot:  time.UnixMicro(slot),
		Queue: q.length(now),
	}
	switch {
	case delay > req.MaxDelay.Microseconds():
		r.Reason = store.ReasonDelay
		return r, nil
	case req.MaxQueue > 0 && r.Queue >= req.MaxQueue:
		r.Reason = store.ReasonQueue
		return r, nil
	}
	id := s.queues.ids.Add(1)
	end := slot + req.Cost*req.Interval.Microseconds()
	if q == nil {
		q = &queue{}
		sh.queues[k] = q
		heap.Push(&sh.expiry, expiring[queueRef]{item: queueRef{k: k, q: q}, at: end})
	}
	q.res = append(q.res, reservation{id: id, slot: slot, end: end})
	q.expires = end
	sh.evict(now)
	r.OK, r.ID = true, strconv.FormatUint(id, 10)
	r.Queue++
	return r, nil
}

// Cancel implements store.Scheduler.
func (s *Store) Cancel(ctx context.Context, req *store.CancelRequest) (bool, error) {
	if err := s.enter(ctx); err != nil {
		return false, err
	}
	id, err := strconv.ParseUint(req.ID, 10, 64)
	if err != nil {
		return false, nil // not an ID this store gave
	}
	k := qkey{name: req.Queue.Schedule, values: encodeValues(req.Queue.Values)}
	sh := s.lockQueue(k)
	defer sh.mu.Unlock()

	now := s.micros()
	q := sh.live(k, now)
	if q == nil {
		return false, nil
	}
	for i, r := range q.res {
		if r.id != id {
			continue
		}
		if r.slot < now {
			return false, nil // passed
		}
		q.res = append(q.res[:i], q.res[i+1:]...)
		if len(q.res) == 0 || q.res[len(q.res)-1].end <= now {
			delete(sh.queues, k)
			return true, nil
		}
		q.expires = q.res[len(q.res)-1].end
		return true, nil
	}
	return false, nil
}

// evict drops up to evictQueuesPerWrite queues that have expired by now.
// The caller holds sh.mu.
func (sh *queueShard) evict(now int64) {
	for range evictQueuesPerWrite {
		if len(sh.expiry) == 0 || sh.expiry[0].at > now {
			return
		}
		e := heap.Pop(&sh.expiry).(expiring[queueRef])
		switch {
		case sh.queues[e.item.k] != e.item.q:
			// Dropped already, perhaps replaced by a queue with its own entry.
		case e.item.q.expires > now:
			// Written since: wait for its new expiry.
			e.at = e.item.q.expires
			heap.Push(&sh.expiry, e)
		default:
			delete(sh.queues, e.item.k)
		}
	}
}

// queueCount returns the number of queues held, live or not yet dropped.
func (s *Store) queueCount() int {
	qs := &s.queues
	qs.init(len(s.shards))
	n := 0
	for i := range qs.shards {
		sh := &qs.shards[i]
		sh.mu.Lock()
		n += len(sh.queues)
		sh.mu.Unlock()
	}
	return n
}

// queueRef is a queue in a shard's expiry heap.
type queueRef struct {
	k qkey
	q *queue
}
