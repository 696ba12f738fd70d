package sluice

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicerate/sluice/store"
)

// Budgets. A budgeted rule (Rule.Budget) is answered from slices of its
// capacity that the Limiter leases from the store (store.Budgeter) and
// admits from in memory; the other rules of its policy are decided by the
// store as usual. See docs/budgets.md for the argument that a slice never
// lets a rule admit more than its limit.

// MaxBudget returns the longest Budget a rule may take with these
// figures, so that its window stays exact and what a slice strands stays
// small beside the window: a quarter of the window for the log and the
// sliding counter (a log slice counts until its end plus the window, a
// counter slice is cut at its bucket's end), a quarter of the time GCRA's
// bucket takes to fill from empty (Burst intervals) for GCRA (held tokens
// hold back its refill). 0 when the rule admits nothing.
func MaxBudget(alg Algorithm, limit, burst int64, window time.Duration) time.Duration {
	if limit <= 0 {
		return 0
	}
	if alg == GCRA {
		iv := (window.Microseconds() + limit - 1) / limit
		return time.Duration(burst*iv/4) * time.Microsecond
	}
	return window / 4
}

// validateBudget reports why r's Budget cannot apply, or nil.
func (r *Rule) validateBudget() error {
	switch {
	case r.Budget < 0:
		return fmt.Errorf("budget %v is negative; give the longest a process may hold a slice (such as 1s), or leave it out", r.Budget)
	case r.Budget < MinBudget:
		return fmt.Errorf("budget %v is shorter than %v, too short for a slice to outlive its lease call", r.Budget, MinBudget)
	case r.MinGap > 0:
		return fmt.Errorf("a min gap cannot be budgeted: the gap is between events the store sees, and slices admit events it does not; leave budget or min_gap out")
	case r.Spread != 0:
		return fmt.Errorf("a spread rule cannot be budgeted: a budget answers the hot key in memory instead of spreading it; leave spread out")
	case r.Shadow:
		return fmt.Errorf("a shadow rule cannot be budgeted: a slice admits, it cannot report a would-be denial; budget the rule once it is enforced")
	}
	if limit := r.Limit; limit > 0 {
		if m := MaxBudget(r.Algorithm, limit, r.burst(limit), r.Window); r.Budget > m {
			return fmt.Errorf("budget %v is longer than %v, %s; give at most %v", r.Budget, m, budgetBoundReason(r.Algorithm), m)
		}
	}
	return nil
}

// budgetBoundReason says why MaxBudget bounds a budget for alg.
func budgetBoundReason(alg Algorithm) string {
	switch alg {
	case GCRA:
		return "a quarter of the time gcra's burst takes to refill (tokens held in a slice hold back its refill)"
	case SlidingCounter:
		return "a quarter of the window (a slice never outlives its fixed window, and a longer one is cut there)"
	}
	return "a quarter of the window (a slice counts in the window until its end plus the window: a longer one strands more of the limit)"
}

// validateBudget reports why rule r of p cannot be budgeted in p, or nil.
func (p *Policy) validateBudget(r *Rule) error {
	if r.Budget == 0 {
		return nil
	}
	switch {
	case p.Penalize:
		return fmt.Errorf("%w: policy %q rule %q: a penalize policy records denied attempts in the store, which a slice cannot; leave budget or penalize out",
			ErrInvalidPolicy, p.Name, r.Name)
	}
	for i := range p.Rules {
		if q := &p.Rules[i]; q.Spread > 1 {
			return fmt.Errorf("%w: policy %q: rule %q is budgeted and rule %q is spread; a policy takes one answer to its hot key, leave spread or budget out",
				ErrInvalidPolicy, p.Name, r.Name, q.Name)
		}
	}
	return nil
}

// budgetable reports whether a slice of c may be leased: its figures
// (after any override) keep c.Budget within MaxBudget and leave room.
func budgetable(c *store.Check) bool {
	return c.Budget > 0 && !c.Shadow && c.MinGap == 0 && c.Parts < 2 && c.Algorithm <= store.SlidingCounter &&
		c.Budget <= MaxBudget(c.Algorithm, c.Limit, c.Burst, c.Window)
}

