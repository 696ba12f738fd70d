package soak

import (
	"testing"
	"time"
)

const ms = int64(time.Millisecond)

// at returns an admission sent at ms milliseconds that took lat ms.
func at(sentMS, latMS int64) Interval {
	return Interval{Sent: sentMS * ms, Replied: (sentMS + latMS) * ms}
}

func total(os []Overage) (worst int64) {
	for _, o := range os {
		worst = max(worst, o.Excess)
	}
	return worst
}

func TestSlidingOver(t *testing.T) {
	for _, tc := range []struct {
		name  string
		adm   []Interval
		limit int64
		want  int64 // the largest excess
	}{
		{"at the limit", []Interval{at(0, 1), at(100, 1), at(200, 1)}, 3, 0},
		{"one over", []Interval{at(0, 1), at(100, 1), at(200, 1), at(300, 1)}, 3, 1},
		{"two over", []Interval{at(0, 1), at(1, 1), at(2, 1), at(3, 1), at(4, 1)}, 3, 2},
		// The first and the fourth are 1000 ms apart: the window (T-1s, T]
		// never holds both.
		{"a window apart", []Interval{at(0, 1), at(500, 1), at(600, 1), at(1000, 1)}, 3, 0},
		// Sent at 0, answered at 2: recorded at any instant in [0, 2]; the
		// fourth, answered at 999 + 2 = 1001, may lie a whole window after
		// it. Not certain.
		{"uncertain by latency", []Interval{at(0, 2), at(500, 1), at(600, 1), at(999, 2)}, 3, 0},
		{"certain despite latency", []Interval{at(0, 2), at(500, 1), at(600, 1), at(990, 2)}, 3, 1},
		{"slow answer spans the window", []Interval{at(0, 1), at(10, 1), at(20, 1), at(30, 1000)}, 3, 0},
		// A minimum gap of 1 s is one admission per window of 1 s.
		{"gap kept", []Interval{at(0, 1), at(1001, 1), at(2002, 1)}, 1, 0},
		{"gap broken", []Interval{at(0, 1), at(1001, 1), at(1500, 1)}, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			SortAdmissions(tc.adm)
			if got := total(SlidingOver(tc.adm, tc.limit, time.Second)); got != tc.want {
				t.Errorf("excess %d, want %d", got, tc.want)
			}
		})
	}
}

func TestBucketOver(t *testing.T) {
	// A bucket of 2 refilled one unit per 100 ms.
	for _, tc := range []struct {
		name string
		adm  []Interval
		want int64
	}{
		{"burst", []Interval{at(0, 1), at(1, 1)}, 0},
		{"burst plus one", []Interval{at(0, 1), at(1, 1), at(2, 1)}, 1},
		{"burst then the rate", []Interval{at(0, 1), at(1, 1), at(101, 1), at(202, 1), at(303, 1)}, 0},
		{"rate broken", []Interval{at(0, 1), at(1, 1), at(101, 1), at(150, 1)}, 1},
		// Idling refills the bucket to its burst, no more.
		{"after idling", []Interval{at(0, 1), at(400, 1), at(401, 1)}, 0},
		{"idling saves no more than the burst", []Interval{at(0, 1), at(400, 1), at(401, 1), at(402, 1)}, 1},
		{"uncertain by latency", []Interval{at(0, 1), at(1, 1), at(99, 2)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			SortAdmissions(tc.adm)
			if got := total(BucketOver(tc.adm, 2, 100*time.Millisecond, time.Second)); got != tc.want {
				t.Errorf("excess %d, want %d", got, tc.want)
			}
		})
	}
}

func TestMissing(t *testing.T) {
	adm := []Interval{at(0, 1), at(100, 1), at(200, 1), at(300, 5)}
	SortAdmissions(adm)
	for _, tc := range []struct {
		name string
		look Look
		want int64
	}{
		{"all held", Look{Sent: 400 * ms, Replied: 401 * ms, Held: 4}, 0},
		{"one lost", Look{Sent: 400 * ms, Replied: 401 * ms, Held: 3}, 1},
		{"more held than certain", Look{Sent: 400 * ms, Replied: 401 * ms, Held: 6}, -2},
		// The fourth was answered after the look was sent: maybe not yet
		// recorded.
		{"answer after the look", Look{Sent: 302 * ms, Replied: 303 * ms, Held: 3}, 0},
		// At 1000.5 ms the first (sent at 0) may have left the window.
		{"oldest may have left", Look{Sent: 1000 * ms, Replied: 1000*ms + ms/2, Held: 3}, 0},
		{"oldest left", Look{Sent: 1050 * ms, Replied: 1051 * ms, Held: 2}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Missing(adm, time.Second, tc.look); got != tc.want {
				t.Errorf("Missing = %d, want %d", got, tc.want)
			}
		})
	}
}
