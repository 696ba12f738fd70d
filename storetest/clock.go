package storetest

import (
	"slices"
	"sync"
	"time"
)

// Clock is a manual clock for stores and Limiters under test: it moves
// only when the test moves it, and its timers fire when it is moved past
// them. It is a sluice.Clock, and its Now is a store's clock
// (memstore.Config.Clock). Its zero value is not usable; NewClock returns
// one. It is safe for concurrent use.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []timer
	changed sync.Cond // signalled when a timer is added
}

// timer is a channel After returned, and when it fires.
type timer struct {
	at time.Time
	ch chan time.Time
}

// NewClock returns a clock frozen at t, truncated to the microsecond.
func NewClock(t time.Time) *Clock {
	c := &Clock{now: t.Truncate(time.Microsecond)}
	c.changed.L = &c.mu
	return c
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (backward when d < 0) and fires
// the timers it reaches.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.move(c.now.Add(d))
}

// Set moves the clock to t, truncated to the microsecond, and fires the
// timers it reaches.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.move(t.Truncate(time.Microsecond))
}

// move sets the time to t and fires the timers due at t. c.mu is held.
func (c *Clock) move(t time.Time) {
	c.now = t
	kept := c.timers[:0]
	for _, tm := range c.timers {
		if tm.at.After(t) {
			kept = append(kept, tm)
			continue
		}
		tm.ch <- t
	}
	clear(c.timers[len(kept):])
	c.timers = kept
}

// After returns a channel that receives the clock's time once the clock
// is moved to or past now+d; at once when d <= 0. A Limiter's Wait sleeps
// on it, so a test decides when the sleep ends.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now
		return ch
	}
	c.timers = append(c.timers, timer{at: c.now.Add(d), ch: ch})
	c.changed.Broadcast()
	return ch
}

// AwaitTimers blocks until n timers are waiting to fire: the test's way
// to know that the code under test went to sleep on the clock.
func (c *Clock) AwaitTimers(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.timers) < n {
		c.changed.Wait()
	}
}

// Timers returns when each waiting timer fires, soonest first.
func (c *Clock) Timers() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	at := make([]time.Time, len(c.timers))
	for i, tm := range c.timers {
		at[i] = tm.at
	}
	slices.SortFunc(at, time.Time.Compare)
	return at
}