// BudgetStats are what a Limiter did with the slices of its budgeted rules
// so far (see Rule.Budget).
type BudgetStats struct {
	// SlicesLeased counts the slices the store granted (of at least one
	// unit), UnitsLeased their units.
	SlicesLeased, UnitsLeased int64

	// UnitsReturned counts the unused units of slices given back before
	// their end, by Limiter.Close or with the call that leases the next
	// slice, in a call the store answered; UnitsStranded the unused units
	// of slices that reached their end first, or whose return failed: the
	// store counts them as spent (see docs/budgets.md).
	UnitsReturned, UnitsStranded int64

	// Local counts the decisions of policies with a budgeted rule answered
	// from slices alone, without a store call (Decision.Local), and Store
	// those that asked the store.
	Local, Store int64
}

// BudgetStats returns what the Limiter did with slices so far.
func (l *Limiter) BudgetStats() BudgetStats {
	b := &l.budgets
	return BudgetStats{SlicesLeased: b.leased.Load(), UnitsLeased: b.units.Load(), UnitsReturned: b.returned.Load(),
		UnitsStranded: b.stranded.Load(), Local: b.local.Load(), Store: b.byStore.Load()}
}

// budgets is a Limiter's slices, one per budgeted window it decided.
type budgets struct {
	mu     sync.RWMutex
	slices map[string]*slice // by window: policy, rule and values (budgetKey)
	closed bool
	sweep  int // the number of slices at which idle ones are next dropped

	leased, units, returned, stranded, local, byStore atomic.Int64
}

// slice is this Limiter's slice of one budgeted window: the lease it
// holds, if any, and what sizes the next.
type slice struct {
	mu     sync.Mutex
	policy string
	check  store.Check // the window, with the figures of its last lease (Values its own)
	shared []string

	// The lease: granted 0 when there is none. sent is when the call that
	// leased it was sent, deadline when this Limiter stops admitting from
	// it (sent + Life less a margin: before the store's End), resetAt when
	// the window is empty as the grant reported it, last when a unit was
	// last taken; all on the Limiter's clock.
	id                   string
	gen                  uint64 // counts the leases held: what a take was taken from
	granted, used        int64
	start, end           int64
	sent, deadline, last time.Time
	resetAt              time.Time

	leasing bool // a call asking for a slice is out
	closed  bool // the Limiter closed, or the slice was dropped: no more leases

	// known reports that remaining holds the store's Remaining for the
	// window at its last answer; want is the size of the next slice: the
	// average demand per Budget over the last slices.
	known     bool
	remaining int64
	want      float64
}

// budgetMargin is how much earlier than the store's end a slice of life
// ends on the Limiter's clock, for the two clocks' rates.
func budgetMargin(life time.Duration) time.Duration { return life / 32 }

// appendBudgetKey appends the key of c's window of policy to dst.
func appendBudgetKey(dst []byte, policy string, c *store.Check) []byte {
	dst = append(dst, policy...)
	dst = append(dst, 0)
	dst = append(dst, c.Rule...)
	for _, v := range c.Values {
		dst = append(dst, 0)
		dst = strconv.AppendInt(dst, int64(len(v)), 10)
		dst = append(dst, ':')
		dst = append(dst, v...)
	}
	return dst
}

