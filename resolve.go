package sluice

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
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
	spread []spreading // the request's spread rules, see Rule.Spread
	sent   time.Time   // when the last store call was sent, for the deny cache
	key    []byte      // a deny cache key, see appendDenyKey

	statuses statuses // where the decisions' rule statuses come from

	// record lets a cost exceed a rule's limit: Limiter.Record adds an
	// event whether or not it fits, and one larger than the limit cannot.
	record bool

	// budgeted reports a request decided by decideBudget, and budget is
	// its working memory (budget.go).
	budgeted bool
	budget   budgetWork
}

// spreading is where a request stands on a spread rule: the sub-window
// its check names, and what the sub-windows tried so far said.
type spreading struct {
	check        int   // the rule's index in req.Checks
	n            int   // Rule.Spread
	at, tried    int   // the sub-window checked, and how many were
	limit, burst int64 // the whole window's, shared among the sub-windows
	retry        time.Duration
	// seen counts the sub-windows that denied in a row, each asked after
	// the one before, and until is the soonest any of them has room, each
	// counted from when it was asked: what the deny cache keeps.
	seen  int
	until time.Time
}

var scratches = sync.Pool{New: func() any { return new(scratch) }}

func getScratch() *scratch { return scratches.Get().(*scratch) }

func putScratch(s *scratch) {
	// Backwards, which the compiler does not turn into clear's call: that
	// call costs more than the loop for the value or two a request has.
	for i := len(s.values) - 1; i >= 0; i-- {
		s.values[i] = ""
	}
	s.req.Checks, s.req.Shared, s.req.Results, s.spread = s.req.Checks[:0], nil, s.req.Results[:0], s.spread[:0]
	s.record, s.budgeted = false, false
	clear(s.budget.slices)
	scratches.Put(s)
}

// resolve makes s.req the store request of cost units of compiled policy
// cp for attrs. It returns an error wrapping ErrInvalidCost,
// ErrCostExceedsLimit (unless s.record), ErrInvalidPolicy (a runtime
// override that cannot apply) or ErrMissingAttribute for bad input.
func (s *scratch) resolve(cp *compiled, attrs map[string]string, cost int64, ov Overrides) error {
	p := &cp.snap
	if cost < 1 || cost > MaxCost {
		return costRange(fmt.Sprintf("policy %q", p.Name), cost, 1)
	}
	req := &s.req
	req.Policy, req.Checks, s.values, s.spread = p.Name, req.Checks[:0], s.values[:0], s.spread[:0]
	for i := range p.Rules {
		r := &p.Rules[i]
		if ov == nil && cp.plain[i].Rule != "" && s.plainCheck(&cp.plain[i], r.By, attrs, cost) {
			continue
		}
		if r.conditional() && !r.applies(attrs) {
			continue
		}
		from, missing := s.appendValues(r.By, attrs)
		var (
			o   Override
			has bool
		)
		if ov != nil && missing == "" {
			o, has = ov.Override(p.Name, r.Name, s.values[from:])
		}
		limit, unlimited := r.limitFor(attrs)
		switch {
		case unlimited && !has:
			s.values = s.values[:from]
			continue
		case missing != "":
			return &MissingAttributeError{Policy: p.Name, Rule: r.Name, Attribute: missing}
		}
		f, err := r.overridden(limit, o, has)
		if err != nil {
			return fmt.Errorf("policy %q: %w", p.Name, err)
		}
		covers := 0
		if r.Covers != "" {
			// The credits pay for the quota's overage: no quota, nothing
			// to pay for.
			if covers = coveredBy(req.Checks, r.Covers) + 1; covers == 0 {
				s.values = s.values[:from]
				continue
			}
		}
		spread := int64(max(1, r.Spread))
		switch {
		case r.concurrent():
			// A lease takes one slot whatever its cost.
		case s.record:
			// Recorded whether it fits or not.
		case r.Algorithm == Credits || cp.covered(i):
			// A balance may be topped up past its starting Limit, and a
			// quota's overage paid for by credits.
		case f.limit > 0 && r.Algorithm != GCRA && cost > f.limit/spread:
			return fmt.Errorf("%w: policy %q rule %q has limit %d%s, request cost %d",
				ErrCostExceedsLimit, p.Name, r.Name, f.limit, spreadNote(spread, f.limit), cost)
		case f.limit > 0 && r.Algorithm == GCRA && cost > f.burst/spread:
			return fmt.Errorf("%w: policy %q rule %q has burst %d (the most cost a gcra rule admits at once)%s, request cost %d",
				ErrCostExceedsLimit, p.Name, r.Name, f.burst, spreadNote(spread, f.burst), cost)
		}
		if r.Spread > 1 {
			sp := spreading{check: len(req.Checks), n: r.Spread, at: spreadStart(r, attrs), limit: f.limit, burst: f.burst}
			f.limit, f.burst = sp.share()
			s.values = append(s.values, strconv.Itoa(sp.at))
			s.spread = append(s.spread, sp)
		}
		c := store.Check{Rule: r.Name, Values: s.values[from:len(s.values):len(s.values)],
			Limit: f.limit, Window: f.window, MinGap: f.minGap, Cost: cost, Shadow: r.Shadow, Algorithm: r.Algorithm, Burst: f.burst, Budget: r.Budget}
		if r.concurrent() {
			c.Algorithm, c.Cost = store.Concurrency, 1 // its window is its lease time (overridden)
		}
		r.setQuota(&c, covers)
		if r.Spread > 1 {
			c.Part, c.Parts = s.spread[len(s.spread)-1].at, r.Spread
		}
		req.Checks = append(req.Checks, c)
	}
	// The values every rule goes by: a rule that applies carries them,
	// and the first rule's begin with them when they are the first of its
	// By.
	if len(req.Checks) > 0 && cp.shared > 0 && cp.sharedPrefix && same(req.Checks[0].Rule, p.Rules[0].Name) {
		req.Shared = req.Checks[0].Values[:cp.shared:cp.shared]
		return nil
	}
	from := len(s.values)
	if len(req.Checks) > 0 && cp.shared > 0 {
		for _, a := range p.Rules[0].By {
			if p.Shares(a) {
				s.values = append(s.values, attrs[a])
			}
		}
	}
	req.Shared = s.values[from:len(s.values):len(s.values)]
	return nil
}

