package sluice

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Rate is a number of events per period: Rate{Events: 4, Per: time.Second}
// is four events a second, one every 250ms.
type Rate struct {
	// Events is how many events the period holds. At least 1.
	Events int64

	// Per is the period. At least 1µs, and at least Events microseconds.
	Per time.Duration
}

// Interval is the time one event takes at this rate: Per/Events, rounded up
// to a whole microsecond (the unit every store works in), so that a schedule
// never runs faster than its rate. It is 0 for an invalid rate.
func (r Rate) Interval() time.Duration {
	if r.Events <= 0 || r.Per <= 0 {
		return 0
	}
	us := r.Per / time.Microsecond
	n := time.Duration(r.Events)
	iv := us / n
	if us%n != 0 || r.Per%time.Microsecond != 0 {
		iv++
	}
	return iv * time.Microsecond
}

// String returns the rate as ParseRate reads it: "4/1s", "100/30m0s".
func (r Rate) String() string { return strconv.FormatInt(r.Events, 10) + "/" + r.Per.String() }

// MarshalText implements encoding.TextMarshaler with String's format.
func (r Rate) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler with ParseRate.
func (r *Rate) UnmarshalText(b []byte) error {
	v, err := ParseRate(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// ParseRate parses "EVENTS/PERIOD": "4/s", "20/1s", "100/30m", "3/500ms",
// "1/d", "3/2d12h". PERIOD is a Go duration that may start with whole days
// ("2d" is 48h); a unit alone ("ms", "s", "m", "h", "d") means one of it.
// The period is at most a year, and the rate at most one event per
// microsecond. The configuration file and `sluice reserve --rate` read rates
// with it.
func ParseRate(s string) (Rate, error) {
	n, per, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return Rate{}, fmt.Errorf("sluice: rate %q is not EVENTS/PERIOD; write one such as 4/s, 100/30m or 10/1m", s)
	}
	events, err := strconv.ParseInt(strings.TrimSpace(n), 10, 64)
	if err != nil || events < 1 {
		return Rate{}, fmt.Errorf("sluice: rate %q must start with a whole number of events of at least 1, as in 4/s", s)
	}
	d, err := parsePeriod(strings.TrimSpace(per))
	if err != nil {
		return Rate{}, fmt.Errorf("sluice: rate %q has a bad period: %v", s, err)
	}
	r := Rate{Events: events, Per: d}
	if err := r.validate(); err != nil {
		return Rate{}, fmt.Errorf("sluice: rate %q: %v", s, err)
	}
	return r, nil
}

// maxPeriod bounds the period ParseRate accepts: a period of more than a
// year is a mistake.
const maxPeriod = 366 * 24 * time.Hour

// parsePeriod parses the period of a rate: a Go duration, optionally
// starting with whole days ("1d", "2d12h"), or a unit alone, one of it.
func parsePeriod(s string) (time.Duration, error) {
	p := s
	if p != "" && (p[0] < '0' || p[0] > '9') {
		p = "1" + p
	}
	if _, err := strconv.ParseFloat(p, 64); err == nil {
		return 0, fmt.Errorf("%q has no unit; write %ss, %sm or %sms", s, p, p, p)
	}
	var d time.Duration
	if i := strings.IndexByte(p, 'd'); i > 0 {
		days, err := strconv.ParseUint(p[:i], 10, 16)
		if err != nil {
			return 0, fmt.Errorf("%q does not start with a whole number of days, as in 2d12h", s)
		}
		d, p = time.Duration(days)*24*time.Hour, p[i+1:]
	}
	if p != "" || d == 0 {
		rest, err := time.ParseDuration(p)
		if err != nil || rest < 0 {
			return 0, fmt.Errorf("%q is not a duration such as 250ms, 30s, 30m, 1h30m or 1d", s)
		}
		d += rest
	}
	if d < 0 || d > maxPeriod {
		return 0, fmt.Errorf("%q is longer than a year; use a shorter one", s)
	}
	return d, nil
}

// validate reports why r is not a usable rate.
func (r Rate) validate() error {
	switch {
	case r.Events < 1:
		return fmt.Errorf("%d events per period; a rate needs at least 1", r.Events)
	case r.Per < time.Microsecond:
		return fmt.Errorf("a period of %v; a period must be at least 1µs", r.Per)
	case r.Per/time.Duration(r.Events) < time.Microsecond:
		return fmt.Errorf("%d events per %v is faster than one per microsecond", r.Events, r.Per)
	}
	return nil
}

// Schedule is a leaky bucket that spaces events out instead of rejecting
// them: every reservation on it is given a slot, a time at which it may go,
// at least one Interval of its rate after the previous reservation's (cost N
// reservations take N intervals). A reservation that would have to wait more
// than MaxDelay, or join a queue of MaxQueue, is rejected instead. One queue
// is kept per combination of the values of the attributes named in By.
//
// Policies are upstream limits (reject what is above the rate); schedules
// are downstream limits (hold back what is above the rate, up to a bound).
// The dialer's carrier is Schedule{Name: "carrier", By: []string{"carrier"},
// Rate: Rate{Events: 4, Per: time.Second}, MaxDelay: 2 * time.Second}.
//
// A Schedule is a plain value; it is safe for concurrent use as long as it is
// not modified while in use.
type Schedule struct {
	// Name identifies the schedule; it is part of every store key.
	// Required.
	Name string

	// By names the request attributes that select the schedule's queue, in
	// order. Empty means one queue for every request.
	By []string

	// Rate is the schedule's pace. Required.
	Rate Rate

	// MaxDelay is the longest a reservation may wait for its slot: a
	// reservation whose delay would be longer is rejected. Zero, the
	// default, admits only reservations that may go at once; it must not
	// be negative.
	MaxDelay time.Duration

	// MaxQueue, when > 0, is the longest the queue may be: a reservation
	// that finds MaxQueue reservations in it (waiting for their slot, or
	// whose slot has come and whose time has not ended) is rejected. Zero, the
	// default, bounds the queue by MaxDelay only.
	MaxQueue int64
}

// Validate reports why s cannot be used: a missing name, an invalid rate, a
// negative MaxDelay or MaxQueue, or an empty or repeated attribute in By.
// The error wraps ErrInvalidSchedule.
func (s *Schedule) Validate() error {
	if s == nil {
		return fmt.Errorf("%w: the schedule is nil", ErrInvalidSchedule)
	}
	if s.Name == "" {
		return fmt.Errorf("%w: the schedule has no name", ErrInvalidSchedule)
	}
	if err := s.Rate.validate(); err != nil {
		return fmt.Errorf("%w: schedule %q has %v", ErrInvalidSchedule, s.Name, err)
	}
	if s.MaxDelay < 0 {
		return fmt.Errorf("%w: schedule %q has negative max delay %v", ErrInvalidSchedule, s.Name, s.MaxDelay)
	}
	if s.MaxQueue < 0 {
		return fmt.Errorf("%w: schedule %q has negative max queue %d", ErrInvalidSchedule, s.Name, s.MaxQueue)
	}
	for i, a := range s.By {
		if a == "" {
			return fmt.Errorf("%w: schedule %q has an empty attribute name in By[%d]", ErrInvalidSchedule, s.Name, i)
		}
		for _, b := range s.By[:i] {
			if a == b {
				return fmt.Errorf("%w: schedule %q names attribute %q twice in By", ErrInvalidSchedule, s.Name, a)
			}
		}
	}
	return nil
}

// Interval is the time between two slots of s: s.Rate.Interval().
func (s *Schedule) Interval() time.Duration { return s.Rate.Interval() }
