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
