package store

import (
	"context"
	"fmt"
	"time"
)

// Refill says what each new period of a Credits check's Calendar does to
// its balance. At most one of To and Add is above 0; both 0 is no refill.
// A store applies the refills of every period that began since the
// balance was last written, at the first call that reads it (a decision,
// a settle, a Credit call): To sets the balance to To (once, however many
// periods passed), Add adds Add per period that began (saturating at
// MaxCost). A balance first read in a period starts at Check.Limit and
// takes no refill for that period.
type Refill struct {
	To  int64
	Add int64
}

// CreditOp says what a CreditRequest does.
type CreditOp uint8

const (
	// CreditGet reads the balance.
	CreditGet CreditOp = iota

	// CreditAdd adds Amount (below 0: takes it away) to the balance,
	// saturating at ±MaxCost.
	CreditAdd

	// CreditSet sets the balance to Amount.
	CreditSet
)

// MaxCreditIDs is how many ids of changes a store remembers per balance,
// newest first, and CreditIDTTL how long: a change repeated with an id that
// is remembered is not applied again.
const (
	MaxCreditIDs = 1000
	CreditIDTTL  = 30 * 24 * time.Hour
)

// MaxCreditID is the longest CreditRequest.ID, in bytes.
const MaxCreditID = 128

// CreditRequest is one call to Crediter.Credit: a change to, or a read of,
// the balance of one Credits check's window.
type CreditRequest struct {
	// Policy, Shared and Check name the balance, as for a Request with
	// this one check: Check.Algorithm is Credits, Check.Limit the balance
	// a window not yet in the store starts at, Check.Calendar and
	// Check.Refill its refills. Check.Cost is not used.
	Policy string
	Shared []string
	Check  Check

	// Op is what to do, Amount the figure to add or set: -MaxCost to
	// MaxCost, not 0 for CreditAdd.
	Op     CreditOp
	Amount int64

	// ID, when not empty, makes the change idempotent: a change with an
	// ID the store remembers for this balance (see MaxCreditIDs) changes
	// nothing and reports Applied false. At most MaxCreditID bytes.
	ID string

	// Balance is set by Credit: the balance after the call (after the
	// refills it applied). Applied reports whether the call changed it as
	// asked: false for CreditGet and for a repeated ID. NextRefill is the
	// time until the next refill, 0 when the check has none.
	Balance    int64
	Applied    bool
	NextRefill time.Duration
}

// Crediter is implemented by a store that keeps Credits checks' balances:
// every store of this module. Credit applies req atomically with every
// decision of the same window, at the store's time.
type Crediter interface {
	Credit(ctx context.Context, req *CreditRequest) error
}

// CheckCredit reports what is wrong with req, nil when a store may apply
// it: the errors name the rule and say how to fix the call.
func CheckCredit(req *CreditRequest) error {
	switch {
	case req.Check.Algorithm != Credits:
		return fmt.Errorf("rule %q: not a credits rule (algorithm %v)", req.Check.Rule, req.Check.Algorithm)
	case req.Op > CreditSet:
		return fmt.Errorf("rule %q: unknown credit operation %d", req.Check.Rule, req.Op)
	case req.Amount < -MaxCost || req.Amount > MaxCost:
		return fmt.Errorf("rule %q: amount %d out of range; give -2^53 to 2^53", req.Check.Rule, req.Amount)
	case req.Op == CreditAdd && req.Amount == 0:
		return fmt.Errorf("rule %q: adding 0 changes nothing; give the amount to add (below 0 to take away)", req.Check.Rule)
	case len(req.ID) > MaxCreditID:
		return fmt.Errorf("rule %q: an id of %d bytes; give at most %d, such as the payment's id", req.Check.Rule, len(req.ID), MaxCreditID)
	}
	return nil
}

// PeriodUsage is the total of one period of a Periodic check.
type PeriodUsage struct {
	// Index, Start and End name the period (see Calendar); Start and End
	// are µs since the Unix epoch.
	Index, Start, End int64

	// Used is the cost counted in the period: what decisions recorded,
	// with settles and rollbacks applied.
	Used int64
}

// UsageRequest is one call to Historian.Usage: the totals of one Periodic
// check's window.
type UsageRequest struct {
	// Policy, Shared and Check name the window, as for a Request with
	// this one check: Check.Algorithm is Periodic.
	Policy string
	Shared []string
	Check  Check

	// At, when not 0, is the time (µs since the Unix epoch) whose period
	// is the current one; 0 is the store's time.
	At int64

	// Periods is set by Usage: the current period first, then the
	// Check.History periods before it, newest first, one per period
	// whether or not anything was counted in it (Used 0). It reuses the
	// slice's capacity.
	Periods []PeriodUsage
}

// Historian is implemented by a store that keeps the totals of Periodic
// checks' past periods: every store of this module. It keeps, per window,
// the current period's count and the totals of Check.History periods
// before it: constant memory per window.
type Historian interface {
	Usage(ctx context.Context, req *UsageRequest) error
}