// plainCheck appends to s.req the check of a rule whose check does not
// depend on the request (see compiled.plain): plain with the values of by
// in attrs and cost. It reports false, appending nothing, when an
// attribute is missing or the cost exceeds the rule's limit (or burst),
// for resolve's general road to say so.
func (s *scratch) plainCheck(plain *store.Check, by []string, attrs map[string]string, cost int64) bool {
	if !s.record && plain.Limit > 0 &&
		(plain.Algorithm != GCRA && cost > plain.Limit || plain.Algorithm == GCRA && cost > plain.Burst) {
		return false
	}
	from, missing := s.appendValues(by, attrs)
	if missing != "" {
		s.values = s.values[:from]
		return false
	}
	s.req.Checks = append(s.req.Checks, *plain)
	c := &s.req.Checks[len(s.req.Checks)-1]
	c.Values, c.Cost = s.values[from:len(s.values):len(s.values)], cost
	return true
}

// appendValues appends to s.values the values of the attributes by in
// attrs, up to the first missing one, and returns where they start and the
// name of the missing attribute ("" when none is).
func (s *scratch) appendValues(by []string, attrs map[string]string) (from int, missing string) {
	from = len(s.values)
	for _, a := range by {
		v, ok := attrs[a]
		if !ok {
			return from, a
		}
		s.values = append(s.values, v)
	}
	return from, ""
}

// concurrency returns the index of the request's first concurrency check,
// or -1.
func (s *scratch) concurrency() int {
	for i := range s.req.Checks {
		if s.req.Checks[i].Algorithm == store.Concurrency {
			return i
		}
	}
	return -1
}

// credits reports whether the request has a credits check.
func (s *scratch) credits() bool {
	for i := range s.req.Checks {
		if s.req.Checks[i].Algorithm == store.Credits {
			return true
		}
	}
	return false
}

// Hot keys. A spread rule's window is Rule.Spread sub-windows: the check
// of a request names one (its index is the last of the check's values, so
// the sub-windows' keys, hash tags and Cluster slots differ) with its share
// of the limit. When the sub-window has no room, the Limiter decides the
// request again on the next one, until one admits it or all were tried:
// a denial records nothing, so nothing is counted twice. Tried in turn, the
// sub-windows deny a request of cost c only when none has c units of room,
// that is with at most Spread*(c-1) units of the whole limit unused
// (none for a cost of 1), but for the windows' entries that leave while the
// request moves from one sub-window to the next.

// spreadNote describes the share of a limit a spread rule's sub-window
// holds, for an error message; "" for a rule that is not spread.
func spreadNote(spread, limit int64) string {
	if spread < 2 {
		return ""
	}
	return fmt.Sprintf(" spread over %d sub-windows of %d or more", spread, limit/spread)
}

// spreadStart returns the sub-window a request of spread rule r goes to
// first: the one its SpreadBy value hashes to, else a random one.
func spreadStart(r *Rule, attrs map[string]string) int {
	if v, ok := attrs[r.SpreadBy]; ok && r.SpreadBy != "" {
		h := fnv.New64a()
		h.Write([]byte(v))
		return int(h.Sum64() % uint64(r.Spread))
	}
	return rand.IntN(r.Spread)
}

