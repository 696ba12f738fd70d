// Package store is what a sluice store implements: the contract between
// sluice.Limiter and the packages that keep windows and queues (memstore,
// redisstore), as database/sql/driver is for database/sql. A program that
// uses sluice needs this package only to write a store of its own; the
// conformance suite, package storetest, checks one.
//
// A store decides checks, not policies. The Limiter resolves a policy and a
// request's attributes into the windows the request must fit, one Check per
// rule that applies (with the rule's figures after any per-value override),
// validates them, and asks the store to decide them all at once: every
// window is checked, then the request is recorded in all of them or in none.
// The store knows nothing of attributes, conditions or policies beyond the
// names that make a window's key.
package store

import (
	"context"
	"errors"
	"strconv"
	"time"
)

// Store keeps windows and decides requests against them atomically. It is
// safe for concurrent use.
type Store interface {
	// Decide checks every window of req at the store's current time,
	// records the request in them according to req.Mode and req.DryRun,
	// and sets req.Results, one per check in order. The request has been
	// validated by the caller (see Request). A failure to reach or read the
	// store is an error; a denial is not.
	Decide(ctx context.Context, req *Request) error

	// Close releases the store's resources. Later calls return ErrClosed.
	Close() error
}

// Local is implemented by a Store that decides in this process, from
// memory, without I/O (memstore). Its calls cannot hang or fail the way a
// network store's do, so the Limiter gives them no deadline and no circuit
// breaker: a context with a timer would cost more than the decision.
//
// A Store that wraps a local one (to count or trace its calls, say) should
// implement Local too, or the Limiter treats it as a network store: each
// call gets Config.Timeout on the real clock and a circuit breaker, and a
// call held up on a loaded machine fails.
type Local interface {
	Store

	// Local marks the store as local; it does nothing.
	Local()
}

// CheckDecider is implemented by a Local store that decides a request of
// one check, of a rule that goes by one attribute, without a Request: the
// Limiter's road for the most common policy (memstore). A Request handed
// to Decide, an interface method, outlives the call as far as the compiler
// can tell, so a caller keeps its requests in a pool; what DecideCheck is
// given does not need to outlive the call.
//
// A wrapper that embeds such a store and changes what Decide does (to count
// or trace its calls, say) gets DecideCheck promoted unchanged: it should
// give DecideCheck the same treatment, or the Limiter's one-check calls go
// around its Decide.
type CheckDecider interface {
	Local

	// DecideCheck decides as Decide decides the Request {Policy: policy,
	// Checks: [c, with Values [value] and Cost cost], Mode: mode, DryRun:
	// dry}, and returns that request's one Result. It reads c's figures,
	// not its Values or Cost, and neither keeps nor changes c. Its errors
	// are Decide's.
	DecideCheck(ctx context.Context, policy string, c *Check, value string, cost int64, mode Mode, dry bool) (Result, error)
}

// Sharded is implemented by a Store whose windows and queues live on
// several servers that fail independently: a Redis Cluster's masters. The
// Limiter keeps a circuit breaker per shard, so that one master's outage
// opens the circuit for the windows it keeps and not for the others'.
type Sharded interface {
	Store

	// Shard names the servers that keep req's windows, one name for each
	// set of servers; "" when it is not known, such as before the store has
	// read the Cluster's slots. The request is resolved but not yet sent.
	Shard(req *Request) string

	// QueueShard names the server that keeps q, as Shard does.
	QueueShard(q Queue) string
}

// ErrClosed reports a call on a store after Close.
var ErrClosed = errors.New("sluice: store is closed")

// ErrRefused is what a store's error matches (errors.Is) when the store
// answered but refused to stand by the call: redisstore.ErrNotReplicated,
// a write its master could not get onto its replicas. The failure policy
// decides the request, as for any error, but the circuit breaker does not
// count it: the store is answering, and the next call may succeed.
var ErrRefused = errors.New("sluice: the store refused the call")

// MaxCost is the largest amount a store is given or keeps (sluice.MaxCost
// is this constant): every Check's Cost, Limit and Burst, a settle's
// Cost, and a window's content. It is 2^53, the largest count a float64
// (a Redis script's number) holds exactly along with every integer below
// it.
//
// A store saturates instead of wrapping: a window recorded past MaxCost in
// total counts MaxCost, its newest write counting only the part that fits
// under it (a write that finds it full records nothing), so that Used is
// never above MaxCost nor below 0, and a window that holds MaxCost fits no
// request, as any limit is at most MaxCost.
const MaxCost = 1 << 53

