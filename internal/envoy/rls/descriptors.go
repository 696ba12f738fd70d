package rls

import (
	"fmt"
	"io"
	"math"
	"strings"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// Descriptors are a request's descriptors as a command line gives them
// (sluice check --envoy-config), each "k=v[,k2=v2]"; as a flag.Value,
// each Set adds one.
type Descriptors [][][2]string

func (d *Descriptors) String() string { return fmt.Sprint(*d) }

// Set adds the descriptor s, "k=v[,k2=v2]".
func (d *Descriptors) Set(s string) error {
	var entries [][2]string
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("entry %q is not KEY=VALUE; write a descriptor as k=v[,k2=v2]", kv)
		}
		entries = append(entries, [2]string{k, v})
	}
	*d = append(*d, entries)
	return nil
}

// Request is the request of d's descriptors to domain, of hits.
func (d Descriptors) Request(domain string, hits uint32) *rlsv3.RateLimitRequest {
	req := &rlsv3.RateLimitRequest{Domain: domain, HitsAddend: hits}
	for _, entries := range d {
		desc := &ratelimitv3.RateLimitDescriptor{}
		for _, e := range entries {
			desc.Entries = append(desc.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: e[0], Value: e[1]})
		}
		req.Descriptors = append(req.Descriptors, desc)
	}
	return req
}

// WriteResponse writes out, the answer to d's request, as text: its
// overall code, then a line per descriptor with its code and limit.
func (d Descriptors) WriteResponse(w io.Writer, domain, where string, out *rlsv3.RateLimitResponse) {
	fmt.Fprintf(w, "domain %q on %s: %s\n", domain, where, out.GetOverallCode())
	for i, s := range out.GetStatuses() {
		var kv []string
		if i < len(d) {
			for _, e := range d[i] {
				kv = append(kv, e[0]+"="+e[1])
			}
		}
		fmt.Fprintf(w, "  %-32s %s", strings.Join(kv, ","), s.GetCode())
		switch l := s.GetCurrentLimit(); {
		case l != nil:
			unit := l.GetUnit().String()
			if m := l.GetUnitMultiplier().GetValue(); m > 1 {
				unit = fmt.Sprintf("%d %s", m, unit)
			}
			fmt.Fprintf(w, "  %d per %s, %d remaining, reset in %ds", l.GetRequestsPerUnit(), unit, s.GetLimitRemaining(), s.GetDurationUntilReset().GetSeconds())
			if l.GetName() != "" {
				fmt.Fprintf(w, " (%s)", l.GetName())
			}
		case s.GetLimitRemaining() == math.MaxUint32:
			fmt.Fprint(w, "  unlimited")
		default:
			fmt.Fprint(w, "  no limit applies")
		}
		fmt.Fprintln(w)
	}
}
