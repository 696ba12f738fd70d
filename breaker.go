package sluice

import (
	"strings"
	"sync"
	"time"
)

// Breaker configures a Limiter's circuit breaker. The zero value is the
// default. A store.Sharded (a Redis Cluster's store) has a breaker per
// shard with these settings: a master that fails opens the circuit for
// its own windows, and the others' are still decided.
type Breaker struct {
	// Failures is the number of consecutive store failures that open the
	// circuit. Default 5; a negative value disables the breaker.
	Failures int

	// CoolDown is how long an open circuit answers without calling the
	// store before one request probes it. Default 1s.
	CoolDown time.Duration
}

// Defaults of Breaker's fields.
const (
	DefaultBreakerFailures = 5
	DefaultBreakerCoolDown = time.Second
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

// maxShards bounds the breakers a Limiter keeps per shard; the shards past
// it share the store's one breaker. A Cluster has a few dozen masters at
// most, a policy's requests need a few sets of them (the notifier's caps:
// the global cap's master with each of the others), and a master that
// leaves keeps its breaker.
const maxShards = 1024

// breakers are a Limiter's circuit breakers: one for the store, and for a
// store.Sharded one per shard it names, so that one master of a Cluster
// that fails opens the circuit for the windows it keeps and not for all.
// It is safe for concurrent use.
type breakers struct {
	cfg   Breaker
	store *breaker // a store that is not sharded, and a shard not known ("")

	mu     sync.RWMutex
	shards map[string]*breaker
}

func newBreakers(cfg Breaker) *breakers {
	return &breakers{cfg: cfg, store: newBreaker(cfg), shards: map[string]*breaker{}}
}

// of returns shard's breaker, made on first use.
func (bs *breakers) of(shard string) *breaker {
	if shard == "" {
		return bs.store
	}
	bs.mu.RLock()
	b, ok := bs.shards[shard]
	bs.mu.RUnlock()
	if ok {
		return b
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if b, ok = bs.shards[shard]; !ok {
		if len(bs.shards) >= maxShards {
			return bs.store
		}
		b = newBreaker(bs.cfg)
		bs.shards[shard] = b
	}
	return b
}

// state returns the state of the most open of the breakers at now: "open"
// when any is, else "half_open" when any is, else "closed".
func (bs *breakers) state(now time.Time) string {
	rank := func(s string) int { return strings.Index("closed half_open open", s) }
	worst := bs.store.state(now)
	bs.mu.RLock()
	defer bs.mu.RUnlock()
	for _, b := range bs.shards {
		if s := b.state(now); rank(s) > rank(worst) {
			worst = s
		}
	}
	return worst
}
