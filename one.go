package sluice

import (
	"context"
	"sync"

	"github.com/sluicerate/sluice/store"
)

// The one-check road. Most policies are one rule that always applies,
// with no overrides, and most calls of such a policy are well formed: the
// request is that rule's check (compiled.plain) with the request's values
// and cost, and its decision that check's status. When the rule goes by
// one attribute and the store is a store.CheckDecider (memstore), decideOne
// hands it the check, the value and the cost, and needs no request at all;
// otherwise it builds the request into a scratch of its own, one check and
// one result long, from a pool. Either way it combines the result straight
// into the caller's Decision. Anything else
// (a missing attribute, a cost out of range, a runtime override that may
// apply, Record) takes resolve's general road, which gives the same
// decision and says what is wrong with bad input.

// oneScratch is the working memory of a one-check decision.
type oneScratch struct {
	req    store.Request
	check  [1]store.Check
	result [1]store.Result
	values []string
}

var oneScratches = sync.Pool{New: func() any {
	s := new(oneScratch)
	s.req.Checks, s.req.Results = s.check[:], s.result[:0]
	return s
}}

// decideOne decides cost units of compiled policy cp (cp.one) for attrs in
// mode into d, and reports false, deciding nothing, when the request is
// not for the one-check road: cost is out of range or exceeds the rule's
// limit (or burst), or an attribute is missing.
func (l *Limiter) decideOne(ctx context.Context, cp *compiled, attrs map[string]string, cost int64, mode store.Mode, dry bool, d *Decision) (bool, error) {
	plain := &cp.plain[0]
	if cost < 1 || cost > MaxCost || plain.Limit > 0 &&
		(plain.Algorithm != GCRA && cost > plain.Limit || plain.Algorithm == GCRA && cost > plain.Burst) {
		return false, nil
	}
	by := cp.snap.Rules[0].By
	var checkErr error // DecideCheck's failure
	if l.checker != nil && len(by) == 1 {
		// A store that decides the check without a Request: no scratch.
		v, ok := attrs[by[0]]
		if !ok {
			return false, nil
		}
		r, err := l.checker.DecideCheck(ctx, cp.snap.Name, plain, v, cost, mode, dry)
		if err == nil {
			d.combineCheck(plain, &r)
			return true, nil
		}
		checkErr = err // the failure policy decides, from the request below
	}
	s := oneScratches.Get().(*oneScratch)
	for _, a := range by {
		v, ok := attrs[a]
		if !ok {
			s.release()
			return false, nil
		}
		s.values = append(s.values, v)
	}
	req := &s.req
	s.check[0] = *plain
	c := &s.check[0]
	c.Values, c.Cost = s.values[:len(s.values):len(s.values)], cost
	req.Policy, req.Mode, req.DryRun = cp.snap.Name, mode, dry
	// The one rule's attributes are the policy's shared ones.
	req.Shared = c.Values
	var err error
	switch {
	case checkErr != nil:
		err = checkErr
		*d = l.degraded(ctx, req)
	case l.local:
		if err = l.store.Decide(ctx, req); err != nil {
			*d = l.degraded(ctx, req)
		} else {
			d.combineOne(req, nil)
		}
	default:
		err = l.decide(ctx, req, nil, d)
	}
	s.release()
	return true, err
}

// release clears what s holds of the caller's (its values: its check and
// shared values point into them) and puts it back in the pool.
func (s *oneScratch) release() {
	// Backwards, which the compiler does not turn into clear's call (see
	// putScratch).
	for i := len(s.values) - 1; i >= 0; i-- {
		s.values[i] = ""
	}
	s.values = s.values[:0]
	oneScratches.Put(s)
}
