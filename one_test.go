package sluice

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/sluicerate/sluice/memstore"
)

// noOverrides is a runtime override table that never applies: a Limiter
// that has one resolves every request by the general road.
type noOverrides struct{}

func (noOverrides) Override(string, string, []string) (Override, bool) { return Override{}, false }

// TestDecideOneAsGeneral checks that the one-check road decides as the
// general road does: two Limiters on one clock, one of them with runtime
// overrides that never apply (so it never takes the one-check road), give
// the same decisions and errors, call after call, for AllowN, Peek and
// Record, every algorithm, Penalize and Shadow policies, missing
// attributes and costs out of range.
func TestDecideOneAsGeneral(t *testing.T) {
	t.Parallel()
	policies := []*Policy{
		{Name: "log", Rules: []Rule{{Name: "per-user", Limit: 5, Window: time.Minute, MinGap: time.Second, By: []string{"user"}}}},
		{Name: "gcra", Rules: []Rule{{Name: "per-user", Limit: 10, Window: time.Minute, Algorithm: GCRA, Burst: 3, By: []string{"user", "ip"}}}},
		{Name: "counter", Rules: []Rule{{Name: "global", Limit: 8, Window: time.Minute, Algorithm: SlidingCounter}}},
		{Name: "gcra-one", Rules: []Rule{{Name: "per-user", Limit: 10, Window: time.Minute, Algorithm: GCRA, Burst: 3, By: []string{"user"}}}},
		{Name: "counter-one", Rules: []Rule{{Name: "per-ip", Limit: 8, Window: time.Minute, Algorithm: SlidingCounter, By: []string{"ip"}}}},
		{Name: "blocked", Rules: []Rule{{Name: "none", Limit: 0, Window: time.Minute, By: []string{"user"}}}},
		{Name: "penalize", Penalize: true, Rules: []Rule{{Name: "per-ip", Limit: 4, Window: time.Minute, By: []string{"ip"}}}},
		{Name: "shadow", Shadow: true, Rules: []Rule{{Name: "per-ip", Limit: 4, Window: time.Minute, By: []string{"ip"}}}},
		{Name: "daily", Rules: []Rule{{Name: "per-user", Period: Day, Limit: 5, By: []string{"user"}}}},
		{Name: "credits", Rules: []Rule{{Name: "per-user", Algorithm: Credits, Limit: 5, By: []string{"user"}}}},
	}
	attrSets := []map[string]string{
		{"user": "ann", "ip": "10.0.0.1"},
		{"user": "bob", "ip": "10.0.0.1"},
		{"ip": "10.0.0.2"},
		{"user": "ann"},
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return at }
	ctx := context.Background()
	type call func(l *Limiter, p *Policy, attrs map[string]string, cost int64) (Decision, error)
	calls := map[string]call{
		"AllowN": func(l *Limiter, p *Policy, attrs map[string]string, cost int64) (Decision, error) {
			return l.AllowN(ctx, p, attrs, cost)
		},
		"Allow": func(l *Limiter, p *Policy, attrs map[string]string, _ int64) (Decision, error) {
			return l.Allow(ctx, p, attrs)
		},
		"Peek": func(l *Limiter, p *Policy, attrs map[string]string, cost int64) (Decision, error) {
			return l.Peek(ctx, p, attrs, cost)
		},
		"Record": func(l *Limiter, p *Policy, attrs map[string]string, cost int64) (Decision, error) {
			return l.Record(ctx, p, attrs, cost)
		},
	}
	for _, p := range policies {
		cp, err := compile(p)
		if err != nil {
			t.Fatal(err)
		}
		if !cp.one {
			t.Fatalf("policy %q is not compiled for the one-check road", p.Name)
		}
		one := NewLimiter(memstore.New(memstore.Config{Clock: clock}), Config{})
		general := NewLimiter(memstore.New(memstore.Config{Clock: clock}), Config{Overrides: noOverrides{}})
		denied := 0
		for round := range 3 {
			for _, name := range []string{"Peek", "AllowN", "Allow", "Record"} {
				for _, attrs := range attrSets {
					for _, cost := range []int64{1, 3, 0, 2, 6, MaxCost + 1} {
						d1, err1 := calls[name](one, p, attrs, cost)
						d2, err2 := calls[name](general, p, attrs, cost)
						what := fmt.Sprintf("policy %q round %d %s(%v, %d)", p.Name, round, name, attrs, cost)
						if fmt.Sprint(err1) != fmt.Sprint(err2) {
							t.Fatalf("%s: error %v, general road %v", what, err1, err2)
						}
						if !reflect.DeepEqual(d1, d2) {
							t.Fatalf("%s:\n%+v\ngeneral road:\n%+v", what, d1, d2)
						}
						if err1 == nil && (!d1.Allowed || d1.Shadowed) {
							denied++
						}
					}
				}
				at = at.Add(700 * time.Millisecond)
			}
		}
		if denied == 0 {
			t.Errorf("policy %q: no call was denied: the comparison saw only admissions", p.Name)
		}
	}
}

// TestDecideCheckFailure checks the one-check road through a
// store.CheckDecider when the store fails: the error is returned and the
// failure policy decides, as on the general road (OnError, or the
// Fallback store), and a canceled context fails the same way.
func TestDecideCheckFailure(t *testing.T) {
	t.Parallel()
	p := &Policy{Name: "api", Rules: []Rule{{Name: "per-user", Limit: 5, Window: time.Minute, By: []string{"user"}}}}
	attrs := map[string]string{"user": "ann"}
	closed := memstore.New(memstore.Config{})
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name        string
		ctx         context.Context
		store       *memstore.Store
		cfg         Config
		wantErr     error
		wantAllowed bool
		wantLimits  int // statuses in the decision: the fallback's
	}{
		{"closed, deny", context.Background(), closed, Config{}, ErrStoreClosed, false, 0},
		{"closed, allow", context.Background(), closed, Config{OnError: Allow}, ErrStoreClosed, true, 0},
		{"closed, fallback", context.Background(), closed, Config{Fallback: memstore.New(memstore.Config{})}, ErrStoreClosed, true, 1},
		{"canceled, deny", canceled, memstore.New(memstore.Config{}), Config{}, context.Canceled, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim := NewLimiter(tt.store, tt.cfg)
			if lim.checker == nil {
				t.Fatal("memstore is not taken for a store.CheckDecider")
			}
			d, err := lim.Allow(tt.ctx, p, attrs)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			}
			if !d.Degraded || d.Allowed != tt.wantAllowed || len(d.Limits()) != tt.wantLimits {
				t.Fatalf("decision %+v: want degraded, allowed %v, %d statuses", d, tt.wantAllowed, tt.wantLimits)
			}
			if tt.store.Len() != 0 {
				t.Fatalf("the failed decision left %d windows", tt.store.Len())
			}
		})
	}
}
