package config

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/sluicerate/sluice"
)

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
