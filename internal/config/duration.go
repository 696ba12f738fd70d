package config

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/sluicerate/sluice"
)

// maxDuration bounds every duration in a file: a window of more than a year
// is a mistake, and the bound keeps microsecond arithmetic far from overflow.
const maxDuration = 366 * 24 * time.Hour

// parseDuration parses a duration such as "30m", "1h30m", "250ms", or whole
// days then the rest: "1d" (24h), "2d12h". A bare number is rejected: the
// unit must be written.
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
	case d > maxDuration:
		return 0, fmt.Errorf("duration %q is longer than a year (%v); use a shorter one", s, maxDuration)
	}
	return d, nil
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

// parsePrefix parses a CIDR prefix such as 10.0.0.0/8, or an IP address as
// the prefix of that address alone.
func parsePrefix(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if ip, aerr := netip.ParseAddr(s); err != nil && aerr == nil {
		p, err = netip.PrefixFrom(ip, ip.BitLen()), nil
	}
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not an IP address or CIDR prefix; write it as 10.0.0.0/8 or 127.0.0.1", s)
	}
	return p.Masked(), nil
}
