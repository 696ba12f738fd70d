package store

import (
	"context"
	"fmt"
	"time"
)

// Budgeter leases slices of a rule's capacity: the part of a store behind
// a budgeted rule (sluice.Rule.Budget, Check.Budget). A process leases a
// slice of a window in one call, admits from it in memory, and gives back
// what it did not use; what it leased is counted in the store from the
// moment it is granted, so the store's count is never below what was
// admitted anywhere. The price is bounded under-admission (a slice held by
// an idle or dead process), never over-admission.
//
// One call, Budget, does three things in one atomic step, at the store's
// time T, in this order:
//
//  1. Returns: each slice of b.Returns gives back its unused units
//     (Granted - Used), as its algorithm allows (below).
//  2. The request: req is decided exactly as Decide decides it in
//     ModeAllow (never a dry run). A request with no checks decides
//     nothing (a call that only returns slices).
//  3. Asks: when the request is admitted (or has no checks), each ask of
//     b.Asks is granted from the room its window has left after the
//     request: Granted = min(Want, room), 0 when there is none; when the
//     request is denied, every ask is granted 0 and nothing is written.
//     b.Grants gets one grant per ask, in order.
//
// The room and the state a slice of Granted units writes, per algorithm
// (a window's figures are those of its Check, Budget > 0):
//
//   - Log. Room is Limit - Used, Used counting every entry of the window,
//     entries stamped in the future included. A slice is one entry of the
//     window, named ID, of cost Granted, stamped at End = T + Budget, its
//     end, not at T: it stays in the window until End + Window, at least
//     as long as any event admitted from it. Every figure of the window
//     counts it until then, including those at times before End: Used;
//     RetryAfter, with the slices' entries taken in time order among the
//     others (freed when enough of the oldest of all have left); ResetAfter
//     until the last of all leaves. An event decided per request in a
//     budgeted window is stamped at its own time as in any window, not
//     after the slices' future entries. A return at any time before the
//     entry leaves sets its cost to Used and its stamp to min(End, T)
//     (every event of the slice came before the return was sent), or
//     removes it when Used is 0; nothing once it has left (T >= End +
//     Window). A holder that never returns leaves the entry of Granted
//     units: it counts as Granted events at End. redisstore: the log's
//     sorted set holds running totals in time order, which an entry in the
//     future or one that shrinks would renumber, so a budgeted window
//     keeps its slices in a small sorted set of its own beside the log,
//     in the log's hash tag: member ID (with the cost, as the log encodes
//     a cost), score the stamp; Used is the log's count plus the costs of
//     the slices stamped after T - Window, the waits merge the two in time
//     order, and the slices' key expires when the last slice leaves the
//     window (End + Window).
//   - GCRA. Room is what the burst has left, Remaining. The window keeps,
//     beside its arrival time TAT, the slices held in it (redisstore: a
//     sorted set beside the TAT's key, in its hash tag, member the ID with
//     Granted, score End, kept until the last End plus H intervals) and H,
//     the sum of their Granted. Held tokens count against
//     the burst: every step at time t first settles the holds that ended
//     (End <= t), in order of End, each by TAT = max(TAT, End + H*I) (H
//     counting the holds up to then, I the interval) and then H -= its
//     Granted; then the effective TAT is max(TAT, t + H*I), and every
//     figure and decision of the window uses it (a store may write it). A
//     slice advances the effective TAT by Granted*I and is held until
//     End = T + Budget. A return of a slice still held (End > T) settles
//     the cap at T (TAT = max(TAT, T + H*I)), moves the TAT back by the
//     unused units' intervals ((Granted-Used)*I), ends the hold (H -=
//     Granted) and applies the cap again with the holds left, never
//     below T; a return of a slice no longer held changes nothing (it was
//     settled at its end as if all of it had been spent then).
//   - SlidingCounter. Room is Limit - the estimate. A slice adds Granted to
//     the current fixed window (the bucket T falls in, as a request's cost
//     is added) and ends at End = min(T + Budget, the bucket's end): it
//     never outlives its bucket, so every event admitted from it falls in
//     the bucket that counts it. A return takes Granted - Used from the
//     bucket Start falls in, never below 0, while that bucket is the
//     current or the previous one; nothing after. The store keeps nothing
//     per slice (redisstore: the counter's string as it is).
//
// Each grant reports the window's figures after the step (Result: Used,
// Remaining, ResetAfter, with the slice counted), for the holder's sizing
// and its decisions' figures.
//
// The caller guarantees what it does for Decide, and: every ask names a
// check of req with Budget > 0, at most one ask per check, Want >= 1, IDs
// unique and unguessable; a return names the check (its Rule, Values and
// figures) its slice was granted under (at the figures a decision gives it
// at the time of the return), with the Start, End and Granted the grant
// reported and 0 <= Used <= Granted; the holder admits nothing from a
// slice after End on its own clock (it stops earlier, see Grant.Life) nor
// after it sends its return, and returns each slice at most once. A store
// need not deduplicate returns.
type Budgeter interface {
	Store

	// Budget returns b.Returns, decides req and grants b.Asks, in one
	// atomic step, setting req.Results and b.Grants.
	Budget(ctx context.Context, req *Request, b *BudgetRequest) error
}