// share returns the limit and burst of sub-window sp.at: an equal share of
// the whole window's, the first ones one more when they do not divide.
func (sp *spreading) share() (limit, burst int64) {
	part := func(total int64) int64 {
		n := int64(sp.n)
		if int64(sp.at) < total%n {
			return total/n + 1
		}
		return total / n
	}
	return part(sp.limit), part(sp.burst)
}

// fallOver notes what the last decision said of each spread rule's
// sub-window and, when only spread rules that have sub-windows left to try
// denied it for want of room, moves those on to their next sub-window and
// reports true: the request is to be decided again.
func (s *scratch) fallOver() bool {
	again := false
	for i := range s.spread {
		sp := &s.spread[i]
		sp.tried++
		r := &s.req.Results[sp.check]
		if !r.Fits && (sp.tried == 1 || r.RetryAfter < sp.retry) {
			sp.retry = r.RetryAfter
		}
		switch until := s.sent.Add(r.RetryAfter); {
		case r.Fits:
			sp.seen, sp.until = 0, time.Time{}
		case sp.seen == 0 || until.Before(sp.until):
			sp.seen, sp.until = sp.seen+1, until
		default:
			sp.seen++
		}
	}
	for i := range s.req.Checks {
		if r := &s.req.Results[i]; r.Fits || s.req.Checks[i].Shadow || store.Waived(s.req.Checks, s.req.Results, i) {
			continue
		}
		sp := s.spreadOf(i)
		if sp == nil || s.req.Results[i].Cause != store.CauseLimit || sp.tried >= sp.n {
			return false
		}
		again = true
	}
	for i := range s.spread {
		sp := &s.spread[i]
		if again && !s.req.Results[sp.check].Fits {
			sp.at = (sp.at + 1) % sp.n
			c := &s.req.Checks[sp.check]
			c.Values[len(c.Values)-1], c.Part = strconv.Itoa(sp.at), sp.at
			c.Limit, c.Burst = sp.share()
		}
	}
	return again
}

// spreadOf returns the spread state of check i, or nil.
func (s *scratch) spreadOf(i int) *spreading {
	for k := range s.spread {
		if s.spread[k].check == i {
			return &s.spread[k]
		}
	}
	return nil
}

// soonest sets each denying spread rule's retry-after to the soonest of
// its sub-windows tried: when the first of them has room.
func (s *scratch) soonest() {
	for i := range s.spread {
		sp := &s.spread[i]
		if r := &s.req.Results[sp.check]; !r.Fits {
			r.RetryAfter = sp.retry
		}
	}
}

// checkRequest reports why a store request built by a caller of
// Limiter.Decide cannot be decided: what resolve guarantees for its own,
// except that a request in store.ModeRecord may cost more than a limit.
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
		case c.Cost < 1 || c.Cost > MaxCost:
			return costRange(fmt.Sprintf("policy %q rule %q", req.Policy, c.Rule), c.Cost, 1)
		case c.Limit < 0 || c.Limit > MaxCost || c.Burst < 0 || c.Burst > MaxCost || c.Window < time.Microsecond || c.MinGap < 0:
			return fmt.Errorf("%w: policy %q rule %q: limit %d, burst %d, window %v, min gap %v; a limit and a burst are 0 to 2^53, a window at least 1µs",
				ErrInvalidPolicy, req.Policy, c.Rule, c.Limit, c.Burst, c.Window, c.MinGap)
		case req.Mode != store.ModeRecord && c.Limit > 0 && c.Algorithm != Credits && !coveredCheck(req.Checks, i) &&
			(c.Algorithm != GCRA && c.Cost > c.Limit || c.Algorithm == GCRA && c.Cost > c.Burst):
			return fmt.Errorf("%w: policy %q rule %q has limit %d (burst %d), request cost %d", ErrCostExceedsLimit, req.Policy, c.Rule, c.Limit, c.Burst, c.Cost)
		case c.Budget < 0:
			return fmt.Errorf("%w: policy %q rule %q: budget %v is negative; give the longest a slice may be held, or 0 for none",
				ErrInvalidPolicy, req.Policy, c.Rule, c.Budget)
		case c.Algorithm > Credits || c.Algorithm == store.Concurrency || c.MinGap > 0 && c.Algorithm != Log || c.Algorithm == GCRA && (c.Burst < 1 || !gcraSpans(c.Limit, c.Burst, c.Window)):
			return fmt.Errorf("%w: policy %q rule %q: algorithm %v, min gap %v, burst %d", ErrInvalidPolicy, req.Policy, c.Rule, c.Algorithm, c.MinGap, c.Burst)
		}
		if err := checkQuota(req.Checks, i); err != nil {
			return fmt.Errorf("%w: policy %q rule %q: %v", ErrInvalidPolicy, req.Policy, c.Rule, err)
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
