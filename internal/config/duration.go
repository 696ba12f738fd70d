package config

import (
	"errors"
	"fmt"
	"github.com/sluicerate/sluice"
	"strconv"
	"strings"
	"time"
)

// maxDuration bounds every duration in a file: a window of more than a year
// is a mistake, and the bound keeps microsecond arithmetic far from overflow.
const maxDuration = 366 * 24 * time.Hour

// parseDuration parses a duration such as "30m", "1h30m", "250ms" or "1d"
// (24h). A bare number is rejected: the unit must be written.
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("empty duration; write one such as 250ms, 30s, 30m, 1h or 1d")
	}
	if _, err := strconv.ParseFloat(s, 64); err == nil {
		return 0, fmt.Errorf("duration %q has no unit; write %ss, %sm or %sms", s, s, s, s)
	}
	d, err := parseWithDays(s)
	if err != nil {
		return 0, fmt.Errorf("duration %q is not valid; write one such as 250ms, 30s, 30m, 1h30m or 1d", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("duration %q is negative; durations must be positive", s)
	}
	if d > maxDuration {
		return 0, fmt.Errorf("duration %q is longer than a year (%v); use a shorter one", s, maxDuration)
	}
	return d, nil
}

// parseWithDays is time.ParseDuration that also accepts whole days, "1d" or
// "2d12h".
func parseWithDays(s string) (time.Duration, error) {
	if i := strings.IndexByte(s, 'd'); i > 0 {
		days, err := strconv.ParseUint(s[:i], 10, 16)
		if err != nil {
			return 0, err
		}
		d := time.Duration(days) * 24 * time.Hour
		if rest := s[i+1:]; rest != "" {
			r, err := time.ParseDuration(rest)
			if err != nil || r < 0 {
				return 0, errors.New("bad duration")
			}
			d += r
		}
		return d, nil
	}
	return time.ParseDuration(s)
}

// parseRate parses "N/PERIOD": "4/s", "100/30m", "10/1m". PERIOD is a
// duration, and a unit alone ("s", "m", "h", "ms", "d") means one of it.
func parseRate(s string) (sluice.Rate, error) {
	s = strings.TrimSpace(s)
	n, per, ok := strings.Cut(s, "/")
	if !ok {
		return sluice.Rate{}, fmt.Errorf("rate %q is not EVENTS/PERIOD; write one such as 4/s, 100/30m or 10/1m", s)
	}
	events, err := strconv.ParseInt(strings.TrimSpace(n), 10, 64)
	if err != nil || events < 1 {
		return sluice.Rate{}, fmt.Errorf("rate %q must start with a whole number of events of at least 1, as in 4/s", s)
	}
	per = strings.TrimSpace(per)
	if per != "" && (per[0] < '0' || per[0] > '9') {
		per = "1" + per
	}
	d, err := parseDuration(per)
	if err != nil {
		return sluice.Rate{}, fmt.Errorf("rate %q has a bad period: %v", s, err)
	}
	if d == 0 {
		return sluice.Rate{}, fmt.Errorf("rate %q has a period of zero; write one such as 4/s", s)
	}
	if d/time.Duration(events) < time.Microsecond {
		return sluice.Rate{}, fmt.Errorf("rate %q is faster than one event per microsecond; lower it", s)
	}
	return sluice.Rate{Events: events, Per: d}, nil
}