// BudgetRequest is what Budget does beside deciding its request.
type BudgetRequest struct {
	// Returns are the slices given back, before the request is decided.
	// Their windows are of the request's Policy, and may be other than its
	// checks': a return names its own.
	Returns []SliceReturn

	// Asks are the slices asked for, granted after the request when it is
	// admitted.
	Asks []SliceAsk

	// Grants is where Budget writes one grant per ask, in order, reusing
	// the slice's capacity.
	Grants []Grant
}

// GrantsBuffer returns b.Grants resliced to one zeroed grant per ask,
// allocating only when its capacity is too small. Stores write into it.
func (b *BudgetRequest) GrantsBuffer() []Grant {
	n := len(b.Asks)
	if cap(b.Grants) < n {
		b.Grants = make([]Grant, n)
	}
	b.Grants = b.Grants[:n]
	clear(b.Grants)
	return b.Grants
}

// SliceAsk asks for a slice of a budgeted check's window.
type SliceAsk struct {
	// Check is the index in the request's Checks of the window to lease
	// from; its Budget is above 0.
	Check int

	// Want is the most units asked for, at least 1.
	Want int64

	// ID names the slice in the store, unique and unguessable.
	ID string
}

// Grant is the store's answer to a SliceAsk.
type Grant struct {
	// Granted is the slice's size: at most the ask's Want, 0 when the
	// window has no room or the request was denied.
	Granted int64

	// Start and End are the store's time of the grant and the slice's end
	// on the store's clock (Start + Life), in µs since the Unix epoch: what
	// a return names the slice by.
	Start, End int64

	// Life is how long the slice lives from the store's time of the
	// grant: the check's Budget, less for a SlidingCounter slice cut at its
	// bucket's end. The holder's clock starts it when it sent the call, no
	// later than the store's time: it stops admitting from the slice
	// before the store's End.
	Life time.Duration

	// Result holds the window's figures after the grant, the slice
	// counted: Used, Remaining, ResetAfter (Fits and Cause unused).
	Result Result
}

// SliceReturn gives back the unused part of a slice.
type SliceReturn struct {
	// Check is the check the slice was granted under (its Rule, Values,
	// Algorithm and figures name the window); Cost is unused.
	Check Check

	// Shared is the request's Shared values when the slice was granted.
	Shared []string

	// ID, Start, End and Granted are the slice's, as its ask and grant
	// said.
	ID         string
	Start, End int64
	Granted    int64

	// Used is how much of the slice was admitted, 0 to Granted.
	Used int64
}

// CheckBudget returns why b's asks and returns are not what Budget takes,
// nil when they are.
func CheckBudget(req *Request, b *BudgetRequest) error {
	for i := range req.Checks {
		if a := req.Checks[i].Algorithm; a == Periodic || a == Credits {
			return fmt.Errorf("sluice: rule %q: a %v rule takes no budget; decide its policy with Decide", req.Checks[i].Rule, a)
		}
	}
	for k, a := range b.Asks {
		if a.Check < 0 || a.Check >= len(req.Checks) {
			return fmt.Errorf("sluice: ask %d names check %d of a request of %d checks", k, a.Check, len(req.Checks))
		}
		c := &req.Checks[a.Check]
		if c.Budget <= 0 || c.Algorithm == Concurrency || a.Want < 1 || a.ID == "" {
			return fmt.Errorf("sluice: ask %d (rule %q, want %d) is not a slice of a budgeted rule: it needs a Budget above 0, an algorithm other than concurrency, a Want of at least 1 and an ID", k, c.Rule, a.Want)
		}
	}
	for k := range b.Returns {
		r := &b.Returns[k]
		if r.Check.Algorithm == Concurrency || r.Used < 0 || r.Used > r.Granted || r.ID == "" {
			return fmt.Errorf("sluice: return %d (rule %q, used %d of %d) is not a slice's return: it needs a rule other than concurrency, 0 <= Used <= Granted and an ID", k, r.Check.Rule, r.Used, r.Granted)
		}
	}
	return nil
}
