package sluice

import (
	"sync"
	"time"

	"github.com/sluicerate/sluice/store"
)

// Decision is the outcome of deciding, peeking at or recording a request
// against a policy. A denial is a Decision with Allowed false, not an error.
//
// Every store gives the same figures, and every protocol of sluice serve
// reports them (rounding durations up to its unit). They describe the state
// the decision leaves behind:
//
//	field        allowed (or recorded)             denied
//	Used         the window's cost, this request   the window's cost; with Penalize (and
//	             included                          for Record) this request included
//	Remaining    Limit - Used, at least 0          Limit - Used, at least 0
//	RetryAfter   0                                 the least wait after which the same
//	                                               request is admitted if nothing else
//	                                               happens, counting what the decision
//	                                               recorded
//	ResetAfter   time until the window is empty    time until the window is empty
//	Cause        ""                                why DeniedBy's rule did not fit
//
// A shadow denial (Shadowed: the policy, or a rule, is in shadow mode and
// would have denied) is allowed and otherwise reports the denial it would
// have been: DeniedBy and Cause name the rule that did not fit, and
// RetryAfter is the wait that denial would have announced. A shadow rule's
// request is recorded in every window, so Used counts it and may pass the
// shadow rule's Limit; a shadow policy's would-be denial records nothing,
// as a denial does, so Used does not count it.
//
// A calendar quota (Rule.Period) reports its period's count: RetryAfter of
// a denial is the time to the next period's start, ResetAfter the time to
// the current one's end. A Credits rule reports its balance as Remaining
// (Used is Limit less it), ResetAfter 0. Credits that cover a calendar
// quota (Rule.Covers) decide in its place when it has no room: the quota's
// status then does not fit, and does not deny when the credits pay
// (DeniedBy is the credits rule when they cannot, with CauseCredits), and
// Remaining counts the quota's room and the balance together.
//
// The shape is the same whatever answered: the store, the deny cache
// (Cached) or a fallback store (Degraded) report one status per rule that
// applied, in policy order.
//
// Peek gives the decision Allow would give, figures included (Used counts
// the request when Allow would admit or penalize it), and records nothing.
// Durations are exact to the microsecond: waiting RetryAfter and sending the
// same request again admits it, and sending it a microsecond earlier does
// not, unless something else changed the windows in between.
//
// Example: a policy of global 10 and category 3 per 60s, after three
// "errors" notifications, decides a fourth "errors" notification as
// Allowed=false, DeniedBy="category", Cause=CauseLimit, Remaining=0,
// RetryAfter=the time until the oldest "errors" entry leaves its window, and
// Limits holding global (Used 3, Remaining 7) and category (Used 3,
// Remaining 0).
type Decision struct {
	// Allowed reports whether the request fits every rule (always true for
	// a shadow policy).
	Allowed bool

	// Remaining is the smallest Remaining over the rules: how much more cost
	// fits after this decision.
	Remaining int64

	// RetryAfter is 0 when the request is allowed (unless Shadowed: then
	// the wait the denial would have announced). When it is denied, it is
	// the least wait after which the same request would be admitted if
	// nothing else happened in between: the largest RetryAfter over the
	// rules. With Penalize it counts the attempt this decision recorded.
	RetryAfter time.Duration

	// ResetAfter is the time until every window of the policy is empty,
	// after this decision.
	ResetAfter time.Duration

	// DeniedBy names the first rule, in policy order, that did not fit;
	// empty when every rule fits. A Shadowed decision names the rule that
	// would have denied.
	DeniedBy string

	// Cause says why DeniedBy's rule did not fit: CauseLimit, CauseGap,
	// CauseConcurrency or CauseCredits; empty when every rule fits.
	Cause Cause

	// Shadowed reports that the request was admitted although DeniedBy
	// did not fit it: the policy, or that rule, is in shadow mode.
	Shadowed bool

	// Unlimited reports that no rule of the policy applied to the request
	// (or every one that did exempts it): it was admitted with no limit,
	// recorded nowhere, and Remaining is UnlimitedRemaining.
	Unlimited bool

	// Degraded reports that the store failed and this decision was made by
	// the Limiter's failure policy instead of the store.
	Degraded bool

	// Cached reports a denial answered from the Limiter's deny cache,
	// without asking the store (see Policy.CacheDenials): the store's
	// decision of the same request (same cost, same windows) when it last
	// denied it, in the same shape. Limits holds every rule's status, as
	// the store's answer does, with the figures the store gave then (Used,
	// Remaining, Fits, Cause) and RetryAfter and ResetAfter counted down
	// since; DeniedBy, Cause, Remaining and RetryAfter are combined from
	// them as for the store's answer. The waits are the store's to the
	// microsecond while nothing else was written to the windows; a rule
	// that fit may have taken other requests since.
	Cached bool

	// Local reports a decision whose budgeted rules (Rule.Budget) were
	// answered from this Limiter's slices, in memory, without asking the
	// store for them (the policy's other rules, if any, were decided by the
	// store). A local decision is always allowed: a request the slices
	// cannot answer goes to the store. Its budgeted rules' Remaining is
	// what this Limiter's slice has left, units the store has already
	// counted (so never more than the store would grant), Used the limit
	// less that, and ResetAfter the store's at the lease counted down since.
	Local bool

	// one and more hold the statuses Limits returns: one when a single
	// rule applied (hasOne), more when several did. A decision of one rule,
	// the most common, carries its status in itself and allocates nothing.
	hasOne bool
	one    [1]LimitStatus
	more   []LimitStatus
}

