package store

import (
	"context"
	"errors"
	"time"
)

// Leaser keeps leases: decisions that stay open until their holder ends
// them, the part of a store behind sluice.Limiter.Acquire and sluice.Lease.
//
// Every store follows the same rules, at the store's time T:
//
//   - A Concurrency check's window holds the ids of the leases alive in it,
//     each with its expiry. A lease is alive while T is before its expiry:
//     at its expiry exactly its slot is free. The check fits when fewer
//     than Limit leases are alive (its Cost is 1); its Used is the number
//     alive, its RetryAfter, when denied, the time until enough of them
//     expire for one more to fit (the earliest expiry when Limit are
//     alive), its ResetAfter the time until the last one expires.
//   - Acquire decides a request in ModeAllow as Decide does; when it is
//     admitted, it records the request in every rate check's window as
//     Decide does, holds the lease in every Concurrency check's window
//     until T + that check's Window, and keeps, until T + the lease's TTL,
//     what it recorded where (the estimate, the time or bucket of the
//     entry), all in one atomic step.
//   - Finish acts on a lease that is alive (kept and not expired), and
//     otherwise changes nothing and reports it not held. Release frees
//     its slots; Settle frees them and replaces the estimate in each rate
//     window with the real cost, as the algorithm allows exactly:
//     Log: the lease's own entry takes the real cost, at the time it was
//     recorded (nothing when it has left the window); an entry settled to
//     0 stays, counting nothing: a minimum gap counts from its time as
//     from any entry's, and ResetAfter until it leaves the window. GCRA:
//     the arrival time moves by (real - estimate) intervals (the interval
//     the Acquire recorded with) from max(TAT, T), never before T;
//     SlidingCounter: the bucket the estimate's time falls in (by the
//     check's Window) takes the difference, never below 0, while it is the
//     current or the previous bucket. Periodic: the period the estimate
//     was counted in takes the difference (a release takes the whole
//     estimate out), even once a later period has begun. Credits: the
//     balance the estimate was drawn from (when it was: see Check.Covers)
//     takes the difference, even below 0, and a release gives the whole
//     estimate back, unless a Refill.To has set the balance since the
//     draw: that balance owes nothing to the period before, so nothing
//     changes (as the refill undoes a change made just before it). Extend
//     moves the lease's expiry, and that of its slots, to T + TTL. Release
//     and Settle end the lease: a second call reports it not held.
//   - Abandon is for a lease whose Acquire failed with an unknown outcome
//     (its reply lost: the store may have taken it, or may take it yet,
//     when a call sent before the Abandon reaches the store after it). A
//     lease alive is ended exactly as by a Settle with cost 0 (nothing was
//     done under it) and reported held. Otherwise Abandon reports it not
//     held and leaves a tombstone of the id until T + TTL (none when the
//     lease is alive under other windows than the request names): an
//     Acquire of an id whose tombstone or lease is alive takes nothing,
//     records nothing and denies, each check reported not fitting
//     (CauseConcurrency for a Concurrency check, CauseLimit for the
//     others) with every figure 0.
//
// The caller guarantees what it does for Decide, and: lease ids are unique
// and unguessable; a Finish names the checks of the Acquire that took the
// lease, in its order (their Rule, Values and Algorithm), with the figures
// a decision gives them at the time of the Finish (a runtime override may
// have changed them since the Acquire: a store trims a log and rolls a
// counter by the Window, as decisions then do), and a Settle's Cost is at
// least 0.
type Leaser interface {
	// Acquire decides req, in ModeAllow and not a dry run, and holds
	// lease when it admits the request, setting lease.Expires.
	Acquire(ctx context.Context, req *Request, lease *LeaseGrant) error

	// Finish releases, settles, extends or abandons a lease.
	Finish(ctx context.Context, req *FinishRequest) (LeaseState, error)
}

// CheckDecide returns ErrLeaseOnly when req holds a Concurrency check and
// is not a dry run: Decide does not take slots; and what CheckQuotas
// finds wrong. Stores call it in Decide.
func CheckDecide(req *Request) error {
	if err := CheckQuotas(req.Checks); err != nil {
		return err
	}
	if req.DryRun {
		return nil
	}
	for i := range req.Checks {
		if req.Checks[i].Algorithm == Concurrency {
			return ErrLeaseOnly
		}
	}
	return nil
}

// ErrLeaseOnly reports a Decide that would take a slot of a Concurrency
// check: only Leaser.Acquire does.
var ErrLeaseOnly = errors.New("sluice: a concurrency rule's slot is taken by Acquire only; Decide may peek at it")

// ErrNotLeasable is what an Acquire's error matches (errors.Is) when the
// store cannot hold the request's lease at all, such as redisstore's for a
// policy whose windows it keeps in different slots: the store sent nothing
// and took nothing, and every Acquire of the request fails so, so a Limiter
// has nothing to abandon.
var ErrNotLeasable = errors.New("sluice: the store cannot hold this lease")

// LeaseGrant is the lease an Acquire holds when it admits its request.
type LeaseGrant struct {
	// ID identifies the lease.
	ID string

	// TTL is how long the lease is kept: the Window of its Concurrency
	// checks, or, with none, what its policy says.
	TTL time.Duration

	// Expires is set by Acquire: the store's time plus TTL when the lease
	// was granted; the zero time when the request was denied.
	Expires time.Time
}

// LeaseOp says what Finish does with a lease.
type LeaseOp uint8

const (
	// LeaseRelease frees the lease's slots and ends it.
	LeaseRelease LeaseOp = iota

	// LeaseSettle records the real cost in place of the estimate, frees
	// the lease's slots and ends it.
	LeaseSettle

	// LeaseExtend keeps the lease and its slots until TTL from now.
	LeaseExtend

	// LeaseAbandon ends the lease as a settle with cost 0 does when it is
	// alive, and otherwise keeps its id from being acquired for TTL from
	// now: for a lease whose Acquire failed and may yet run.
	LeaseAbandon
)

// FinishRequest is one call to Finish.
type FinishRequest struct {
	// Policy, Shared and Checks name the windows of the Acquire that took
	// the lease, as its Request did.
	Policy string
	Shared []string
	Checks []Check

	// ID is the lease's.
	ID string

	// Op says what to do.
	Op LeaseOp

	// Cost is the real cost, for LeaseSettle: at least 0.
	Cost int64

	// TTL is how long from now the lease is kept, for LeaseExtend, and
	// its tombstone, for LeaseAbandon: the lease's TTL.
	TTL time.Duration
}

// LeaseState is what Finish found and left.
type LeaseState struct {
	// Held reports whether the lease was alive: false for an unknown id,
	// a lease already released or settled, or one that expired.
	Held bool

	// Expires is, after an extension, the lease's new expiry.
	Expires time.Time
}

// DenyAbandoned sets req's results to the answer of an Acquire whose lease
// id has a tombstone or a lease alive already (see Leaser, Abandon): every
// check not fitting, with CauseConcurrency for a Concurrency check and
// CauseLimit for the others, and every figure 0. Stores call it in
// Acquire.
func DenyAbandoned(req *Request) {
	for i, r := range req.ResultsBuffer() {
		r.Cause = CauseLimit
		if req.Checks[i].Algorithm == Concurrency {
			r.Cause = CauseConcurrency
		}
		req.Results[i] = r
	}
}