// MaxBucket is the longest a GCRA bucket is held past now, in µs: 2^50 µs,
// about 35 years. A bucket recorded past it (a Record far over its burst)
// saturates at it: its TAT is at most now plus MaxBucket, so that every
// figure of it stays exact in a float64. A GCRA check's Burst intervals
// span at most MaxBucket, so that a bucket held that long fits nothing.
const MaxBucket = 1 << 50

// MaxRetry is the longest Result.RetryAfter a store reports: 2^51-1 µs,
// about 71 years. A longer wait (a full window longer than that) is
// reported as MaxRetry: asked again then, it says what is left.
const MaxRetry = (1<<51 - 1) * time.Microsecond

// Mode says when a store records a request in its windows.
type Mode uint8

const (
	// ModeAllow records the request only when every check that is not
	// Shadow fits: Limiter.Allow.
	ModeAllow Mode = iota

	// ModeRecord records the request whether or not it fits:
	// Limiter.Record, and Allow on a Penalize policy.
	ModeRecord
)

// Request is one call to Decide: the windows a request must fit, and what
// to do with them.
//
// The caller guarantees: at least one check; checks name distinct windows;
// every Cost is 1 to MaxCost; every Window is at least 1µs; Limit is 0 to
// MaxCost (a Limit of 0 fits nothing), and MinGap at least 0; a GCRA
// check's Burst is 1 to MaxCost and its Burst intervals span at most
// MaxBucket.
type Request struct {
	// Policy names the policy the windows belong to; it is part of every
	// window's key.
	Policy string

	// Shared holds the values of the attributes that every rule of the
	// policy is keyed by: a store that places a request's windows together
	// (a Redis Cluster hash tag) does so by them. They are the same for
	// every request that names the same values, whatever rules apply.
	Shared []string

	// Checks are the windows to decide, in the policy's order.
	Checks []Check

	// Mode says when the request is recorded.
	Mode Mode

	// DryRun asks for the figures the decision would leave, changing
	// nothing: Limiter.Peek.
	DryRun bool

	// Results is where Decide writes one result per check, in order,
	// reusing the slice's capacity: a caller that decides in a loop with
	// one Request allocates nothing for them.
	Results []Result
}

// ResultsBuffer returns r.Results resliced to one zeroed result per check,
// allocating only when its capacity is too small. Stores write into it.
func (r *Request) ResultsBuffer() []Result {
	n := len(r.Checks)
	if cap(r.Results) < n {
		r.Results = make([]Result, n)
	}
	r.Results = r.Results[:n]
	clear(r.Results)
	return r.Results
}

// Check is one window a request must fit: a rule of the policy, for the
// values of its attributes.
type Check struct {
	// Rule names the rule; with Request.Policy and Values it names the
	// window.
	Rule string

	// Values are the values of the rule's By attributes, in order.
	Values []string

	// Limit is the most cost admitted in any window of length Window; 0
	// admits nothing. MinGap, when above 0, is the least time between two
	// events recorded in the window (the log only).
	Limit  int64
	Window time.Duration
	MinGap time.Duration

	// Algorithm is how the window counts: the exact log, GCRA or a
	// sliding counter. Burst is GCRA's: the most cost admitted at once,
	// at least 1.
	Algorithm Algorithm
	Burst     int64

	// Cost is what the request counts in this window, at least 1.
	Cost int64

	// Shadow marks a check whose denial does not deny the request: it is
	// decided and reported, and recorded when the request is.
	Shadow bool

	// Part and Parts, when Parts > 1, say that the window is sub-window Part
	// (0 to Parts-1) of a spread rule's window (its last value is Part): a
	// store that shards keys may place the parts apart.
	Part, Parts int

	// Calendar, for a Periodic check, cuts time into the periods whose
	// count resets at their start; for a Credits check, it says when the
	// balance refills (NoPeriod: never). See Calendar and Credits.
	Calendar Calendar

	// History, for a Periodic check, is how many periods before the
	// current one the store keeps the totals of (Historian). 0 keeps none.
	History int

	// Refill, for a Credits check, is what each new period of Calendar
	// does to the balance.
	Refill Refill

	// Covers, for a Credits check, when above 0, makes its balance pay
	// for the overage of check Covers-1 of the request, a Periodic check
	// ("100,000 a month, then credits"): while that check fits, the
	// credits check is neither drawn nor able to deny (its Result reports
	// the balance, Fits true); when it does not fit for its Limit, the
	// credits check decides in its place: with the cost in the balance,
	// that check's denial is waived (its Result keeps Fits false and its
	// Cause, as a Shadow check's would) and, the request admitted, the
	// cost is recorded in both, the Periodic count going past its Limit;
	// without it, the request is denied by both, the credits check with
	// CauseCredits.
	Covers int

	// Budget, when above 0, marks a budgeted rule's window (see
	// Budgeter): slices of it are leased for at most this long, and a
	// store stamps the events it decides per request at their own time,
	// among the slices' future-stamped entries (the log).
	Budget time.Duration
}