// UnlimitedRemaining is Decision.Remaining when no rule limits the request
// (Decision.Unlimited): 2^53-1, 9007199254740991, the largest integer that
// a float64, and so a JSON number read by JavaScript, holds exactly along
// with every integer below it. A client reads the figure sluice sent, in
// any language; to tell an unlimited decision, test Unlimited (or, over
// HTTP, an empty limits list), not the figure.
const UnlimitedRemaining = 1<<53 - 1

// Cause says why a rule did not fit a request.
type Cause string

// Causes of a denial.
const (
	// CauseLimit: the window holds too much cost for the request's. A
	// client waits for old entries to leave the window.
	CauseLimit Cause = "limit"

	// CauseGap: the request comes sooner than the rule's MinGap after the
	// last event. A client waits for the gap, usually a short time.
	CauseGap Cause = "gap"

	// CauseConcurrency: a concurrency rule's leases are all taken. The
	// wait is until the earliest live lease expires: the latest moment a
	// slot is certainly free, sooner when a holder releases its lease.
	CauseConcurrency Cause = "concurrency"

	// CauseCredits: a Credits rule's balance is below the cost (for
	// credits that cover a calendar quota, the quota has no room either).
	// The wait is until the next refill, or the quota's next period,
	// whichever admits the request first; a purchase (AddCredits) admits
	// it sooner.
	CauseCredits Cause = "credits"
)

// Limits returns one status per rule that applied to the request, in
// policy order, whoever answered (the store, the deny cache or a fallback
// store); it is empty only for an Unlimited decision and one the failure
// policy made alone (FailedClosed). The statuses are d's own: the slice
// may point into d, so a status read through it after d was overwritten
// (by another decision assigned to d) reads the new one; copy a status, or
// d, to keep it. Changing a status through the slice changes d's.
func (d *Decision) Limits() []LimitStatus {
	if d.hasOne {
		return d.one[:]
	}
	return d.more
}

// SetLimits sets the statuses Limits returns to ls, which d keeps (for
// a front end or a test that builds a Decision of its own; a Limiter fills
// its decisions itself). It leaves d's other fields as they are.
func (d *Decision) SetLimits(ls []LimitStatus) {
	if len(ls) == 1 {
		d.hasOne, d.one[0], d.more = true, ls[0], nil
		return
	}
	d.hasOne, d.one[0], d.more = false, LimitStatus{}, ls
}

// FailedClosed reports whether d is a denial made by the failure policy
// alone: the store failed and no fallback store decided, so no rule was
// checked. Serve it as "unavailable" (HTTP 503), not as a quota denial (429).
// A degraded decision from a fallback store has rule statuses and is an
// ordinary decision.
func (d *Decision) FailedClosed() bool {
	return d.Degraded && !d.Allowed && !d.hasOne && len(d.more) == 0
}

