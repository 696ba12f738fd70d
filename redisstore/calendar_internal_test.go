package redisstore

import (
	"testing"
	"time"

	"github.com/sluicerate/sluice/store"
)

// BenchmarkAppendPeriods measures what a calendar rule adds to a shape on
// every decision (its period's index and the starts of four periods), from
// the cache and computed afresh.
func BenchmarkAppendPeriods(b *testing.B) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		b.Skip(err)
	}
	cal := store.Calendar{Period: store.Month, Location: berlin}
	now := time.Date(2026, time.March, 15, 12, 0, 0, 0, berlin).UnixMicro()
	b.Run("cached", func(b *testing.B) {
		var room [64]byte
		b.ReportAllocs()
		for b.Loop() {
			appendPeriods(room[:0], cal, now)
		}
	})
	b.Run("fresh", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			periodsOf(cal, now)
		}
	})
}

// TestCachedPeriods checks that the cached periods of a calendar are the
// ones computed afresh at every instant of a walk that crosses period
// starts, a daylight saving change and years, forward and back, over two
// calendars that share the cache.
func TestCachedPeriods(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip(err)
	}
	newYork, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skip(err)
	}
	cals := []store.Calendar{
		{Period: store.Day, Location: newYork},
		{Period: store.Week, Location: berlin, WeekStart: time.Monday},
		{Period: store.Month, Location: berlin},
		{Period: store.Year},
	}
	var instants []int64
	for _, cal := range cals {
		for _, at := range []time.Time{
			time.Date(2026, time.March, 29, 0, 0, 0, 0, berlin),
			time.Date(2026, time.March, 8, 0, 0, 0, 0, newYork),
			time.Date(2026, time.November, 1, 0, 0, 0, 0, newYork),
			time.Date(2027, time.January, 1, 0, 0, 0, 0, time.UTC),
		} {
			_, start, end := cal.At(at.UnixMicro())
			instants = append(instants, start-1, start, start+1, end-1, end, end+1)
		}
	}
	for pass := range 2 {
		for i := range instants {
			at := instants[i]
			if pass == 1 {
				at = instants[len(instants)-1-i]
			}
			for _, cal := range cals {
				if got, want := cachedPeriods(cal, at), periodsOf(cal, at); got != want {
					t.Fatalf("%v in %v at %d µs: cached %+v, want %+v", cal.Period, cal.Location, at, got, want)
				}
			}
		}
	}
}
