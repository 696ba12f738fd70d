package decide

import (
	"fmt"
	"strings"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicerate/sluice/internal/envoy"
	"github.com/sluicerate/sluice/store"
)

// Windows returns the store request of the windows that req's descriptors match in c, every limit of
// each (replaces aside), with a cost of 1: what an operator resets to give a key its whole limit
// back. A request that matches no limit gives a request with no checks.
func Windows(c *envoy.Config, req *rlsv3.RateLimitRequest) (*store.Request, error) {
	if req.GetDomain() == "" || len(req.GetDescriptors()) == 0 {
		return nil, fmt.Errorf("%w: name the domain and at least one descriptor", ErrBadRequest)
	}
	out := &store.Request{Policy: envoy.PolicyName(req.GetDomain())}
	seen := map[string]bool{}
	add := func(rule string, values []string, l envoy.Limit) {
		id := rule + "\x00" + strings.Join(values, "\x00")
		if seen[id] {
			return
		}
		seen[id] = true
		out.Checks = append(out.Checks, check(&l, rule, values, 1))
	}
	for _, d := range req.GetDescriptors() {
		if o := d.GetLimit(); o != nil {
			u := rlsv3.RateLimitResponse_RateLimit_Unit(o.GetUnit())
			l, _ := c.UnitLimit(u, o.GetRequestsPerUnit()) // Decide refuses an unknown unit; here its window is 0
			add(ownRule(u), entryValues(d.GetEntries()), l)
			continue
		}
		m := c.Match(req.GetDomain(), d.GetEntries())
		if !m.Found {
			continue
		}
		for j, rule := range m.Rules {
			add(rule, m.Values, m.Limits[j])
		}
	}
	return out, nil
}