// LimitStatus is the state of one rule's window as a decision leaves it
// (see Decision for the figures' contract).
type LimitStatus struct {
	// Rule is the rule's name.
	Rule string

	// Limit and Window are the rule's; for a concurrency rule, the most
	// leases alive at once and the lease time, and Used counts the leases
	// alive.
	Limit  int64
	Window time.Duration

	// Used is the cost counted in the window after the decision: the
	// request included when it was recorded (or, for a peek, would be).
	// It is 0 to MaxCost: a window recorded past MaxCost in total counts
	// MaxCost.
	Used int64

	// Remaining is the cost that fits at once after the decision, 0 to
	// Limit (to the burst, for GCRA): Limit-Used for the Log and
	// SlidingCounter algorithms, what is left of the burst for GCRA.
	Remaining int64

	// Fits reports whether the request fit this rule (its cost and, if the
	// rule has one, its minimum gap) before the decision.
	Fits bool

	// Cause says why the request did not fit this rule: CauseLimit when the
	// window had no room for its cost, CauseGap when it came too soon after
	// the last event, and when both, the one that takes longer to clear
	// (CauseLimit on a tie); CauseConcurrency when a concurrency rule's
	// leases were all alive. Empty when it fit.
	Cause Cause

	// RetryAfter is 0 when the decision allowed the request. When it
	// denied it, RetryAfter is the least wait after which this rule would
	// fit the same request if nothing else happened, counting what the
	// decision recorded (so a rule that fit may need a wait after a
	// penalized attempt).
	RetryAfter time.Duration

	// ResetAfter is the time until this rule's window is empty.
	ResetAfter time.Duration

	// Shadow reports that the rule is in shadow mode: when it does not fit,
	// it does not deny.
	Shadow bool
}

// newDecision combines the results of a store request into a Decision:
// allowed when every check that is not Shadow fits, Remaining the tightest
// rule, RetryAfter the largest over the rules that are not Shadow (0 when
// allowed, unless a shadow rule would deny: then its wait), ResetAfter the
// largest, DeniedBy and Cause from the first rule that does not fit, a
// shadow rule only when no other denies. Every store's results are combined
// the same way. A single status is held in the Decision; several are taken
// from b, or from a shared block when b is nil (see statuses).
func newDecision(req *store.Request, b *statuses) Decision {
	var d Decision
	d.combine(req, b)
	return d
}

// combine sets d to newDecision(req, b), in place: the road of
// Limiter.AllowN, which fills its caller's Decision instead of returning
// one by value through every call between.
func (d *Decision) combine(req *store.Request, b *statuses) {
	switch {
	case len(req.Checks) == 0:
		*d = Decision{Allowed: true, Unlimited: true, Remaining: UnlimitedRemaining}
		return
	case len(req.Checks) == 1 && !req.Checks[0].Shadow:
		d.combineOne(req, b)
		return
	}
	d.combineAll(req, b)
}

// combineAll is combine for any number of checks.
func (d *Decision) combineAll(req *store.Request, b *statuses) {
	*d = Decision{Allowed: true}
	if len(req.Checks) == 1 {
		d.hasOne = true
	} else {
		d.more = b.take(len(req.Checks))
	}
	limits := d.Limits()
	var shadowRetry time.Duration
	shadowedBy, shadowCause := "", Cause("")
	counted := false // d.Remaining holds a status's
	for i := range req.Checks {
		c, r := &req.Checks[i], &req.Results[i]
		s := LimitStatus{Rule: c.Rule, Limit: c.Limit, Window: c.Window, Used: r.Used, Remaining: max(0, r.Remaining),
			Fits: r.Fits, Cause: causes[r.Cause], RetryAfter: r.RetryAfter, ResetAfter: r.ResetAfter, Shadow: c.Shadow}
		remaining, waived := s.Remaining, false
		if c.Algorithm >= store.Periodic {
			remaining, waived = covering(req, i, &s)
		}
		limits[i] = s
		if remaining >= 0 && (!counted || remaining < d.Remaining) {
			d.Remaining, counted = remaining, true
		}
		d.ResetAfter = max(d.ResetAfter, s.ResetAfter)
		switch {
		case waived:
			// A calendar quota whose overage credits pay for: the credits
			// rule decides in its place.
		case s.Shadow:
			if !s.Fits {
				shadowRetry = max(shadowRetry, s.RetryAfter)
				if shadowedBy == "" {
					shadowedBy, shadowCause = s.Rule, s.Cause
				}
			}
		case !s.Fits && d.Allowed:
			d.Allowed = false
			d.DeniedBy, d.Cause = s.Rule, s.Cause
			fallthrough
		default:
			// A rule that fit may need a wait too, after a penalized
			// attempt was recorded in it.
			d.RetryAfter = max(d.RetryAfter, s.RetryAfter)
		}
	}
	if !d.Allowed {
		return
	}
	d.RetryAfter = 0
	for i := range limits {
		if s := &limits[i]; s.Fits || !s.Shadow {
			s.RetryAfter = 0
		}
	}
	if shadowedBy != "" {
		d.Shadowed, d.DeniedBy, d.Cause, d.RetryAfter = true, shadowedBy, shadowCause, shadowRetry
	}
}