// TTL is how long after its newest event a window of c can matter: its
// length plus the minimum gap. Stores expire idle windows after this long.
func (c *Check) TTL() time.Duration { return c.Window + c.MinGap }

// Result is the state of one check's window as the decision leaves it (see
// sluice.Decision for the contract every figure follows).
type Result struct {
	// Fits reports whether the request fit the window before the decision:
	// room for its cost and, with a MinGap, the gap since the last event.
	Fits bool

	// Cause says why it did not fit; CauseNone when it did.
	Cause Cause

	// Used is the cost counted in the window after the decision (for a
	// dry run, after the write it would make), and Remaining the cost that
	// would still fit at once: Limit - Used for the log and the sliding
	// counter, what GCRA's burst has left for GCRA.
	Used      int64
	Remaining int64

	// RetryAfter, when the request is denied, is the least wait after which
	// this window fits the same request again if nothing else happens,
	// counting what the decision recorded. Stores may leave it set on an
	// allowed request; the Limiter reports 0 then.
	RetryAfter time.Duration

	// ResetAfter is the time until the window is empty.
	ResetAfter time.Duration
}

// Cause says why a check did not fit.
type Cause uint8

const (
	// CauseNone: it fit.
	CauseNone Cause = iota

	// CauseLimit: the window has no room for the cost.
	CauseLimit

	// CauseGap: the request comes sooner than MinGap after the last event.
	CauseGap

	// CauseConcurrency: a Concurrency check's Limit leases are live.
	CauseConcurrency

	// CauseCredits: a Credits check's balance is below the cost.
	CauseCredits
)

// Algorithm is how a window counts.
type Algorithm uint8

const (
	// Log keeps every event of the window: exact, one small entry per
	// event.
	Log Algorithm = iota

	// GCRA, the generic cell rate algorithm, is a token bucket kept as one
	// time, the theoretical arrival time: a request of cost c is admitted
	// when the bucket has room for c of its Burst; it refills at Limit per
	// Window, one unit every Window/Limit (rounded up to a whole µs).
	// Constant memory, exact for its own definition.
	GCRA

	// SlidingCounter keeps two counts, of the current fixed window (of
	// length Window, aligned to multiples of it) and the previous one, and
	// estimates the sliding window's count as the current count plus the
	// previous count weighted by the part of the previous window the
	// sliding one still covers: floor(prev * (Window - elapsed) / Window),
	// computed in float64. Constant memory; it admits too much when the
	// previous window's events came late in it (up to twice Limit in the
	// worst case).
	SlidingCounter

	// Concurrency counts leases alive at once instead of cost over time:
	// the check's Limit is the most leases alive, its Window the time a
	// lease lives unless extended, and its Cost 1. Only Leaser.Acquire
	// records in such a window, and Decide sees one only in a dry run (a
	// peek at whether a lease would be granted). See Leaser.
	Concurrency

	// Periodic counts cost per calendar period (Check.Calendar: a day,
	// week, month or year in a time zone): at most Limit in each period,
	// the count starting from 0 at each period's start. A denial's
	// RetryAfter is the time to the next period's start (to the µs), or
	// MaxRetry for a cost above Limit; Used is the period's count,
	// Remaining Limit - Used, ResetAfter the time to the period's end
	// (0 when the count is 0). Window is the longest the period lasts
	// (MaxPeriodLength at most). Constant memory: one count, plus the
	// totals of Check.History periods before it. See Historian.
	Periodic

	// Credits keeps a balance that decisions draw down by their cost: a
	// request fits when the balance is at least its cost (Cause
	// CauseCredits otherwise), and the balance never changes on its own
	// but by Check.Refill at each period of Check.Calendar. A balance not
	// yet in the store starts at Limit. Used is Limit - balance, at least
	// 0; Remaining is the balance, which only a settle (Leaser) takes
	// below 0; RetryAfter of a denial is the time to the next refill that
	// makes the cost fit, MaxRetry when none will; ResetAfter is 0.
	// Window is at least 1µs and not used. See Crediter.
	Credits
)

// String returns the algorithm's name in the configuration file: log, gcra
// or sliding-counter.
func (a Algorithm) String() string {
	switch a {
	case Log:
		return "log"
	case GCRA:
		return "gcra"
	case SlidingCounter:
		return "sliding-counter"
	case Concurrency:
		return "concurrency"
	case Periodic:
		return "calendar"
	case Credits:
		return "credits"
	}
	return "Algorithm(" + strconv.Itoa(int(a)) + ")"
}