// get returns the slice of c's window (key: appendBudgetKey), making one.
func (b *budgets) get(key []byte, policy string, shared []string, c *store.Check, now time.Time) *slice {
	b.mu.RLock()
	sl := b.slices[string(key)]
	b.mu.RUnlock()
	if sl != nil {
		return sl
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if sl = b.slices[string(key)]; sl != nil {
		return sl
	}
	if b.slices == nil {
		b.slices = make(map[string]*slice)
	}
	if len(b.slices) >= b.sweep {
		b.dropIdle(now)
		b.sweep = 2*len(b.slices) + 64
	}
	sl = &slice{policy: policy, check: *c, shared: slices.Clone(shared), closed: b.closed}
	sl.check.Values = slices.Clone(c.Values)
	b.slices[string(key)] = sl
	return sl
}

// dropIdle drops the slices that hold no live lease and ask for none, so
// that the map does not grow with every window ever decided. b.mu is held.
func (b *budgets) dropIdle(now time.Time) {
	for k, sl := range b.slices {
		sl.mu.Lock()
		if !sl.leasing && (sl.granted == sl.used || !now.Before(sl.deadline)) {
			sl.retire(b, now)
			sl.closed = true
			delete(b.slices, k)
		}
		sl.mu.Unlock()
	}
}

// take takes c.Cost units of the slice for a request at now, setting r to
// the local figures, and reports whether it could (the slice has a live
// lease, leased with c's figures, with that many units left) and the
// lease's generation, for untake.
func (sl *slice) take(c *store.Check, now time.Time, r *store.Result) (uint64, bool) {
	sl.mu.Lock()
	if sl.granted-sl.used < c.Cost || !now.Before(sl.deadline) || !sameFigures(&sl.check, c) {
		sl.mu.Unlock()
		return 0, false
	}
	gen := sl.gen
	sl.used += c.Cost
	sl.last = now
	left := sl.granted - sl.used
	reset := max(0, sl.resetAt.Sub(now))
	sl.mu.Unlock()
	top := c.Limit
	if c.Algorithm == store.GCRA {
		top = c.Burst
	}
	*r = store.Result{Fits: true, Used: max(0, top-left), Remaining: left, ResetAfter: reset}
	return gen, true
}

// untake gives back cost units taken, from the lease of generation gen,
// for a request that another rule denied. A lease ended since (retired
// while the request was at the store) has been returned with those units
// counted as used: they stay so, in the store, and nothing is given back
// here; adding them to the next lease would admit units no lease covers.
func (sl *slice) untake(cost int64, gen uint64) {
	sl.mu.Lock()
	if sl.gen == gen && sl.granted > 0 {
		sl.used = max(0, sl.used-cost)
	}
	sl.mu.Unlock()
}

// sameFigures reports whether a and b are the same window's figures.
func sameFigures(a, b *store.Check) bool {
	return a.Limit == b.Limit && a.Window == b.Window && a.Burst == b.Burst && a.Algorithm == b.Algorithm && a.Budget == b.Budget
}

// ask returns the size of the slice to ask for with a request of c at
// now, 0 for none, and marks the slice leasing when it asks: none while
// another call asks, while the lease can answer c, and near the limit
// (the store's last Remaining at most nearLimit), where requests are
// decided one by one so that the last units are not stranded in slices.
// The size follows demand, shrinks as the window fills (at most an
// eighth of the store's last Remaining), and is at least c.Cost. When it
// asks, the lease it held, if any, is ended and given back in the same
// call: ret, with live set when it had not reached its end (its unused
// units are returned, not stranded).
func (sl *slice) ask(b *budgets, c *store.Check, now time.Time) (want int64, ret store.SliceReturn, has, live bool) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	switch {
	case sl.leasing || sl.closed:
		return 0, ret, false, false
	case sl.granted-sl.used >= c.Cost && now.Before(sl.deadline) && sameFigures(&sl.check, c):
		return 0, ret, false, false // another goroutine's request took the units c found missing
	case sl.known && sl.remaining <= nearLimit(c):
		return 0, ret, false, false
	}
	want = max(c.Cost, int64(sl.want))
	if sl.known {
		want = min(want, sl.remaining/8)
	}
	if want < c.Cost {
		return 0, ret, false, false
	}
	if sl.granted > 0 {
		ret, has, live = sl.returnOf(), true, now.Before(sl.deadline)
	}
	sl.retire(b, now)
	sl.leasing = true
	return want, ret, has, live
}

// returnOf returns the return of the slice's lease as it stands. sl.mu
// is held.
func (sl *slice) returnOf() store.SliceReturn {
	return store.SliceReturn{Check: sl.check, Shared: sl.shared, ID: sl.id, Start: sl.start, End: sl.end, Granted: sl.granted, Used: sl.used}
}

// nearLimit is the store's Remaining at and below which no slice of c is
// asked for: a 64th of the limit (of the burst for GCRA), and at least
// twice the request's cost.
func nearLimit(c *store.Check) int64 {
	top := c.Limit
	if c.Algorithm == store.GCRA {
		top = c.Burst
	}
	return max(2*c.Cost, top/64)
}

// retire ends the slice's lease, if any, at now: its unused units are
// stranded when its end has passed, and its demand sizes the next slice.
// sl.mu is held.
func (sl *slice) retire(b *budgets, now time.Time) {
	if sl.granted == 0 {
		return
	}
	life := sl.deadline.Sub(sl.sent)
	until := now
	if sl.deadline.Before(now) {
		until = sl.deadline
	}
	if sl.used == sl.granted {
		until = sl.last
	}
	elapsed := max(until.Sub(sl.sent), life/16, time.Microsecond)
	rate := float64(sl.used) * float64(life) / float64(elapsed) // units per Budget
	if sl.want == 0 {
		sl.want = rate
	} else {
		sl.want = (sl.want + rate) / 2
	}
	if unused := sl.granted - sl.used; unused > 0 && !now.Before(sl.deadline) {
		b.stranded.Add(unused)
	}
	sl.granted, sl.used = 0, 0
	sl.gen++
}

