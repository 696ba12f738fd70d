package sluice

import (
	"fmt"
	"time"

	"github.com/sluicerate/sluice/store"
)

// MaxCost is the largest amount sluice takes anywhere: a request's cost
// (AllowN, Peek, Record, Acquire, Reserve, Wait), a lease's real cost
// (Lease.Settle), a rule's limit and burst, and so a window's content.
// It is 2^53, 9007199254740992: the largest count that a float64 (a Redis
// script's number, a JSON number read by JavaScript) holds exactly along
// with every integer below it, so every figure sluice reports is the one
// it counted. A cost above it is an error wrapping ErrInvalidCost and
// changes nothing; a window that records more than MaxCost in total (costs
// recorded past its limit by Record or Settle) saturates: it counts
// MaxCost and what was recorded past that is not counted.
const MaxCost = store.MaxCost

// MaxSettleCost is the largest real cost Lease.Settle records: MaxCost.
const MaxSettleCost = MaxCost

// costRange returns the error of cost, outside [least, MaxCost], for what
// (such as `policy "api"`): it wraps ErrInvalidCost and says the range
// accepted.
func costRange(what string, cost, least int64) error {
	return fmt.Errorf("%w: %s got cost %d; a cost is %d to 2^53 (%d)", ErrInvalidCost, what, cost, least, int64(MaxCost))
}

// gcraSpans reports whether a GCRA bucket of limit per window, with burst,
// is held at most store.MaxBucket when full: burst intervals of
// window/limit (rounded up to a whole µs, as the stores count).
func gcraSpans(limit, burst int64, window time.Duration) bool {
	if limit <= 0 {
		return true
	}
	w := window.Microseconds()
	iv := (w + limit - 1) / limit
	return burst <= store.MaxBucket/max(iv, 1)
}
