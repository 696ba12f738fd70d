package storetest

import (
	"testing"
	"time"
)

func TestClock(t *testing.T) {
	t.Parallel()
	c := NewClock(T0.Add(1500 * time.Nanosecond))
	if got, want := c.Now(), T0.Add(time.Microsecond); !got.Equal(want) {
		t.Fatalf("NewClock truncates to %v, want %v", got, want)
	}
	c.Advance(time.Second)
	if got, want := c.Now(), T0.Add(time.Second+time.Microsecond); !got.Equal(want) {
		t.Errorf("after Advance: %v, want %v", got, want)
	}
	c.Set(T0.Add(2*time.Second + 999*time.Nanosecond))
	if got, want := c.Now(), T0.Add(2*time.Second); !got.Equal(want) {
		t.Errorf("after Set: %v, want %v", got, want)
	}
}

// TestClockTimers: a timer fires when the clock is moved to or past it,
// not before; one of d <= 0 fires at once; AwaitTimers returns once the
// timers are set.
func TestClockTimers(t *testing.T) {
	t.Parallel()
	c := NewClock(T0)
	if got := <-c.After(0); !got.Equal(T0) {
		t.Errorf("After(0) fired with %v, want %v", got, T0)
	}
	set := make(chan (<-chan time.Time))
	go func() { set <- c.After(500 * time.Millisecond) }()
	c.AwaitTimers(1)
	ch := <-set
	later := c.After(time.Second)
	if at := c.Timers(); len(at) != 2 || !at[0].Equal(T0.Add(500*time.Millisecond)) || !at[1].Equal(T0.Add(time.Second)) {
		t.Errorf("Timers = %v, want T0+500ms and T0+1s", at)
	}
	c.Advance(499 * time.Millisecond)
	select {
	case got := <-ch:
		t.Fatalf("a 500ms timer fired at %v, after 499ms", got)
	default:
	}
	c.Advance(time.Millisecond)
	if got := <-ch; !got.Equal(T0.Add(500 * time.Millisecond)) {
		t.Errorf("the 500ms timer fired with %v", got)
	}
	c.Set(T0.Add(time.Hour))
	if got := <-later; !got.Equal(T0.Add(time.Hour)) {
		t.Errorf("the 1s timer fired with %v, want the time set", got)
	}
	if at := c.Timers(); len(at) != 0 {
		t.Errorf("timers left: %v", at)
	}
}
