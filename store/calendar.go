package store

import (
	"strconv"
	"time"
)

// Period is a calendar period's unit: the length of a Calendar check's
// periods, and how often a credits balance refills.
type Period uint8

const (
	// NoPeriod: not a calendar period.
	NoPeriod Period = iota

	// Day: from local midnight to the next (23 to 25 hours across a
	// daylight saving change).
	Day

	// Week: seven local days, from midnight of the Calendar's WeekStart.
	Week

	// Month: from midnight of the 1st to midnight of the next month's 1st.
	Month

	// Year: from midnight of 1 January to the next.
	Year
)

// String returns the period's name in the configuration file: day, week,
// month or year ("" for NoPeriod).
func (p Period) String() string {
	switch p {
	case NoPeriod:
		return ""
	case Day:
		return "day"
	case Week:
		return "week"
	case Month:
		return "month"
	case Year:
		return "year"
	}
	return "Period(" + strconv.Itoa(int(p)) + ")"
}

// ParsePeriod returns the period named s (day, week, month or year), false
// for any other name.
func ParsePeriod(s string) (Period, bool) {
	for p := Day; p <= Year; p++ {
		if p.String() == s {
			return p, true
		}
	}
	return NoPeriod, false
}

// MaxPeriodLength is the longest a calendar period lasts: a leap year with
// a daylight saving change's extra hour, and a margin of a day for a zone
// that changes its offset. Stores keep a calendar window's state at least
// this long past its period's end when they keep history.
const MaxPeriodLength = 368 * 24 * time.Hour

// Calendar says how time is cut into calendar periods: Period's units in a
// time zone. Its periods are numbered by an index that grows by one from a
// period to the next, so that a store counts the periods between two
// instants by subtracting indexes:
//
//   - Day: the local date's days since 1970-01-01;
//   - Week: floor((days since 1970-01-01 + 4 - WeekStart) / 7), which
//     grows on each local midnight that starts a WeekStart (1970-01-01 was a
//     Thursday, weekday 4);
//   - Month: year*12 + month - 1;
//   - Year: the year.
//
// A period starts at local midnight of its first day and ends where the
// next starts: half-open, [start, end). A midnight that a daylight saving
// change skips starts the period at the first local time after the gap.
type Calendar struct {
	// Period is the periods' unit; NoPeriod for a check that is not a
	// calendar quota.
	Period Period

	// Location is the time zone periods start in; nil is UTC.
	Location *time.Location

	// WeekStart is the day weeks start on (Week only); Sunday is 0.
	WeekStart time.Weekday
}

// IsZero reports whether c names no period.
func (c Calendar) IsZero() bool { return c.Period == NoPeriod }

func (c Calendar) location() *time.Location {
	if c.Location == nil {
		return time.UTC
	}
	return c.Location
}

// daysFromCivil returns the number of days from 1970-01-01 to y-m-d of the
// proleptic Gregorian calendar.
func daysFromCivil(y int, m time.Month, d int) int64 {
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC).Unix() / 86400
}

// floorDiv returns a / b rounded down, b > 0.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// At returns the index of the period that t (µs since the Unix epoch)
// falls in, with that period's start and end (µs since the Unix epoch).
func (c Calendar) At(t int64) (index, start, end int64) {
	y, m, d := time.UnixMicro(t).In(c.location()).Date()
	switch c.Period {
	case Day:
		index = daysFromCivil(y, m, d)
	case Week:
		index = floorDiv(daysFromCivil(y, m, d)+4-int64(c.WeekStart), 7)
	case Month:
		index = int64(y)*12 + int64(m) - 1
	case Year:
		index = int64(y)
	default:
		return 0, 0, 0
	}
	start, end = c.Bounds(index)
	return index, start, end
}

// Start returns the start (µs since the Unix epoch) of the period of the
// given index.
func (c Calendar) Start(index int64) int64 {
	loc := c.location()
	var y int
	var m time.Month
	d := 1
	switch c.Period {
	case Day, Week:
		day := index
		if c.Period == Week {
			day = index*7 - 4 + int64(c.WeekStart)
		}
		y, m, d = time.Unix(day*86400, 0).UTC().Date()
	case Month:
		y, m = int(floorDiv(index, 12)), time.Month(index-floorDiv(index, 12)*12+1)
	case Year:
		y, m = int(index), time.January
	default:
		return 0
	}
	t := time.Date(y, m, d, 0, 0, 0, 0, loc)
	if ty, tm, td := t.Date(); ty != y || tm != m || td != d {
		// The zone's clocks skip that midnight: time.Date gave a time of
		// the day before, under the offset before the change; the day
		// starts at the change, its first local time after the gap.
		_, t = t.ZoneBounds()
	}
	return t.UnixMicro()
}

// Bounds returns the start and end (µs since the Unix epoch) of the period
// of the given index: the end is the next period's start.
func (c Calendar) Bounds(index int64) (start, end int64) {
	return c.Start(index), c.Start(index + 1)
}