// install takes a grant of a call sent at sent for c; the store wrote
// none when the request was denied.
func (sl *slice) install(b *budgets, c *store.Check, g *store.Grant, id string, sent time.Time, admitted bool) {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	sl.leasing = false
	if !admitted || g.Granted <= 0 {
		return
	}
	sl.known, sl.remaining = true, g.Result.Remaining
	values := sl.check.Values
	sl.check = *c
	sl.check.Values = values
	sl.id, sl.granted, sl.used, sl.start, sl.end = id, g.Granted, 0, g.Start, g.End
	sl.gen++
	sl.sent, sl.last = sent, sent
	sl.deadline = sent.Add(g.Life - budgetMargin(g.Life))
	sl.resetAt = sent.Add(g.Result.ResetAfter)
	b.leased.Add(1)
	b.units.Add(g.Granted)
	if sl.closed {
		// The Limiter closed while the call was out: the slice is not
		// used, and the store counts it until its end.
		b.stranded.Add(g.Granted)
		sl.used = sl.granted
	}
}

// observe notes the store's Remaining for the slice's window after a
// decision per request.
func (sl *slice) observe(r *store.Result, failed bool) {
	sl.mu.Lock()
	if failed {
		sl.leasing = false
	} else {
		sl.known, sl.remaining = true, r.Remaining
	}
	sl.mu.Unlock()
}

// newSliceID returns a new slice id: 16 random bytes, base64.
func newSliceID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// budgetWork is the per-decision state of a request with budgeted rules,
// in its scratch.
type budgetWork struct {
	key    []byte
	slices []*slice // per check of the request: its slice, or nil
	local  []bool   // per check: answered from its slice
	gens   []uint64 // per check answered from its slice: the lease's generation
	asked  []int    // per ask: the request's check
	live   []bool   // per return: its lease had not reached its end
	index  []int    // per check of sub: the request's check
	sub    store.Request
	b      store.BudgetRequest
}

// decideBudget decides s's request, whose policy has budgeted rules, into
// d: each budgeted check from its slice when it can, the others by the
// store, asking in the same call for a new slice for each budgeted check
// its slice could not answer. A request the store denies gives back what
// it took from slices: all or nothing.
func (l *Limiter) decideBudget(ctx context.Context, s *scratch, d *Decision) error {
	req, w, bs := &s.req, &s.budget, &l.budgets
	now := l.clock().Now()
	results := req.ResultsBuffer()
	n := len(req.Checks)
	w.slices, w.local, w.gens = w.slices[:0], w.local[:0], w.gens[:0]
	nlocal := 0
	for i := range req.Checks {
		c := &req.Checks[i]
		var sl *slice
		if c.Budget > 0 && budgetable(c) {
			w.key = appendBudgetKey(w.key[:0], req.Policy, c)
			sl = bs.get(w.key, req.Policy, req.Shared, c, now)
		}
		var gen uint64
		took := false
		if sl != nil {
			gen, took = sl.take(c, now, &results[i])
		}
		w.slices, w.local, w.gens = append(w.slices, sl), append(w.local, took), append(w.gens, gen)
		if took {
			nlocal++
		}
	}
	if nlocal == n {
		bs.local.Add(1)
		d.combine(req, &s.statuses)
		d.Local = true
		return nil
	}
	bs.byStore.Add(1)

	sub := &w.sub
	sub.Policy, sub.Shared, sub.Mode, sub.DryRun = req.Policy, req.Shared, store.ModeAllow, false
	sub.Checks, w.index, w.asked, w.live = sub.Checks[:0], w.index[:0], w.asked[:0], w.live[:0]
	w.b.Asks, w.b.Returns = w.b.Asks[:0], w.b.Returns[:0]
	for i := range req.Checks {
		if w.local[i] {
			continue
		}
		if sl := w.slices[i]; sl != nil {
			if want, ret, has, live := sl.ask(bs, &req.Checks[i], now); want > 0 {
				w.b.Asks = append(w.b.Asks, store.SliceAsk{Check: len(sub.Checks), Want: want, ID: newSliceID()})
				w.asked = append(w.asked, i)
				if has {
					w.b.Returns = append(w.b.Returns, ret)
					w.live = append(w.live, live)
				}
			}
		}
		sub.Checks = append(sub.Checks, req.Checks[i])
		w.index = append(w.index, i)
	}
	err := l.budgetCall(ctx, sub, &w.b)
	for k := range w.b.Returns {
		// A lease given back before its end: its unused units are
		// returned, or stranded when the call failed.
		if r := &w.b.Returns[k]; w.live[k] {
			if err == nil {
				bs.returned.Add(r.Granted - r.Used)
			} else {
				bs.stranded.Add(r.Granted - r.Used)
			}
		}
		w.b.Returns[k] = store.SliceReturn{}
	}
	for k, i := range w.index {
		if sl := w.slices[i]; sl != nil && err == nil {
			sl.observe(&sub.Results[k], false)
		}
	}
	if err != nil {
		for _, i := range w.asked {
			w.slices[i].observe(nil, true)
		}
		*d = l.degraded(ctx, req)
		if !d.Allowed {
			l.untakeAll(s)
		}
		return err
	}
	allowed := true
	for k, i := range w.index {
		results[i] = sub.Results[k]
		allowed = allowed && (results[i].Fits || req.Checks[i].Shadow)
	}
	for a, i := range w.asked {
		w.slices[i].install(bs, &req.Checks[i], &w.b.Grants[a], w.b.Asks[a].ID, now, allowed)
	}
	if !allowed {
		l.untakeAll(s)
	}
	d.combine(req, &s.statuses)
	d.Local = allowed && nlocal > 0
	return nil
}

