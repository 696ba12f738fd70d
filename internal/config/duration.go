package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicerate/sluice"
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

// parseRate is sluice.ParseRate, the one reader of rates, with its message
// as a file reports it: the file's name and position say where it is from.
func parseRate(s string) (sluice.Rate, error) {
	r, err := sluice.ParseRate(s)
	if err != nil {
		return r, errors.New(strings.TrimPrefix(err.Error(), "sluice: "))
	}
	return r, nil
}
