package redisstore

import (
	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/store"
)

// policyRequest returns the store request of every rule of p for attrs, as
// the Limiter resolves it, without validating the rules' figures: for tests
// of keys, which need names and values alone.
func policyRequest(p *sluice.Policy, attrs map[string]string) *store.Request {
	req := &store.Request{Policy: p.Name}
	for _, a := range p.SharedAttributes() {
		req.Shared = append(req.Shared, attrs[a])
	}
	for _, r := range p.Rules {
		c := store.Check{Rule: r.Name, Algorithm: r.Algorithm}
		for _, a := range r.By {
			c.Values = append(c.Values, attrs[a])
		}
		req.Checks = append(req.Checks, c)
	}
	return req
}
