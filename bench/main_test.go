package main

import (
	"strings"
	"testing"
)

// TestPicks: -only picks the contenders whose name contains it, or one of
// its comma-separated parts; empty picks every one.
func TestPicks(t *testing.T) {
	for _, tc := range []struct {
		only, name string
		want       bool
	}{
		{"", "sluice gcra", true},
		{"gcra", "sluice gcra", true},
		{"gcra", "sluice sliding-counter", false},
		{"sliding-counter,calendar,credits", "sluice calendar (month, history 12)", true},
		{"sliding-counter,calendar,credits", "sluice credits (refilled monthly)", true},
		{"sliding-counter,calendar,credits", "sluice gcra", false},
		{"gcra,", "sluice log", false},
	} {
		b := &bench{only: tc.only}
		if got := b.picks(tc.name); got != tc.want {
			t.Errorf("-only %q picks %q: %v, want %v", tc.only, tc.name, got, tc.want)
		}
	}
}

// TestAllowVerdict: the memory section's verdict on Limiter.Allow holds
// at 1.5× x/time/rate and no allocation, and says NO past either.
func TestAllowVerdict(t *testing.T) {
	for _, tc := range []struct {
		ratio, allocs float64
		want          string
	}{
		{1.5, 0, "At most 1.5×: yes; no allocation: yes."},
		{1.51, 0, "At most 1.5×: NO; no allocation: yes."},
		{0.9, 0.01, "At most 1.5×: yes; no allocation: NO."},
		{0.9, 0.000001, "At most 1.5×: yes; no allocation: yes."},
	} {
		if got := allowVerdict(tc.ratio, tc.allocs); !strings.HasSuffix(got, tc.want) {
			t.Errorf("allowVerdict(%v, %v) = %q, want it to end %q", tc.ratio, tc.allocs, got, tc.want)
		}
	}
}
