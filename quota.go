package sluice

import (
	"context"
	"errors"
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
	Start, End time.Time
	Used       int64
}

// errQuotaTODO is returned while the calendar and credits calls are built.
var errQuotaTODO = errors.New("sluice: calendar quotas and credits are not built yet")

// Credits returns the balance of the Credits rule named rule of p for the
// key attrs select. An empty rule names p's only Credits rule.
func (l *Limiter) Credits(ctx context.Context, p *Policy, rule string, attrs map[string]string) (Balance, error) {
	return Balance{}, errQuotaTODO
}

// AddCredits adds amount (below 0: takes it away) to the balance of the
// Credits rule named rule of p for the key attrs select, atomically with
// every decision. A non-empty id makes the change idempotent: a change
// with an id already applied to this balance (in the last
// store.CreditIDTTL, among its last store.MaxCreditIDs changes) changes
// nothing and reports Applied false.
func (l *Limiter) AddCredits(ctx context.Context, p *Policy, rule string, attrs map[string]string, amount int64, id string) (Balance, error) {
	return Balance{}, errQuotaTODO
}

// SetCredits sets the balance, as AddCredits adds to it.
func (l *Limiter) SetCredits(ctx context.Context, p *Policy, rule string, attrs map[string]string, amount int64, id string) (Balance, error) {
	return Balance{}, errQuotaTODO
}

// Usage returns what the calendar quota named rule of p counted for the
// key attrs select: the current period first, then the rule's History
// periods before it, newest first. An empty rule names p's only rule with
// a History.
func (l *Limiter) Usage(ctx context.Context, p *Policy, rule string, attrs map[string]string) ([]PeriodUsage, error) {
	return nil, errQuotaTODO
}