// combineOne is combineAll for one check that is not Shadow, the most
// common request: the same figures without the loop's bookkeeping.
func (d *Decision) combineOne(req *store.Request, b *statuses) {
	d.combineCheck(&req.Checks[0], &req.Results[0])
}

// combineCheck is combineOne for check c and its result r.
func (d *Decision) combineCheck(c *store.Check, r *store.Result) {
	remaining := max(0, r.Remaining)
	// Field by field, not from a composite literal, which the compiler
	// builds aside and then copies.
	s := &d.one[0]
	s.Rule, s.Limit, s.Window, s.Used, s.Remaining = c.Rule, c.Limit, c.Window, r.Used, remaining
	s.Fits, s.Cause, s.ResetAfter, s.Shadow = r.Fits, causes[r.Cause], r.ResetAfter, false
	d.Allowed, d.Remaining, d.ResetAfter = r.Fits, remaining, max(0, r.ResetAfter)
	d.Shadowed, d.Unlimited, d.Degraded, d.Cached, d.Local, d.hasOne = false, false, false, false, false, true
	if d.more != nil {
		d.more = nil
	}
	if r.Fits {
		s.RetryAfter, d.RetryAfter, d.DeniedBy, d.Cause = 0, 0, "", ""
		return
	}
	s.RetryAfter = r.RetryAfter
	d.RetryAfter, d.DeniedBy, d.Cause = max(0, r.RetryAfter), c.Rule, s.Cause
}

// statuses hands out the rule statuses of decisions of several rules from
// blocks of statusBlock, which the decisions after one share, so that most decisions
// allocate nothing (a Decision that is kept keeps its block alive: at most
// statusBlock statuses). A decision's scratch holds one, and the decisions
// made without a scratch share a pool of them. The zero value is ready.
type statuses struct {
	block *[statusBlock]LimitStatus
	next  int
}

// statusBlock is the number of rule statuses in a block of statuses: 15
// of 96 bytes and the 8-byte header the allocator adds to an object of
// more than 512 bytes that holds pointers fill 1,448 of a 1,536-byte size
// class, 102 bytes a status; 16 took a 1,792-byte one, 112 bytes a status.
// (21, a 2,048-byte class filled to 24 bytes, was slower over 100,000 keys.)
const statusBlock = 15

var statusPool = sync.Pool{New: func() any { return new(statuses) }}

// take returns room for the n rule statuses of a decision: the next n of
// b's block, or of a new block when it has no room left; a slice of their
// own for more than half a block. A nil b takes from the pool.
func (b *statuses) take(n int) []LimitStatus {
	if b != nil && b.block != nil && b.next+n <= statusBlock && n <= statusBlock/2 {
		out := b.block[b.next : b.next+n : b.next+n]
		b.next += n
		return out
	}
	return b.takeNew(n)
}

// takeNew is take when b has no block with room: small enough to inline
// take's common case into its callers.
func (b *statuses) takeNew(n int) []LimitStatus {
	switch {
	case n > statusBlock/2:
		return make([]LimitStatus, n)
	case b == nil:
		b = statusPool.Get().(*statuses)
		defer statusPool.Put(b)
	}
	if b.block == nil || b.next+n > statusBlock {
		b.block, b.next = new([statusBlock]LimitStatus), 0
	}
	out := b.block[b.next : b.next+n : b.next+n]
	b.next += n
	return out
}

// causes maps a store's causes to a Decision's.
var causes = [...]Cause{store.CauseNone: "", store.CauseLimit: CauseLimit, store.CauseGap: CauseGap, store.CauseConcurrency: CauseConcurrency, store.CauseCredits: CauseCredits}