// untakeAll gives back what s's request took from slices.
func (l *Limiter) untakeAll(s *scratch) {
	for i, took := range s.budget.local {
		if took {
			s.budget.slices[i].untake(s.req.Checks[i].Cost, s.budget.gens[i])
			s.budget.local[i] = false
		}
	}
}

// budgetCall sends req, with b's returns and asks when it has any, to the
// store under the failure policy.
func (l *Limiter) budgetCall(ctx context.Context, req *store.Request, b *store.BudgetRequest) error {
	op := func(ctx context.Context) (struct{}, error) {
		if len(b.Asks) == 0 && len(b.Returns) == 0 {
			return struct{}{}, l.store.Decide(ctx, req)
		}
		return struct{}{}, l.budgeter.Budget(ctx, req, b)
	}
	if l.local {
		_, err := op(ctx)
		return err
	}
	_, err := guard(ctx, l, l.breakerOf(req), op, func(context.Context, error) struct{} { return struct{}{} })
	return err
}

// Close gives back the unused units of the Limiter's slices to the store
// and stops leasing: later decisions of budgeted rules go to the store one
// by one. It does not close the store. A slice whose return fails is left
// to end in the store (its units are stranded until then); the errors are
// joined.
func (l *Limiter) Close() error {
	bs := &l.budgets
	bs.mu.Lock()
	bs.closed = true
	all := make([]*slice, 0, len(bs.slices))
	for _, sl := range bs.slices {
		all = append(all, sl)
	}
	bs.mu.Unlock()
	now := l.clock().Now()
	var errs []error
	for _, sl := range all {
		sl.mu.Lock()
		sl.closed = true
		var ret store.SliceReturn
		live := sl.granted > sl.used && now.Before(sl.deadline)
		if live {
			ret = sl.returnOf()
			sl.used = sl.granted // nothing more is taken from it
		}
		sl.retire(bs, now)
		sl.mu.Unlock()
		if !live {
			continue
		}
		req := &store.Request{Policy: sl.policy, Shared: sl.shared}
		b := &store.BudgetRequest{Returns: []store.SliceReturn{ret}}
		if err := l.budgetCall(context.Background(), req, b); err != nil {
			bs.stranded.Add(ret.Granted - ret.Used)
			errs = append(errs, fmt.Errorf("sluice: returning a slice of policy %q rule %q: %w", sl.policy, ret.Check.Rule, err))
			continue
		}
		bs.returned.Add(ret.Granted - ret.Used)
	}
	return errors.Join(errs...)
}
