package memstore

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sluicerate/sluice/store"
)

// overrides are a Store's runtime overrides (store.OverrideStore): a map
// by ID, and a version that every change moves. The version starts with
// the store's creation in µs, so that a new store's versions never equal
// an old one's.
type overrides struct {
	mu      sync.Mutex
	byID    map[string]store.StoredOverride
	epoch   int64
	changes int64
}

var _ store.OverrideStore = (*Store)(nil)

// version returns the set's version; "" before the first change. o.mu is
// held.
func (o *overrides) version() string {
	if o.changes == 0 {
		return ""
	}
	return strconv.FormatInt(o.epoch, 10) + ":" + strconv.FormatInt(o.changes, 10)
}

// changed moves the version at now. o.mu is held.
func (o *overrides) changed(now time.Time) {
	if o.changes == 0 {
		o.epoch = now.UnixMicro()
	}
	o.changes++
}

// expired reports whether ov has expired at now.
func expired(ov store.StoredOverride, now time.Time) bool {
	return !ov.Until.IsZero() && !now.Before(ov.Until)
}

// ReadOverrides implements store.OverrideStore.
func (s *Store) ReadOverrides(ctx context.Context, known string) (store.OverrideSet, error) {
	if s.closed.Load() {
		return store.OverrideSet{}, store.ErrClosed
	}
	o := &s.overrides
	now := s.now()
	o.mu.Lock()
	defer o.mu.Unlock()
	set := store.OverrideSet{Version: o.version()}
	if set.Version == known {
		return set, nil
	}
	set.Changed = true
	for _, id := range slices.Sorted(maps.Keys(o.byID)) {
		if ov := o.byID[id]; !expired(ov, now) {
			ov.Value = slices.Clone(ov.Value)
			set.Overrides = append(set.Overrides, ov)
		}
	}
	return set, nil
}

// WriteOverride implements store.OverrideStore.
func (s *Store) WriteOverride(ctx context.Context, ov store.StoredOverride, max int) (string, error) {
	if s.closed.Load() {
		return "", store.ErrClosed
	}
	o := &s.overrides
	now := s.now()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.purge(now)
	if _, ok := o.byID[ov.ID]; !ok && len(o.byID) >= max {
		return "", store.ErrTooManyOverrides
	}
	if o.byID == nil {
		o.byID = map[string]store.StoredOverride{}
	}
	ov.Value = slices.Clone(ov.Value)
	o.byID[ov.ID] = ov
	o.changed(now)
	return o.version(), nil
}

// DeleteOverride implements store.OverrideStore.
func (s *Store) DeleteOverride(ctx context.Context, id string) (bool, string, error) {
	if s.closed.Load() {
		return false, "", store.ErrClosed
	}
	o := &s.overrides
	now := s.now()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.purge(now)
	_, found := o.byID[id]
	if found {
		delete(o.byID, id)
		o.changed(now)
	}
	return found, o.version(), nil
}

// purge drops the overrides expired at now, moving the version when there
// were any. o.mu is held.
func (o *overrides) purge(now time.Time) {
	n := len(o.byID)
	maps.DeleteFunc(o.byID, func(_ string, ov store.StoredOverride) bool { return expired(ov, now) })
	if len(o.byID) < n {
		o.changed(now)
	}
}
