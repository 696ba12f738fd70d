// Package resolve gives the store request a Limiter makes of a policy and
// a request's attributes, for the tools and tests that look at a store's
// windows (sluice inspect, the conformance suite, the benchmarks) without
// a Limiter of their own.
package resolve

import (
	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/store"
)

// none is a Limiter over no store: resolving never calls one.
var none = sluice.NewLimiter(nil, sluice.Config{DenyCache: -1})

// Request returns the store request that deciding cost units of p for
// attrs makes: a check per rule that applies, with its values and limit,
// without runtime overrides (Limiter.Resolve applies a Limiter's). It
// returns the errors Limiter.AllowN returns for bad input.
func Request(p *sluice.Policy, attrs map[string]string, cost int64) (*store.Request, error) {
	return none.Resolve(p, attrs, cost)
}
