package sluice

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluicerate/sluice/store"
)

// Period is a calendar period's unit: Rule.Period, Refill.Every.
type Period = store.Period

// Calendar periods.
const (
	Day   = store.Day
	Week  = store.Week
	Month = store.Month
	Year  = store.Year
)

// MaxHistory is the most periods Rule.History keeps.
const MaxHistory = 1000

// Refill renews a Credits rule's balance at the start of each period of
// Every, in the rule's Location: to To, or by Add (at most one of the
// two). A key idle for several periods takes them all at its next use:
// To once, Add once per period.
type Refill struct {
	To    int64
	Add   int64
	Every Period
}

// Balance is a Credits rule's balance for one key.
type Balance struct {
	// Balance is the balance after the call.
	Balance int64

	// Applied reports whether the call changed the balance as asked:
	// false when reading it, and when the change's id was applied before
	// (a retried purchase is not added twice).
	Applied bool

	// NextRefill is the time until the next refill; 0 when the rule has
	// none.
	NextRefill time.Duration
}

// PeriodUsage is what a calendar quota counted in one period for one key.
type PeriodUsage struct {
	// Start and End are the period's bounds, in the rule's Location: it
	// holds the instants from Start up to, not including, End.
	Start, End time.Time

	// Used is the cost counted in the period: what decisions admitted
	// (or recorded), with settles applied; past the quota's Limit when
	// credits paid for its overage (Rule.Covers).
	Used int64
}

// ErrInvalidCredit reports a change to a credits balance that cannot be
// made: an amount out of range (or 0 to add), an id too long.
var ErrInvalidCredit = errors.New("sluice: invalid credit change")

// Credits returns the balance of the Credits rule named rule of p for the
// key attrs select (the values of the rule's By attributes; a missing one
// is an error wrapping ErrMissingAttribute), after the refills due. An
// empty rule names p's only Credits rule. It changes nothing but the
// refills a decision would apply too.
//
// Like every call to the store, it has Config.Timeout and the circuit
// breaker; a store failure is an error (there is no fallback for a
// balance), and so is a store that keeps no balances (store.Crediter).
func (l *Limiter) Credits(ctx context.Context, p *Policy, rule string, attrs map[string]string) (Balance, error) {
	return l.credit(ctx, p, rule, attrs, store.CreditGet, 0, "")
}

// AddCredits adds amount (below 0: takes it away) to the balance of the
// Credits rule named rule of p for the key attrs select, atomically with
// every decision. A non-empty id makes the change idempotent: a change
// with an id already applied to this balance (in the last
// store.CreditIDTTL, among its last store.MaxCreditIDs changes) changes
// nothing and reports Applied false. Amount is -MaxCost to MaxCost and not
// 0, id at most store.MaxCreditID bytes, else the error wraps
// ErrInvalidCredit and nothing changes. The balance saturates at
// ±MaxCost; taking away more than it holds leaves it below 0, so that
// requests are denied until it is topped up again. Errors as Credits'.
func (l *Limiter) AddCredits(ctx context.Context, p *Policy, rule string, attrs map[string]string, amount int64, id string) (Balance, error) {
	return l.credit(ctx, p, rule, attrs, store.CreditAdd, amount, id)
}

// SetCredits sets the balance to amount (-MaxCost to MaxCost), as
// AddCredits adds to it.
func (l *Limiter) SetCredits(ctx context.Context, p *Policy, rule string, attrs map[string]string, amount int64, id string) (Balance, error) {
	return l.credit(ctx, p, rule, attrs, store.CreditSet, amount, id)
}

// credit sends op with amount and id to the balance of p's credits rule
// named rule (or its only one) for attrs.
func (l *Limiter) credit(ctx context.Context, p *Policy, rule string, attrs map[string]string, op store.CreditOp, amount int64, id string) (Balance, error) {
	w, err := l.quotaWindow(p, rule, attrs, "credits rule", func(r *Rule) bool { return r.Algorithm == Credits })
	if err != nil {
		return Balance{}, err
	}
	req := store.CreditRequest{Policy: w.policy, Shared: w.shared, Check: w.check, Op: op, Amount: amount, ID: id}
	switch {
	case op != store.CreditGet && (amount < -MaxCost || amount > MaxCost):
		return Balance{}, fmt.Errorf("%w: policy %q rule %q: amount %d; give -2^53 to 2^53", ErrInvalidCredit, w.policy, w.check.Rule, amount)
	case op == store.CreditAdd && amount == 0:
		return Balance{}, fmt.Errorf("%w: policy %q rule %q: adding 0 changes nothing; give the amount to add (below 0 to take away)", ErrInvalidCredit, w.policy, w.check.Rule)
	case len(id) > store.MaxCreditID:
		return Balance{}, fmt.Errorf("%w: policy %q rule %q: an id of %d bytes; give at most %d, such as the payment's id", ErrInvalidCredit, w.policy, w.check.Rule, len(id), store.MaxCreditID)
	}
	if err := store.CheckCredit(&req); err != nil {
		return Balance{}, fmt.Errorf("%w: %v", ErrInvalidCredit, err) // not reached: checked above
	}
	cr, ok := l.store.(store.Crediter)
	if !ok {
		return Balance{}, fmt.Errorf("sluice: store %T keeps no credits balances (store.Crediter); use a store of this module", l.store)
	}
	_, err = guard(ctx, l, l.breakerOf(w.request()), func(ctx context.Context) (struct{}, error) {
		return struct{}{}, cr.Credit(ctx, &req)
	}, func(context.Context, error) struct{} { return struct{}{} })
	if err != nil {
		return Balance{}, err
	}
	return Balance{Balance: req.Balance, Applied: req.Applied, NextRefill: req.NextRefill}, nil
}

