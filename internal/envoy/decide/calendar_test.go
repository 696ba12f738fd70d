package decide_test

import (
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"

	"github.com/sluicerate/sluice/internal/envoy"
	"github.com/sluicerate/sluice/internal/envoy/decide"
	"github.com/sluicerate/sluice/store"
)

const calendarFile = `domain: d
descriptors:
  - key: day
    rate_limit: {unit: day, requests_per_unit: 2}
  - key: week
    rate_limit: {unit: week, requests_per_unit: 2}
  - key: month
    rate_limit: {unit: month, requests_per_unit: 2}
  - key: year
    rate_limit: {unit: year, requests_per_unit: 2}
  - key: hour
    rate_limit: {unit: hour, requests_per_unit: 2}
`

// TestCalendarUnitsWindows: without the option, envoyproxy/ratelimit's
// units are sliding windows (a month of 30 days, a year of 365); with
// CalendarUnits, day, week, month and year are calendar periods in UTC
// (weeks from Monday), the hour stays a window, and a descriptor's own
// limit follows the same rule.
func TestCalendarUnitsWindows(t *testing.T) {
	t.Parallel()
	own := &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "own", Value: "x"}},
		Limit: &ratelimitv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 3, Unit: typev3.RateLimitUnit_MONTH}}
	r := req("d", 1, [][2]string{{"day", "x"}}, [][2]string{{"week", "x"}}, [][2]string{{"month", "x"}}, [][2]string{{"year", "x"}}, [][2]string{{"hour", "x"}})
	r.Descriptors = append(r.Descriptors, own)
	for _, calendar := range []bool{false, true} {
		cfg, err := envoy.Parse([]envoy.Source{{Name: "a.yaml", Data: []byte(calendarFile)}}, envoy.LoadOptions{CalendarUnits: calendar})
		if err != nil {
			t.Fatal(err)
		}
		got, err := decide.Windows(cfg, r)
		if err != nil {
			t.Fatal(err)
		}
		type want struct {
			period store.Period
			window time.Duration
		}
		wants := []want{{store.Day, 24 * time.Hour}, {store.Week, 7 * 24 * time.Hour}, {store.Month, 30 * 24 * time.Hour},
			{store.Year, 365 * 24 * time.Hour}, {store.NoPeriod, time.Hour}, {store.Month, 30 * 24 * time.Hour}}
		if len(got.Checks) != len(wants) {
			t.Fatalf("calendar %v: %d checks, want %d", calendar, len(got.Checks), len(wants))
		}
		for i, w := range wants {
			c := got.Checks[i]
			switch {
			case !calendar || w.period == store.NoPeriod:
				if c.Algorithm != store.Log || c.Window != w.window || !c.Calendar.IsZero() {
					t.Errorf("calendar %v: check %d (%s): %v window %v calendar %v, want a log of %v", calendar, i, c.Rule, c.Algorithm, c.Window, c.Calendar, w.window)
				}
			default:
				wantCal := store.Calendar{Period: w.period, WeekStart: time.Monday}
				if c.Algorithm != store.Periodic || c.Window != store.MaxPeriodLength || c.Calendar != wantCal {
					t.Errorf("calendar %v: check %d (%s): %v window %v calendar %+v, want calendar %+v", calendar, i, c.Rule, c.Algorithm, c.Window, c.Calendar, wantCal)
				}
			}
		}
	}
}
