package sluice

import (
	"sync"
	"time"
)

// breaker is a circuit breaker over a store: closed, it lets every call
// through and counts consecutive failures; open, it lets none through until
// its cool-down ends; then, half-open, it lets exactly one probe through,
// whose success closes it and whose failure opens it again. Its zero value
// with failures 0 never opens. It is safe for concurrent use.
type breaker struct {
	failures int           // consecutive failures that open it; <= 0: never
	coolDown time.Duration // how long it stays open

	mu      sync.Mutex
	count   int       // consecutive failures so far
	open    bool      // open or half-open
	until   time.Time // when open: the end of the cool-down
	probing bool      // half-open: a probe is in flight
}

func newBreaker(cfg Breaker) *breaker {
	b := &breaker{failures: cfg.Failures, coolDown: cfg.CoolDown}
	if b.failures == 0 {
		b.failures = DefaultBreakerFailures
	}
	if b.coolDown <= 0 {
		b.coolDown = DefaultBreakerCoolDown
	}
	return b
}

// admit reports whether a call may go to the store at now. A call admitted
// after the cool-down is the probe: its caller must report it with record
// or release.
func (b *breaker) admit(now time.Time) bool {
	if b.failures < 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.open {
		return true
	}
	if now.Before(b.until) || b.probing {
		return false
	}
	b.probing = true
	return true
}

// record reports the outcome of an admitted call at now.
func (b *breaker) record(now time.Time, ok bool) {
	if b.failures < 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if ok {
		b.count, b.open, b.probing = 0, false, false
		return
	}
	b.count++
	if b.probing || b.count >= b.failures {
		b.open, b.probing, b.until = true, false, now.Add(b.coolDown)
	}
}

// release reports an admitted call that gave no verdict on the store (the
// caller's context ended, or the input was bad): a probe may be retried.
func (b *breaker) release() {
	b.mu.Lock()
	b.probing = false
	b.mu.Unlock()
}

// state returns the breaker's state at now, as Limiter.Circuit names it.
func (b *breaker) state(now time.Time) string {
	if b.failures < 0 {
		return "closed"
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case !b.open:
		return "closed"
	case now.Before(b.until):
		return "open"
	}
	return "half_open"
}
