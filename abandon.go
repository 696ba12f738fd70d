package sluice

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/sluicerate/sluice/store"
)

// Abandoning the leases of failed acquires.
//
// An Acquire whose store call failed (the deadline, a lost connection, a
// refusal) has no lease, but the store may have taken one all the same:
// the call was sent, and a frozen Redis runs it when it wakes. Nobody
// holds that lease, so its slot would stay taken until its lease time
// passed. The Limiter keeps such a lease's id and windows, and once the
// store answers again sends Finish with store.LeaseAbandon: it ends the
// lease if the store took it (a settle to 0: its slots freed, its
// estimate refunded), and otherwise leaves a tombstone of the id for the
// lease time, so that the acquire, if it reaches the store later, takes
// nothing. One goroutine per Limiter drains the queue, started when an
// entry is queued and gone when the queue is empty; it sends with the
// Limiter's deadline (Config.Timeout; abandonBackoffMax when it has none,
// since an abandon has no caller), and retries while the store fails,
// backing off from abandonBackoff to abandonBackoffMax.
//
// An entry is given up when the lease, had the store taken it, has
// expired: its lease time after the acquire failed, on the Limiter's
// clock, or after the last abandon that met its deadline, whichever is
// later (a store that does not answer may not have run the acquire yet,
// and runs it when it answers again, with the lease time from then; the
// last deadline met is the Limiter's, not the entry's, since with many
// entries each is sent only once in a while). The queue holds at most
// abandonMax entries: a new one past that drops the oldest. A
// store.Local's calls have no unknown outcome, and queue nothing.

const (
	abandonMax        = 10_000
	abandonBackoff    = 50 * time.Millisecond
	abandonBackoffMax = time.Second
)

// AbandonStats are what a Limiter did with the leases of acquires whose
// store call failed, which the store may have taken all the same (see
// Limiter.Acquire).
type AbandonStats struct {
	// Pending is the number of leases waiting for the store to answer an
	// abandon: 0 once every one queued was answered or given up.
	Pending int

	// Abandoned counts the abandons the store answered, and Held those of
	// them that found the lease taken, and ended it: slots that would
	// otherwise have been held by nobody until their lease time. (An
	// abandon that met its deadline may have run all the same, and ended
	// the lease; it is not counted.)
	Abandoned, Held int64

	// Expired counts the leases given up because their lease time passed
	// before the store answered (a lease the store took has expired by
	// then), and Dropped those given up because the queue held 10,000, or
	// the store was closed.
	Expired, Dropped int64
}

// abandons is a Limiter's queue of leases to abandon.
type abandons struct {
	mu      sync.Mutex
	queue   []abandonEntry // oldest first
	sending bool           // one more is being sent
	running bool           // a goroutine drains the queue
	stats   AbandonStats   // Pending unused: len(queue), and the one being sent
	silent  time.Time      // when an abandon last met its deadline, on the Limiter's clock
}

// abandonEntry is a lease to abandon.
type abandonEntry struct {
	req   store.FinishRequest // Op LeaseAbandon, TTL the lease time
	until time.Time           // on the Limiter's clock: the lease has expired by then
}

// AbandonStats returns what the Limiter did with the leases of failed
// acquires so far; all zero for a store.Local.
func (l *Limiter) AbandonStats() AbandonStats {
	a := &l.abandons
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.stats
	st.Pending = len(a.queue)
	if a.sending {
		st.Pending++
	}
	return st
}

// abandon queues the lease id that req's Acquire may have taken, of lease
// time ttl, and starts the goroutine that drains the queue unless it runs.
func (l *Limiter) abandon(req *store.Request, id string, ttl time.Duration) {
	e := abandonEntry{req: finishOf(req, id), until: l.clock().Now().Add(ttl)}
	e.req.Op, e.req.TTL = store.LeaseAbandon, ttl
	a := &l.abandons
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.queue) >= abandonMax {
		a.queue[0] = abandonEntry{}
		a.queue = a.queue[1:]
		a.stats.Dropped++
	}
	a.queue = append(a.queue, e)
	if !a.running {
		a.running = true
		go l.drainAbandons()
	}
}

// drainAbandons sends the queue's abandons to the store, oldest first,
// until the queue is empty. An abandon that fails goes to the end of the
// queue, and the next is sent after a backoff that doubles while they
// fail; one the store answered resets it.
func (l *Limiter) drainAbandons() {
	a := &l.abandons
	lr, err := l.leaser()
	if err != nil { // never: only an Acquire that called the store queues
		a.mu.Lock()
		a.stats.Dropped += int64(len(a.queue))
		a.queue, a.running = nil, false
		a.mu.Unlock()
		return
	}
	wait, deadline := abandonBackoff, l.timeout()
	if deadline <= 0 {
		deadline = abandonBackoffMax // the Limiter's calls have none but their callers'
	}
	for {
		e, ok := a.next(l.clock().Now())
		if !ok {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		st, err := lr.Finish(ctx, &e.req)
		cancel()
		if err == nil || errors.Is(err, store.ErrClosed) {
			a.done(err == nil, st.Held)
			wait = abandonBackoff
			continue
		}
		a.requeue(e, errors.Is(err, context.DeadlineExceeded), l.clock().Now())
		time.Sleep(wait)
		wait = min(2*wait, abandonBackoffMax)
	}
}

// next returns the oldest entry, taking it off the queue, after dropping
// those expired at now; false, and the drain's end, when none is left.
func (a *abandons) next(now time.Time) (abandonEntry, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for len(a.queue) > 0 {
		e := a.queue[0]
		a.queue[0] = abandonEntry{}
		a.queue = a.queue[1:]
		if now.Before(e.until) || now.Before(a.silent.Add(e.req.TTL)) {
			a.sending = true
			return e, true
		}
		a.stats.Expired++
	}
	a.queue = nil
	a.running = false
	return abandonEntry{}, false
}

// done counts an abandon the store answered (sent) that found its lease
// held or not; an abandon not sent (the store is closed) is dropped.
func (a *abandons) done(sent, held bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sending = false
	switch {
	case !sent:
		a.stats.Dropped++
	case held:
		a.stats.Held++
		fallthrough
	default:
		a.stats.Abandoned++
	}
}

// requeue puts e, whose abandon failed at now (meeting its deadline:
// silent), back at the end of the queue, unless it is full.
func (a *abandons) requeue(e abandonEntry, silent bool, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sending = false
	if silent {
		a.silent = now
	}
	if len(a.queue) >= abandonMax {
		a.stats.Dropped++
		return
	}
	a.queue = append(a.queue, e)
}
