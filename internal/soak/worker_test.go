package soak

import (
	"testing"
	"time"
)

// TestNextTick: a goroutine keeps its phase. An answer within the period
// leaves the next decision one period after the last; a late one skips the
// instants it missed, so that goroutines whose answers came back together
// (a connection dropped, a server resumed) do not go on in step.
func TestNextTick(t *testing.T) {
	const period = 64 * time.Millisecond
	base := time.Unix(1_000, 0)
	tick := func(ms int64) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	for _, tc := range []struct {
		name      string
		last, now int64 // ms from base
		want      int64
	}{
		{"answered within the period", 0, 10, 64},
		{"answered at the next instant", 0, 64, 64},
		{"answered just after it", 0, 65, 128},
		{"answered after a 1 s deadline", 0, 1000, 1024},
		{"another phase, the same answer", 5, 1000, 1029},
	} {
		if got := nextTick(tick(tc.last), tick(tc.now), period); !got.Equal(tick(tc.want)) {
			t.Errorf("%s: next %v after the base, want %v", tc.name, got.Sub(base), tick(tc.want).Sub(base))
		}
	}
}
