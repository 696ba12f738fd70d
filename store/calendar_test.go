package store_test

import (
	"testing"
	"time"

	"github.com/sluicerate/sluice/store"
)

func TestCalendarBounds(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		cal        store.Calendar
		at         time.Time
		start, end time.Time
	}{
		{"month across spring DST", store.Calendar{Period: store.Month, Location: berlin},
			time.Date(2026, 3, 29, 12, 0, 0, 0, berlin),
			time.Date(2026, 2, 28, 23, 0, 0, 0, time.UTC), time.Date(2026, 3, 31, 22, 0, 0, 0, time.UTC)},
		{"february", store.Calendar{Period: store.Month, Location: berlin},
			time.Date(2028, 2, 29, 23, 59, 0, 0, berlin),
			time.Date(2028, 1, 31, 23, 0, 0, 0, time.UTC), time.Date(2028, 2, 29, 23, 0, 0, 0, time.UTC)},
		{"day of 25 hours", store.Calendar{Period: store.Day, Location: ny},
			time.Date(2026, 11, 1, 1, 30, 0, 0, ny),
			time.Date(2026, 11, 1, 4, 0, 0, 0, time.UTC), time.Date(2026, 11, 2, 5, 0, 0, 0, time.UTC)},
		{"week from Monday", store.Calendar{Period: store.Week, WeekStart: time.Monday},
			time.Date(2026, 11, 29, 16, 0, 0, 0, time.UTC),
			time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)},
		{"week from Sunday", store.Calendar{Period: store.Week},
			time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC),
			time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)},
		{"year before 1970", store.Calendar{Period: store.Year},
			time.Date(1969, 6, 1, 0, 0, 0, 0, time.UTC),
			time.Date(1969, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		i, s, e := c.cal.At(c.at.UnixMicro())
		if s != c.start.UnixMicro() || e != c.end.UnixMicro() {
			t.Errorf("%s: period of %v is [%v, %v); want [%v, %v)", c.name, c.at,
				time.UnixMicro(s).UTC(), time.UnixMicro(e).UTC(), c.start, c.end)
		}
		if j, _, _ := c.cal.At(e); j != i+1 {
			t.Errorf("%s: the period at the end has index %d; want %d", c.name, j, i+1)
		}
		if j, _, _ := c.cal.At(e - 1); j != i {
			t.Errorf("%s: the period 1µs before the end has index %d; want %d", c.name, j, i)
		}
	}
}

// TestCalendarSkippedMidnight: in zones whose clocks skip a local midnight
// (America/Santiago on 6 September 2026, America/Havana on 8 March 2026),
// that day starts at the first local time after the gap, 01:00, and every
// instant of the year falls in the period At gives it, whose start is the
// first instant of its local day.
func TestCalendarSkippedMidnight(t *testing.T) {
	for _, tc := range []struct {
		zone string
		day  time.Time // the day whose midnight is skipped, in UTC's fields
	}{
		{"America/Santiago", time.Date(2026, time.September, 6, 0, 0, 0, 0, time.UTC)},
		{"America/Havana", time.Date(2026, time.March, 8, 0, 0, 0, 0, time.UTC)},
	} {
		t.Run(tc.zone, func(t *testing.T) {
			loc, err := time.LoadLocation(tc.zone)
			if err != nil {
				t.Skip(err)
			}
			for _, p := range []store.Period{store.Day, store.Week, store.Month, store.Year} {
				cal := store.Calendar{Period: p, Location: loc}
				for at := time.Date(2026, 1, 1, 0, 0, 0, 0, loc); at.Year() < 2027; at = at.Add(30 * time.Minute) {
					us := at.UnixMicro()
					_, start, end := cal.At(us)
					if us < start || us >= end {
						t.Fatalf("%v: At(%v) = [%v, %v), which does not hold it", p, at, time.UnixMicro(start).In(loc), time.UnixMicro(end).In(loc))
					}
				}
			}
			cal := store.Calendar{Period: store.Day, Location: loc}
			_, start, _ := cal.At(time.Date(tc.day.Year(), tc.day.Month(), tc.day.Day(), 12, 0, 0, 0, loc).UnixMicro())
			if got, want := time.UnixMicro(start).In(loc), time.Date(tc.day.Year(), tc.day.Month(), tc.day.Day(), 1, 0, 0, 0, loc); !got.Equal(want) {
				t.Errorf("the day whose midnight is skipped starts at %v, want %v", got, want)
			}
		})
	}
}