// Usage returns what the calendar quota named rule of p counted for the
// key attrs select: the current period first, then the rule's History
// periods before it, newest first, one per period whether or not anything
// was counted in it. An empty rule names p's only rule with a History
// (or, when none has one, its only calendar quota). Errors as Credits';
// the store must keep history (store.Historian).
func (l *Limiter) Usage(ctx context.Context, p *Policy, rule string, attrs map[string]string) ([]PeriodUsage, error) {
	w, err := l.quotaWindow(p, rule, attrs, "calendar quota", func(r *Rule) bool { return r.Period != noPeriod })
	if err != nil {
		return nil, err
	}
	h, ok := l.store.(store.Historian)
	if !ok {
		return nil, fmt.Errorf("sluice: store %T keeps no usage history (store.Historian); use a store of this module", l.store)
	}
	req := store.UsageRequest{Policy: w.policy, Shared: w.shared, Check: w.check}
	_, err = guard(ctx, l, l.breakerOf(w.request()), func(ctx context.Context) (struct{}, error) {
		return struct{}{}, h.Usage(ctx, &req)
	}, func(context.Context, error) struct{} { return struct{}{} })
	if err != nil {
		return nil, err
	}
	loc := w.check.Calendar.Location
	if loc == nil {
		loc = time.UTC
	}
	out := make([]PeriodUsage, len(req.Periods))
	for i, u := range req.Periods {
		out[i] = PeriodUsage{Start: time.UnixMicro(u.Start).In(loc), End: time.UnixMicro(u.End).In(loc), Used: u.Used}
	}
	return out, nil
}

// quotaWindow is the window of one rule for one key, as a decision
// resolves it, for the calls that read or change it outside decisions.
type quotaWindow struct {
	policy string
	shared []string
	check  store.Check
}

// request returns a store request of w's check alone, for the breaker of
// its shard.
func (w *quotaWindow) request() *store.Request {
	return &store.Request{Policy: w.policy, Shared: w.shared, Checks: []store.Check{w.check}}
}

// quotaWindow returns the window of the rule of p named rule, which must
// be a kind (what is), or of p's only rule of that kind when rule is
// empty (a calendar quota: its only one with a History, if any), for the
// key attrs select: its check as resolve makes it (the rule's limit after
// its Overrides and the runtime overrides), without its conditions, which
// decide whether a request is checked against the window, not which
// window it is.
func (l *Limiter) quotaWindow(p *Policy, rule string, attrs map[string]string, what string, kind func(*Rule) bool) (*quotaWindow, error) {
	cp, err := p.compiled()
	if err != nil {
		return nil, err
	}
	p = &cp.snap
	r, err := p.quotaRule(rule, what, kind)
	if err != nil {
		return nil, err
	}
	w := &quotaWindow{policy: p.Name}
	values := make([]string, 0, len(r.By))
	for _, a := range r.By {
		v, ok := attrs[a]
		if !ok {
			return nil, &MissingAttributeError{Policy: p.Name, Rule: r.Name, Attribute: a}
		}
		values = append(values, v)
	}
	limit, unlimited := r.limitFor(attrs)
	if unlimited {
		limit = r.Limit
	}
	var (
		o   Override
		has bool
	)
	if l.cfg.Overrides != nil {
		o, has = l.cfg.Overrides.Override(p.Name, r.Name, values)
	}
	f, err := r.overridden(limit, o, has)
	if err != nil {
		return nil, fmt.Errorf("policy %q: %w", p.Name, err)
	}
	w.check = store.Check{Rule: r.Name, Values: values, Limit: f.limit, Window: f.window, Algorithm: r.storeAlgorithm(), Cost: 1}
	r.setQuota(&w.check, 0)
	for _, a := range p.Rules[0].By {
		if p.Shares(a) {
			w.shared = append(w.shared, attrs[a])
		}
	}
	return w, nil
}

// quotaRule returns p's rule named name, which must be a kind (what is),
// or p's only rule of that kind when name is empty.
func (p *Policy) quotaRule(name, what string, kind func(*Rule) bool) (*Rule, error) {
	var names []string
	var only *Rule
	for i := range p.Rules {
		if r := &p.Rules[i]; kind(r) {
			names = append(names, r.Name)
			if only == nil || r.History > 0 && only.History == 0 {
				only = r
			}
		}
	}
	if name != "" {
		r := p.rule(name)
		switch {
		case r == nil:
			return nil, fmt.Errorf("%w: policy %q has no rule %q; %s", ErrInvalidPolicy, p.Name, name, nameOne(what, names))
		case !kind(r):
			return nil, fmt.Errorf("%w: policy %q rule %q is not a %s; %s", ErrInvalidPolicy, p.Name, name, what, nameOne(what, names))
		}
		return r, nil
	}
	withHistory := 0
	for _, n := range names {
		if p.rule(n).History > 0 {
			withHistory++
		}
	}
	switch {
	case len(names) == 0:
		return nil, fmt.Errorf("%w: policy %q has no %s", ErrInvalidPolicy, p.Name, what)
	case len(names) > 1 && withHistory != 1:
		return nil, fmt.Errorf("%w: policy %q has %d %ss (%s); name one", ErrInvalidPolicy, p.Name, len(names), what, strings.Join(names, ", "))
	}
	return only, nil
}

// nameOne says which rules of a kind (what) a call may name.
func nameOne(what string, names []string) string {
	if len(names) == 0 {
		return "it has no " + what
	}
	return fmt.Sprintf("its %ss: %s", what, strings.Join(names, ", "))
}
