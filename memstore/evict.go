package memstore

import "math"

// Eviction. Every shard keeps, per distinct TTL, a FIFO of the windows in the
// order they were created. A window's expiry only moves forward, and windows
// of one TTL expire in creation order unless refreshed, so the head of each
// FIFO is the first candidate: a write pops heads whose queued expiry has
// passed, drops the window if it really expired, and re-queues it with its
// new expiry if it was written since. Each write does a bounded amount of this
// work, and a window is dropped at most one pass after it expired, so memory
// stays bounded by the windows written within their TTL.

// evictPerWrite bounds the windows examined by one write.
const evictPerWrite = 4

// queued is a window waiting in an expiry FIFO.
type queued struct {
	w       *window
	expires int64 // the window's expiry when it was queued, µs
}

// fifo is the expiry queue of the windows of one TTL.
type fifo struct {
	ttl   int64
	items []queued // items[head:] wait, oldest first
	head  int
}

// enqueue adds a newly created window to the FIFO of its TTL.
func (sh *shard) enqueue(w *window, ttl int64) {
	q := sh.fifo(ttl)
	q.items = append(q.items, queued{w: w, expires: w.expires})
	sh.due = min(sh.due, w.expires)
}

func (sh *shard) fifo(ttl int64) *fifo {
	for i := range sh.fifos {
		if sh.fifos[i].ttl == ttl {
			return &sh.fifos[i]
		}
	}
	sh.fifos = append(sh.fifos, fifo{ttl: ttl})
	return &sh.fifos[len(sh.fifos)-1]
}

// evict examines up to evictPerWrite expired FIFO heads and drops the windows
// that have expired by now. Before sh.due, the earliest expiry of the
// FIFOs' heads when it last looked (or of a window queued since), none
// has expired: it returns without reading the FIFOs, which most writes do.
func (sh *shard) evict(now int64) {
	if now < sh.due {
		return
	}
	budget := evictPerWrite
	for i := range sh.fifos {
		q := &sh.fifos[i]
		for budget > 0 && q.head < len(q.items) && q.items[q.head].expires <= now {
			it := q.items[q.head]
			q.items[q.head] = queued{}
			q.head++
			budget--
			switch {
			case it.w.expires > now:
				// Written since it was queued: wait for its new expiry.
				it.expires = it.w.expires
				q.items = append(q.items, it)
			case it.w.live:
				sh.remove(it.w)
			}
		}
		if q.head > 64 && q.head*2 >= len(q.items) {
			n := copy(q.items, q.items[q.head:])
			clear(q.items[n:])
			q.items, q.head = q.items[:n], 0
		}
	}
	sh.due = math.MaxInt64
	for i := range sh.fifos {
		if q := &sh.fifos[i]; q.head < len(q.items) {
			sh.due = min(sh.due, q.items[q.head].expires)
		}
	}
}
