package overrides

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/store"
)

// Defaults of Options.
const (
	DefaultMax  = 10_000                 // Options.Max's
	DefaultPoll = 250 * time.Millisecond // Options.Poll's
)

// Options configures a Manager. The zero value of each field is its
// default.
type Options struct {
	// Store keeps the overrides. Nil: the store keeps none; the Manager
	// applies none and Set reports so.
	Store store.OverrideStore

	// Now is the time overrides end by and are set at. Default time.Now.
	Now func() time.Time

	// Logger receives every change, with who made it. Default: discard.
	Logger *slog.Logger

	// Max bounds the overrides held: the store refuses a new one past it,
	// and a Manager reading more (written under a larger bound) applies
	// the first Max by ID and says so. Default DefaultMax.
	Max int

	// Poll is how often Run asks the store whether the set changed.
	// Default DefaultPoll.
	Poll time.Duration
}

// ErrInvalid reports an override that cannot be set as sent; its message
// says why.
var ErrInvalid = errors.New("invalid override")

// ErrNoStore reports a store that keeps no overrides.
var ErrNoStore = errors.New("this store keeps no runtime overrides")

// Manager holds the runtime overrides a server applies: the last set read
// from the store, compiled against the rules in use. It is a
// sluice.Overrides; it is safe for concurrent use. Create one with New.
type Manager struct {
	store store.OverrideStore
	now   func() time.Time
	log   *slog.Logger
	max   int
	poll  time.Duration

	mu      sync.Mutex // Poll and SetTargets, one at a time
	targets map[string][]Target
	raw     []*Override // the set last read, at most max, by ID
	bad     []listed    // values in the set that could not be read
	version string
	trunc   int // overrides of the set past max, not held
	state   atomic.Pointer[state]
}

var _ sluice.Overrides = (*Manager)(nil)

// state is what a Manager applies and shows, replaced whole.
type state struct {
	table    *table
	listed   []listed
	catalog  catalog
	targets  []Target
	version  string
	readAt   time.Time // the latest read that answered
	err      string    // the latest read's error, "" when it answered
	errSince time.Time // when reads started failing
	trunc    int
}

// listed is one override as the API lists it, with why it does not apply.
type listed struct {
	Override
	Problem string `json:"problem,omitempty"`
}

// New returns a Manager that holds no overrides until its first Poll.
func New(opts Options) *Manager {
	m := &Manager{store: opts.Store, now: opts.Now, log: opts.Logger, max: opts.Max, poll: opts.Poll, targets: map[string][]Target{}}
	if m.now == nil {
		m.now = time.Now
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if m.max <= 0 {
		m.max = DefaultMax
	}
	if m.poll <= 0 {
		m.poll = DefaultPoll
	}
	m.state.Store(&state{table: newTable(nil), catalog: catalog{}})
	return m
}

// Override implements sluice.Overrides.
func (m *Manager) Override(policy, rule string, values []string) (sluice.Override, bool) {
	return m.state.Load().table.lookup(policy, rule, values, m.now)
}

// SetTargets makes ts the rules of source ("policies", "envoy") that
// overrides may apply to, replacing that source's, and compiles the set
// held against them.
func (m *Manager) SetTargets(source string, ts []Target) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.targets[source] = ts
	m.publish(func(*state) {})
}

// publish compiles the held set against the targets into a new state,
// changed by edit. m.mu is held.
func (m *Manager) publish(edit func(*state)) {
	st := *m.state.Load()
	st.targets = nil
	for _, src := range slices.Sorted(maps.Keys(m.targets)) {
		st.targets = append(st.targets, m.targets[src]...)
	}
	st.catalog = newCatalog(st.targets)
	st.listed = slices.Clone(m.bad)
	var apply []*Override
	for _, o := range m.raw {
		l := listed{Override: *o, Problem: st.catalog.check(o)}
		if l.Problem == "" {
			apply = append(apply, o)
		}
		st.listed = append(st.listed, l)
	}
	slices.SortFunc(st.listed, func(a, b listed) int { return strings.Compare(a.ID, b.ID) })
	st.table, st.version, st.trunc = newTable(apply), m.version, m.trunc
	edit(&st)
	m.state.Store(&st)
}

// Poll reads the set from the store when its version moved, and applies
// it. When the store fails, the set held stays in use; the failure is
// logged once, and its end. A ctx cancelled by the caller is not a store
// failure: Poll returns its error and logs nothing.
func (m *Manager) Poll(ctx context.Context) error {
	if m.store == nil {
		return ErrNoStore
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	set, err := m.store.ReadOverrides(ctx, m.version)
	now := m.now()
	if err != nil && errors.Is(ctx.Err(), context.Canceled) {
		// The caller gave up (a shutdown), not the store: nothing to
		// report, and the store's state is as it was.
		return err
	}
	if err != nil {
		m.publish(func(st *state) {
			if st.err == "" {
				st.errSince = now
				m.log.Warn("runtime overrides: the store did not answer; the last set read stays in use",
					slog.String("version", st.version), slog.Int("overrides", len(st.listed)), slog.Any("err", err))
			}
			st.err = err.Error()
		})
		return err
	}
	if was := m.state.Load(); was.err != "" {
		m.log.Info("runtime overrides: the store answers again", slog.String("outage", now.Sub(was.errSince).Round(time.Millisecond).String()))
	}
	if set.Changed {
		m.load(set)
	}
	m.publish(func(st *state) {
		st.readAt, st.err, st.errSince = now, "", time.Time{}
		if set.Changed {
			m.log.Info("runtime overrides read", slog.String("version", set.Version), slog.Int("overrides", len(st.listed)),
				slog.Int("applied", countApplied(st.listed)))
		}
	})
	return nil
}

// load decodes set into the held set, the first max by ID. m.mu is held.
func (m *Manager) load(set store.OverrideSet) {
	m.raw, m.bad, m.version, m.trunc = nil, nil, set.Version, 0
	for _, so := range set.Overrides {
		if len(m.raw)+len(m.bad) >= m.max {
			m.trunc++
			continue
		}
		o := new(Override)
		if err := json.Unmarshal(so.Value, o); err != nil || o.Limit == nil {
			m.bad = append(m.bad, listed{Override: Override{ID: so.ID, Values: []string{}},
				Problem: fmt.Sprintf("the store holds a value that is not an override (%v); delete it", err)})
			continue
		}
		o.ID = so.ID
		m.raw = append(m.raw, o)
	}
	if m.trunc > 0 {
		m.log.Warn("runtime overrides: the store holds more than this server keeps; the first by ID apply",
			slog.Int("kept", m.max), slog.Int("left_out", m.trunc))
	}
}

func countApplied(ls []listed) int {
	n := 0
	for _, l := range ls {
		if l.Problem == "" {
			n++
		}
	}
	return n
}

// Run polls the store every Options.Poll until ctx ends.
func (m *Manager) Run(ctx context.Context) {
	t := time.NewTicker(m.poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			pctx, cancel := context.WithTimeout(ctx, max(m.poll, time.Second))
			_ = m.Poll(pctx)
			cancel()
		}
	}
}
