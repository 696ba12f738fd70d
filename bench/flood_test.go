package main

import (
	"testing"
	"time"
)

func TestOverAdmissions(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(key int32, send, reply time.Duration) admission {
		return admission{key: key, send: t0.Add(send), reply: t0.Add(reply)}
	}
	ms := time.Millisecond
	for _, tc := range []struct {
		name   string
		adm    []admission
		over   int
		margin time.Duration
	}{
		{"two a window", []admission{at(1, 0, ms), at(1, 10*ms, 11*ms), at(1, 1000*ms, 1001*ms)}, 0, 1 * ms},
		// The third admission's decision may have come after 1s: not
		// certainly over.
		{"uncertain", []admission{at(1, 0, ms), at(1, 10*ms, 11*ms), at(1, 999*ms, 1001*ms)}, 0, 1 * ms},
		{"certainly three", []admission{at(1, 0, ms), at(1, 10*ms, 11*ms), at(1, 998*ms, 999*ms)}, 1, -1 * ms},
		{"keys apart", []admission{at(2, 0, ms), at(1, 10*ms, 11*ms), at(2, 20*ms, 21*ms), at(1, 30*ms, 31*ms)}, 0, -1},
		// Sorted by send, the latest reply among the three counts.
		{"late reply", []admission{at(1, 0, 1200*ms), at(1, 10*ms, 11*ms), at(1, 20*ms, 21*ms)}, 0, 200 * ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			over, margin := overAdmissions(tc.adm, 2, time.Second)
			if over != tc.over || margin != tc.margin {
				t.Errorf("over %d margin %v, want %d and %v", over, margin, tc.over, tc.margin)
			}
		})
	}
}
