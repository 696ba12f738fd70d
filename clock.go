package sluice

import "time"

// Clock tells the time and sleeps: Limiter.Wait reads the context's
// deadline and waits for slots with it, the circuit breaker times its
// cool-down and the deny cache its entries with it. The stores keep their
// own clocks.
type Clock interface {
	// Now returns the current time.
	Now() time.Time

	// After returns a channel that receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

// systemClock is the Clock of package time, the default.
type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
