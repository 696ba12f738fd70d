package main

import (
	"math"
	"testing"
)

// TestQuotaVerdict: a quota row's ratio is the median of its rounds'
// ratios to the sliding counter's same round; the line says yes only when
// every quota row that ran has a ratio of at most 1, and is empty without
// the sliding counter or without quota rows.
func TestQuotaVerdict(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		name    string
		figures map[string][]float64
		want    string
	}{
		{"one round each, both cheaper or equal", map[string][]float64{slidingCounterRow: {6.4}, calendarRow: {6.08}, creditsRow: {6.4}},
			"Calendar and credits rules, Redis CPU µs per decision against the sliding counter's 6.4: " +
				calendarRow + " 6.1 (0.95×); " + creditsRow + " 6.4 (1.00×). At most the sliding counter's: yes."},
		{"one dearer", map[string][]float64{slidingCounterRow: {6.4}, calendarRow: {6.08}, creditsRow: {6.72}},
			"Calendar and credits rules, Redis CPU µs per decision against the sliding counter's 6.4: " +
				calendarRow + " 6.1 (0.95×); " + creditsRow + " 6.7 (1.05×). At most the sliding counter's: NO."},
		// Round 2 is slow for everyone: the ratios of the same round are
		// 0.9, 0.9 and 1.5, whose median is 0.9, while the medians of
		// the figures alone (10 against 10) would say 1.
		{"rounds paired", map[string][]float64{slidingCounterRow: {10, 20, 8}, calendarRow: {9, 18, 12}},
			"Calendar and credits rules, Redis CPU µs per decision against the sliding counter's 10.0: " +
				calendarRow + " 12.0 (0.90×). At most the sliding counter's: yes."},
		{"a round missing", map[string][]float64{slidingCounterRow: {10, nan, 10}, creditsRow: {11, 5, 12}},
			"Calendar and credits rules, Redis CPU µs per decision against the sliding counter's 10.0: " +
				creditsRow + " 11.0 (1.15×). At most the sliding counter's: NO."},
		{"no sliding counter", map[string][]float64{calendarRow: {6.1}, creditsRow: {6.5}}, ""},
		{"no quota rows", map[string][]float64{slidingCounterRow: {6.4}, "sluice gcra": {5.2}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := quotaVerdict("Redis CPU µs", 1, tc.figures); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}
