package store

import (
	"context"
	"errors"
	"time"
)

// OverrideStore is implemented by a Store that keeps runtime overrides
// beside its windows (sluice serve's, see sluice.Overrides), so that every
// process sharing the store sees the same ones. The store keeps each as
// an opaque value under an ID, with an optional expiry, and a version of
// the whole set that changes with every change: a process polls the
// version and reads the set again only when it moved.
type OverrideStore interface {
	// ReadOverrides returns the overrides stored that have not expired on
	// the store's clock, and the version of the set. When the version
	// equals known, it returns it with Changed false and no overrides: one
	// short call tells a poller nothing changed. The version is "" when
	// no override was ever written (or the store lost them all).
	ReadOverrides(ctx context.Context, known string) (OverrideSet, error)

	// WriteOverride stores o, replacing the override of the same ID, and
	// returns the set's new version. A new ID when the store holds max
	// overrides or more (expired ones dropped first) is refused with
	// ErrTooManyOverrides, changing nothing.
	WriteOverride(ctx context.Context, o StoredOverride, max int) (version string, err error)

	// DeleteOverride removes the override id and reports whether there
	// was one, with the set's version after the call.
	DeleteOverride(ctx context.Context, id string) (found bool, version string, err error)
}

// StoredOverride is one override as a store keeps it.
type StoredOverride struct {
	// ID names the override; writing an ID again replaces it.
	ID string

	// Value is the override, encoded by its writer; the store keeps it as
	// is.
	Value []byte

	// Until, when set, is when the override expires: the store no longer
	// returns it from then on (on its clock), and drops it on a later
	// write.
	Until time.Time
}

// OverrideSet is what ReadOverrides returns.
type OverrideSet struct {
	// Version is the set's version, "" when nothing was ever written.
	Version string

	// Changed reports that Version differs from the version the caller
	// knew; Overrides are then the whole set, in ID order.
	Changed   bool
	Overrides []StoredOverride
}

// ErrTooManyOverrides reports a new override refused because the store
// holds as many as it may.
var ErrTooManyOverrides = errors.New("sluice: the store holds as many overrides as it may; delete some, or raise the bound")
