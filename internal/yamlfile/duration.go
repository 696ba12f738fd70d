package yamlfile

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// MaxDuration bounds every duration in a file: a window of more than a
// year is a mistake, and the bound keeps microsecond arithmetic far from
// overflow.
const MaxDuration = 366 * 24 * time.Hour

// Duration reads the scalar n as a duration: a Go duration with its unit
// ("30m", "1h30m", "250ms"), or whole days then the rest ("1d" is 24h,
// "2d12h"), from 0 to MaxDuration. The error says what to write instead;
// the caller adds where and what the duration is.
func Duration(n *yaml.Node) (time.Duration, error) {
	return parseDuration(n.Value)
}

// parseDuration is Duration of the text s. A bare number is refused: the
// unit must be written. Days take no sign and the rest none of its own, so
// "2d-3h" is refused rather than read as 45h.
func parseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	hours := s // days written as hours: time.ParseDuration adds "48h12h" up
	if days, rest, ok := strings.Cut(s, "d"); ok {
		n, err := strconv.ParseUint(days, 10, 16)
		if hours = fmt.Sprintf("%dh%s", n*24, rest); err != nil {
			hours = s
		}
	}
	d, err := time.ParseDuration(hours)
	_, nerr := strconv.ParseFloat(s, 64)
	switch {
	case s == "":
		return 0, errors.New("empty duration; write one such as 250ms, 30s, 30m, 1h or 1d")
	case nerr == nil:
		return 0, fmt.Errorf("duration %q has no unit; write %ss, %sm or %sms", s, s, s, s)
	case err != nil:
		return 0, fmt.Errorf("duration %q is not valid; write one such as 250ms, 30s, 30m, 1h30m or 1d", s)
	case d < 0:
		return 0, fmt.Errorf("duration %q is negative; durations must be positive", s)
	case d > MaxDuration:
		return 0, fmt.Errorf("duration %q is longer than a year (%v); use a shorter one", s, MaxDuration)
	}
	return d, nil
}

// ParseDuration reads s as Duration reads a scalar: "30m", "1h30m",
// "250ms", "1d", from 0 to MaxDuration, for durations given elsewhere than
// in a file (the admin API's).
func ParseDuration(s string) (time.Duration, error) { return parseDuration(s) }
