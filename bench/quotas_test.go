package main

import "testing"

// TestQuotaVerdict: the line says yes only when every quota row that ran
// costs no more than the sliding counter, and is empty without the
// sliding counter or without quota rows.
func TestQuotaVerdict(t *testing.T) {
	for _, tc := range []struct {
		name    string
		figures map[string]float64
		want    string
	}{
		{"both cheaper", map[string]float64{slidingCounterRow: 6.4, calendarRow: 6.1, creditsRow: 6.4},
			"Calendar and credits rules, Redis CPU µs per decision against the sliding counter's 6.4: " +
				calendarRow + " 6.1 (0.95×); " + creditsRow + " 6.4 (1.00×). At most the sliding counter's: yes."},
		{"one dearer", map[string]float64{slidingCounterRow: 6.4, calendarRow: 6.1, creditsRow: 6.5},
			"Calendar and credits rules, Redis CPU µs per decision against the sliding counter's 6.4: " +
				calendarRow + " 6.1 (0.95×); " + creditsRow + " 6.5 (1.02×). At most the sliding counter's: NO."},
		{"one row", map[string]float64{slidingCounterRow: 8, creditsRow: 9},
			"Calendar and credits rules, Redis CPU µs per decision against the sliding counter's 8.0: " +
				creditsRow + " 9.0 (1.12×). At most the sliding counter's: NO."},
		{"no sliding counter", map[string]float64{calendarRow: 6.1, creditsRow: 6.5}, ""},
		{"no quota rows", map[string]float64{slidingCounterRow: 6.4, "sluice gcra": 5.2}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := quotaVerdict("Redis CPU µs", 1, tc.figures); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}
