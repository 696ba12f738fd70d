// Package inspect is the one model of what a store holds for a policy's
// windows or a schedule's queue, as `sluice inspect` prints it and the
// admin view's key inspector (POST /api/v1/inspect) answers it: one set of
// types, one JSON schema, and one place that computes a window's figures
// (used, remaining, when each entry leaves, the slices of a budgeted rule,
// a concurrency rule's leases, a queue's pending reservations).
//
// An Inspector reads a store (package redisinspect reads Redis); a Source
// joins it with the Limiter whose peek gives a rule's figures.
package inspect

import (
	"context"
	"time"

	"github.com/sluicerate/sluice/store"
)

// Inspector reads, changing nothing, what a store holds: the windows of a
// policy's rules (a concurrency rule's: its live leases) and the
// reservations of a schedule's queue, with the store's time. Its methods
// are safe for concurrent use.
type Inspector interface {
	// Name names the store ("redis").
	Name() string

	// Windows reads the window of every check of req, in order.
	Windows(ctx context.Context, req *store.Request) ([]StoredWindow, time.Time, error)

	// Queue reads the reservations a schedule's queue holds, oldest slot
	// first.
	Queue(ctx context.Context, q store.Queue) ([]StoredSlot, time.Time, error)
}

// StoredWindow is one window as an Inspector reads it.
type StoredWindow struct {
	// Rule is the rule's name and Key the store's key of its window.
	Rule, Key string

	// Algorithm is the rule's algorithm: the check's, or the one the
	// key's name gives when the window was found without its rule.
	Algorithm store.Algorithm

	// Entries are the entries it holds, oldest first: those in the window
	// and, until the key expires, the newest one even after it left the
	// window (it enforces the rule's minimum gap).
	Entries []StoredEntry

	// TTL is the key's remaining time to live; -1 for a key without one,
	// and 0 when the key does not exist.
	TTL time.Duration

	// State is, for a GCRA bucket, its theoretical arrival time (µs since
	// the Unix epoch), and for a sliding counter its bucket index and the
	// previous and current buckets' counts. Empty for a log.
	State []int64

	// Leases are, for a concurrency rule's window, the leases alive in it,
	// soonest to expire first (it has no Entries).
	Leases []StoredLease

	// SlicesKey is, for a budgeted window, the key of the slices leased
	// from it, and Slices those the store holds, by every process,
	// earliest first.
	SlicesKey string
	Slices    []StoredSlice
}

// StoredEntry is one entry of a window: when it was recorded, on the
// store's clock, and its cost.
type StoredEntry struct {
	Time time.Time
	Cost int64
}

// StoredLease is one lease alive in a concurrency rule's window: the token
// that names it in the store (not its id) and when it expires unless
// released or extended, on the store's clock.
type StoredLease struct {
	Token   string
	Expires time.Time
}

// StoredSlice is a slice leased from a budgeted window: the units the
// store counts for it, and when it ends on the store's clock (a log's: the
// stamp of its entry, its end or when it was given back, which counts for
// a window after; a GCRA bucket's: the end of its hold).
type StoredSlice struct {
	Units int64
	Ends  time.Time
}

// StoredSlot is one reservation held in a schedule's queue.
type StoredSlot struct {
	// Slot is when the reservation may go, on the store's clock, and
	// Length how long it holds the queue (cost × interval).
	Slot   time.Time
	Length time.Duration
	ID     string
}
