package sluice

import (
	"fmt"
	"sync"
	"time"

	"github.com/sluicerate/sluice/store"
)

// Resolving. Before a store sees a request, the Limiter turns the policy and
// the request's attributes into the windows the request must fit: one
// store.Check per rule that applies (Optional, Unless and Match hold), with
// its values and its limit (after the first matching override; an
// unlimited one leaves the rule out). This is the one place requests are
// validated: a store trusts what it gets.

// scratch is the working memory of one decision: the store request and the
// values its checks point into, reused from decision to decision.
type scratch struct {
	req    store.Request
	values []string
}

var scratches = sync.Pool{New: func() any { return new(scratch) }}

func getScratch() *scratch { return scratches.Get().(*scratch) }

func putScratch(s *scratch) {
	clear(s.values)
	s.req.Checks, s.req.Shared, s.req.Results = s.req.Checks[:0], nil, s.req.Results[:0]
	scratches.Put(s)
}

// resolve makes s.req the store request of cost units of p for attrs. It
// returns an error wrapping ErrInvalidPolicy, ErrEmptyPolicy, ErrInvalidCost,
// ErrCostExceedsLimit or ErrMissingAttribute for bad input.
func (s *scratch) resolve(p *Policy, attrs map[string]string, cost int64) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if cost < 1 {
		return fmt.Errorf("%w: policy %q got cost %d", ErrInvalidCost, p.Name, cost)
	}
	req := &s.req
	req.Policy, req.Checks, s.values = p.Name, req.Checks[:0], s.values[:0]
	for i := range p.Rules {
		r := &p.Rules[i]
		if r.conditional() && !r.applies(attrs) {
			continue
		}
		limit, unlimited := r.limitFor(attrs)
		if unlimited {
			continue
		}
		switch {
		case limit > 0 && r.Algorithm != GCRA && cost > limit:
			return fmt.Errorf("%w: policy %q rule %q has limit %d, request cost %d",
				ErrCostExceedsLimit, p.Name, r.Name, limit, cost)
		case limit > 0 && r.Algorithm == GCRA && cost > r.burst(limit):
			return fmt.Errorf("%w: policy %q rule %q has burst %d (the most cost a gcra rule admits at once), request cost %d",
				ErrCostExceedsLimit, p.Name, r.Name, r.burst(limit), cost)
		}
		from := len(s.values)
		for _, a := range r.By {
			v, ok := attrs[a]
			if !ok {
				return fmt.Errorf("%w: policy %q rule %q needs attribute %q; pass it in the request's attributes",
					ErrMissingAttribute, p.Name, r.Name, a)
			}
			s.values = append(s.values, v)
		}
		c := store.Check{Rule: r.Name, Values: s.values[from:len(s.values):len(s.values)],
			Limit: limit, Window: r.Window, MinGap: r.MinGap, Cost: cost, Shadow: r.Shadow, Algorithm: r.Algorithm}
		if r.Algorithm == GCRA {
			c.Burst = r.burst(limit)
		}
		req.Checks = append(req.Checks, c)
	}
	// The values every rule goes by: a rule that applies carries them.
	from := len(s.values)
	if len(req.Checks) > 0 {
		for _, a := range p.Rules[0].By {
			if p.Shares(a) {
				s.values = append(s.values, attrs[a])
			}
		}
	}
	req.Shared = s.values[from:len(s.values):len(s.values)]
	return nil
}

// checkRequest reports why a store request built by a caller of
// Limiter.Decide cannot be decided: what resolve guarantees for its own.
func checkRequest(req *store.Request) error {
	if req.Policy == "" {
		return fmt.Errorf("%w: the request names no policy", ErrInvalidPolicy)
	}
	if len(req.Checks) == 0 {
		return fmt.Errorf("%w: policy %q; the request has no checks", ErrEmptyPolicy, req.Policy)
	}
	if req.Mode > store.ModeRecord {
		return fmt.Errorf("%w: unknown mode %d", ErrInvalidPolicy, req.Mode)
	}
	for i := range req.Checks {
		c := &req.Checks[i]
		switch {
		case c.Rule == "":
			return fmt.Errorf("%w: policy %q: check %d names no rule", ErrInvalidPolicy, req.Policy, i+1)
		case c.Cost < 1:
			return fmt.Errorf("%w: policy %q rule %q got cost %d", ErrInvalidCost, req.Policy, c.Rule, c.Cost)
		case c.Limit < 0 || c.Window < time.Microsecond || c.MinGap < 0:
			return fmt.Errorf("%w: policy %q rule %q: limit %d, window %v, min gap %v", ErrInvalidPolicy, req.Policy, c.Rule, c.Limit, c.Window, c.MinGap)
		case c.Limit > 0 && c.Cost > c.Limit && c.Algorithm != GCRA, c.Limit > 0 && c.Algorithm == GCRA && c.Cost > c.Burst:
			return fmt.Errorf("%w: policy %q rule %q has limit %d (burst %d), request cost %d", ErrCostExceedsLimit, req.Policy, c.Rule, c.Limit, c.Burst, c.Cost)
		case c.Algorithm > SlidingCounter || c.MinGap > 0 && c.Algorithm != Log || c.Algorithm == GCRA && c.Burst < 1:
			return fmt.Errorf("%w: policy %q rule %q: algorithm %v, min gap %v, burst %d", ErrInvalidPolicy, req.Policy, c.Rule, c.Algorithm, c.MinGap, c.Burst)
		}
		for j := range i {
			if sameWindow(&req.Checks[j], c) {
				return fmt.Errorf("%w: policy %q: checks %d and %d name one window (rule %q, values %q); merge them",
					ErrInvalidPolicy, req.Policy, j+1, i+1, c.Rule, c.Values)
			}
		}
	}
	return nil
}

func sameWindow(a, b *store.Check) bool {
	if a.Rule != b.Rule || len(a.Values) != len(b.Values) {
		return false
	}
	for i := range a.Values {
		if a.Values[i] != b.Values[i] {
			return false
		}
	}
	return true
}

// Resolve returns the store request that deciding cost units of p for
// attrs makes: a check per rule that applies, with its values and limit.
// It is for tools that look at a store's windows (sluice inspect) and for
// front ends that adjust a request before Limiter.Decide. It returns the
// errors AllowN returns for bad input.
func Resolve(p *Policy, attrs map[string]string, cost int64) (*store.Request, error) {
	var s scratch
	if err := s.resolve(p, attrs, cost); err != nil {
		return nil, err
	}
	return &s.req, nil
}
