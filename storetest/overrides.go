package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicerate/sluice/store"
)

// RunOverrides checks a store's runtime overrides (store.OverrideStore):
// versions that move with every change and only then, reads that return
// nothing when nothing changed, replacement by ID, deletion, the bound on
// how many a store holds, and expiry on the store's clock. Each case opens
// a fresh store; the opener's stores must implement store.OverrideStore.
func RunOverrides(t *testing.T, opener Opener) {
	t.Helper()
	for _, c := range overrideCases {
		t.Run(c.name, func(t *testing.T) {
			clock := NewClock(T0)
			target := opener(t, clock.Now)
			t.Cleanup(func() { _ = target.Store.Close() })
			os, ok := target.Store.(store.OverrideStore)
			if !ok {
				t.Fatalf("%T does not implement store.OverrideStore", target.Store)
			}
			c.run(&overrideEnv{t: t, ctx: context.Background(), clock: clock, s: os})
		})
	}
}

// overrideEnv is one case's store and clock.
type overrideEnv struct {
	t     *testing.T
	ctx   context.Context
	clock *Clock
	s     store.OverrideStore
}

// read reads the set, failing the case on error.
func (e *overrideEnv) read(known string) store.OverrideSet {
	e.t.Helper()
	set, err := e.s.ReadOverrides(e.ctx, known)
	if err != nil {
		e.t.Fatalf("ReadOverrides(%q): %v", known, err)
	}
	return set
}

// write writes id with value, failing the case on error.
func (e *overrideEnv) write(id, value string, until time.Time, most int) string {
	e.t.Helper()
	v, err := e.s.WriteOverride(e.ctx, store.StoredOverride{ID: id, Value: []byte(value), Until: until}, most)
	if err != nil {
		e.t.Fatalf("WriteOverride(%s): %v", id, err)
	}
	return v
}

// expectSet checks a changed set's IDs and values, in order.
func (e *overrideEnv) expectSet(what string, set store.OverrideSet, want ...string) {
	e.t.Helper()
	var got []string
	for _, o := range set.Overrides {
		got = append(got, o.ID+"="+string(o.Value))
	}
	if !set.Changed || fmt.Sprint(got) != fmt.Sprint(want) {
		e.t.Errorf("%s: changed %v, overrides %q; want changed, %q", what, set.Changed, got, want)
	}
}

// overrideCase is one case of RunOverrides.
type overrideCase struct {
	name string
	run  func(e *overrideEnv)
}

var overrideCases = []overrideCase{
	{"EmptyThenWritten", func(e *overrideEnv) {
		if set := e.read(""); set.Version != "" || set.Changed || len(set.Overrides) != 0 {
			e.t.Errorf("a new store: %+v, want version \"\" and nothing changed", set)
		}
		if set := e.read("1:1"); !set.Changed || set.Version != "" || len(set.Overrides) != 0 {
			e.t.Errorf("a new store read with another version: %+v, want changed to the empty set", set)
		}
		v1 := e.write("b", `{"limit":5}`, time.Time{}, 10)
		v2 := e.write("a", "ünïcode \x00 bytes", time.Time{}, 10)
		if v1 == "" || v2 == "" || v1 == v2 {
			e.t.Errorf("versions %q then %q: want two distinct versions", v1, v2)
		}
		set := e.read("")
		e.expectSet("after two writes", set, "a=ünïcode \x00 bytes", `b={"limit":5}`)
		if set.Version != v2 {
			e.t.Errorf("read version %q, want the last write's %q", set.Version, v2)
		}
		if again := e.read(set.Version); again.Changed || again.Version != v2 || len(again.Overrides) != 0 {
			e.t.Errorf("read with the version known: %+v, want unchanged and no overrides", again)
		}
	}},
	{"ReplaceAndDelete", func(e *overrideEnv) {
		e.write("a", "1", time.Time{}, 10)
		v := e.write("a", "2", time.Time{}, 10)
		e.expectSet("replaced", e.read(""), "a=2")
		found, dv, err := e.s.DeleteOverride(e.ctx, "a")
		if err != nil || !found || dv == v || dv == "" {
			e.t.Fatalf("DeleteOverride(a) = %v, %q, %v; want found and a new version", found, dv, err)
		}
		found, again, err := e.s.DeleteOverride(e.ctx, "a")
		if err != nil || found || again != dv {
			e.t.Errorf("deleting a again = %v, %q, %v; want not found, the version unchanged (%q)", found, again, err, dv)
		}
		if set := e.read(v); !set.Changed || set.Version != dv || len(set.Overrides) != 0 {
			e.t.Errorf("after the delete: %+v, want changed to an empty set", set)
		}
	}},
	{"Bound", func(e *overrideEnv) {
		e.write("a", "1", time.Time{}, 2)
		v := e.write("b", "1", time.Time{}, 2)
		_, err := e.s.WriteOverride(e.ctx, store.StoredOverride{ID: "c", Value: []byte("1")}, 2)
		if !errors.Is(err, store.ErrTooManyOverrides) {
			e.t.Errorf("a third override under a bound of 2: %v, want ErrTooManyOverrides", err)
		}
		if set := e.read(""); set.Version != v || len(set.Overrides) != 2 {
			e.t.Errorf("after the refusal: %+v, want the two and version %q", set, v)
		}
		e.write("b", "2", time.Time{}, 2) // replacing one at the bound is no new override
		e.expectSet("replaced at the bound", e.read(""), "a=1", "b=2")
	}},
	{"Expiry", func(e *overrideEnv) {
		until := T0.Add(10 * time.Second)
		e.write("a", "1", until, 2)
		v := e.write("b", "1", time.Time{}, 2)
		e.clock.Set(until.Add(-time.Microsecond))
		e.expectSet("a µs before the expiry", e.read(""), "a=1", "b=1")
		if set := e.read(""); !set.Overrides[0].Until.Equal(until) || !set.Overrides[1].Until.IsZero() {
			e.t.Errorf("expiries %v and %v, want %v and none", set.Overrides[0].Until, set.Overrides[1].Until, until)
		}
		e.clock.Set(until)
		e.expectSet("at the expiry", e.read(""), "b=1")
		if set := e.read(v); set.Changed {
			e.t.Errorf("an expiry alone moved the version: %+v", set)
		}
		// The set is full but for the expired one, which the write drops.
		e.write("c", "1", time.Time{}, 2)
		e.expectSet("a write after the expiry", e.read(""), "b=1", "c=1")
	}},
}
