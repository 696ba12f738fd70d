package overrides

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/sluicerate/sluice/store"
)

// Set stores o for every instance, as who (the admin token's name), and
// applies it here at once; the others apply it at their next poll. It
// returns the override as stored. An override that does not apply to a
// rule in use, or says something impossible, is ErrInvalid; a new one past
// the bound, store.ErrTooManyOverrides.
func (m *Manager) Set(ctx context.Context, who string, o Override) (Override, error) {
	if m.store == nil {
		return Override{}, ErrNoStore
	}
	now := m.now()
	if err := o.normalize(now); err != nil {
		return Override{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if p := m.state.Load().catalog.check(&o); p != "" {
		return Override{}, fmt.Errorf("%w: %s", ErrInvalid, p)
	}
	o.SetBy, o.SetAt = who, now.UTC()
	value, err := json.Marshal(&o)
	if err != nil {
		return Override{}, err
	}
	so := store.StoredOverride{ID: o.ID, Value: value}
	if o.Until != nil {
		so.Until = *o.Until
	}
	if _, err := m.store.WriteOverride(ctx, so, m.max); err != nil {
		return Override{}, err
	}
	m.log.Info("runtime override set", append([]any{slog.String("who", who)}, describe(&o)...)...)
	_ = m.Poll(ctx)
	return o, nil
}

// describe is what the log says of o.
func describe(o *Override) []any {
	attrs := []any{slog.String("id", o.ID), slog.String("target", o.target()), slog.String("rule", o.Rule),
		slog.String("values", strings.Join(o.Values, ",")), slog.Int64("limit", *o.Limit)}
	if o.Window > 0 {
		attrs = append(attrs, slog.Duration("window", time.Duration(o.Window)))
	}
	if o.Burst > 0 {
		attrs = append(attrs, slog.Int64("burst", o.Burst))
	}
	if o.MinGap > 0 {
		attrs = append(attrs, slog.Duration("min_gap", time.Duration(o.MinGap)))
	}
	if o.Until != nil {
		attrs = append(attrs, slog.Time("until", *o.Until))
	}
	if o.Reason != "" {
		attrs = append(attrs, slog.String("reason", o.Reason))
	}
	return attrs
}

// Delete removes the override id for every instance, as who, and reports
// whether there was one. The rules' own figures apply here at once, and at
// the others' next poll.
func (m *Manager) Delete(ctx context.Context, who, id string) (bool, error) {
	if m.store == nil {
		return false, ErrNoStore
	}
	found, _, err := m.store.DeleteOverride(ctx, id)
	if err != nil {
		return false, err
	}
	if found {
		m.log.Info("runtime override deleted", slog.String("who", who), slog.String("id", id))
	}
	_ = m.Poll(ctx)
	return found, nil
}

// Get returns the override id as held, and why it does not apply ("" when
// it does).
func (m *Manager) Get(id string) (Override, string, bool) {
	for _, l := range m.state.Load().listed {
		if l.ID == id {
			return l.Override, l.Problem, true
		}
	}
	return Override{}, "", false
}

// Listing is what GET /api/v1/overrides answers.
type Listing struct {
	// Version is the set's version in the store, as last read.
	Version string `json:"version"`

	// ReadAt is when the store last answered; Error, when set, is why the
	// latest read failed, since ErrorSince: the set read before stays in
	// use (Stale).
	ReadAt     *time.Time `json:"read_at,omitempty"`
	Error      string     `json:"error,omitempty"`
	ErrorSince *time.Time `json:"error_since,omitempty"`
	Stale      bool       `json:"stale"`

	// Max is how many overrides this server holds; Truncated how many of
	// the store's it left out.
	Max       int `json:"max"`
	Truncated int `json:"truncated"`

	// Overrides are every override held, by ID, with Active false and a
	// Problem when it applies to nothing, and Active false and Expired
	// when its time is over.
	Overrides []listedJSON `json:"overrides"`

	// Targets are the rules an override may name.
	Targets []targetJSON `json:"targets"`
}

// listedJSON is one override of a Listing.
type listedJSON struct {
	listed
	Active  bool `json:"active"`
	Expired bool `json:"expired,omitempty"`
}

// List returns the overrides held and the rules they may apply to.
func (m *Manager) List() Listing {
	st := m.state.Load()
	now := m.now()
	out := Listing{Version: st.version, Error: st.err, Stale: st.err != "", Max: m.max, Truncated: st.trunc,
		Overrides: []listedJSON{}, Targets: []targetJSON{}}
	if !st.readAt.IsZero() {
		at := st.readAt.UTC()
		out.ReadAt = &at
	}
	if st.err != "" {
		since := st.errSince.UTC()
		out.ErrorSince = &since
	}
	for _, l := range st.listed {
		expired := l.Until != nil && !now.Before(*l.Until)
		out.Overrides = append(out.Overrides, listedJSON{listed: l, Active: l.Problem == "" && !expired, Expired: expired})
	}
	for i := range st.targets {
		out.Targets = append(out.Targets, st.targets[i].json())
	}
	return out
}

// IsBadRequest reports whether err is the caller's to fix: ErrInvalid or
// store.ErrTooManyOverrides.
func IsBadRequest(err error) bool {
	return errors.Is(err, ErrInvalid) || errors.Is(err, store.ErrTooManyOverrides)
}
