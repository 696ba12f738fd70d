package main

import "testing"

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
