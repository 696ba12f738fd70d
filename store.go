package sluice

import (
	"context"
	"fmt"
)

// Mode says when a store records a request in the rules' windows.
type Mode uint8

const (
	// ModeAllow records the request only when every rule fits: Allow.
	ModeAllow Mode = iota

	// ModeRecord records the request whether or not it fits: Record, and
	// Allow on a Penalize policy.
	ModeRecord
)

// String returns the mode's name.
func (m Mode) String() string {
	switch m {
	case ModeAllow:
		return "allow"
	case ModeRecord:
		return "record"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// Request is one call to a store: a policy, the attributes that select its
// windows, a cost and a mode.
type Request struct {
	Policy     *Policy
	Attributes map[string]string
	Cost       int64
	Mode       Mode

	// DryRun asks for the decision the request would get in Mode, with
	// every figure as the store would leave it, while changing nothing:
	// Peek.
	DryRun bool

	// Limits, when its capacity holds one status per rule, is the buffer a
	// store writes the decision's statuses into: Decision.Limits then shares
	// its backing array, and is overwritten by the next decision made with
	// the same buffer. A caller that decides in a loop reuses one Request
	// (and one buffer) to decide without allocating. Nil, or too small: the
	// store allocates Decision.Limits.
	Limits []LimitStatus
}

// LimitsBuffer returns r.Limits resliced to one status per rule of r's
// policy, zeroed, when it is large enough, and a new slice otherwise.
// Stores build Decision.Limits in it.
func (r *Request) LimitsBuffer() []LimitStatus {
	n := len(r.Policy.Rules)
	if cap(r.Limits) < n {
		return make([]LimitStatus, n)
	}
	b := r.Limits[:n]
	clear(b)
	return b
}

// Validate reports why r cannot be decided: an invalid policy, a cost below
// 1 or above a rule's limit, an unknown mode, or a missing attribute. A
// request that fails validation must change no state.
func (r *Request) Validate() error {
	if err := r.Policy.Validate(); err != nil {
		return err
	}
	if r.Cost < 1 {
		return fmt.Errorf("%w: policy %q got cost %d", ErrInvalidCost, r.Policy.Name, r.Cost)
	}
	if r.Mode > ModeRecord {
		return fmt.Errorf("sluice: unknown mode %v", r.Mode)
	}
	for i := range r.Policy.Rules {
		rule := &r.Policy.Rules[i]
		if r.Cost > rule.Limit {
			return fmt.Errorf("%w: policy %q rule %q has limit %d, request cost %d",
				ErrCostExceedsLimit, r.Policy.Name, rule.Name, rule.Limit, r.Cost)
		}
		for _, a := range rule.By {
			if _, ok := r.Attributes[a]; !ok {
				return fmt.Errorf("%w: policy %q rule %q needs attribute %q; pass it in the request's attributes",
					ErrMissingAttribute, r.Policy.Name, rule.Name, a)
			}
		}
	}
	return nil
}

// LocalStore is implemented by a Store that decides in this process, from
// memory, without I/O (memstore). Its calls cannot hang or fail the way a
// network store's do, so the Limiter gives them no deadline and no circuit
// breaker: a context with a timer would cost more than the decision.
type LocalStore interface {
	Store

	// Local marks the store as local; it does nothing.
	Local()
}

// Store keeps the windows of policies and decides requests against them
// atomically: for one request, every rule is checked and the request is
// recorded in all of the rules' windows or in none.
//
// Implementations: memstore (in memory, one process) and redisstore (Redis,
// shared by many processes). storetest.Run checks that an implementation
// follows this contract. Stores are safe for concurrent use.
//
// A store that keeps schedules (Limiter.Reserve, Cancel and Wait) also
// implements Scheduler; memstore and redisstore both do.
type Store interface {
	// Decide checks req against every rule of its policy at the store's
	// current time and records it according to req.Mode. The request has
	// been validated by the caller. A failure to reach or read the store is
	// an error; a denial is not.
	Decide(ctx context.Context, req *Request) (Decision, error)

	// Close releases the store's resources.
	Close() error
}
