package memstore

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/sluicerate/sluice/store"
)

// TestDecideCheckAsDecide checks that DecideCheck decides as Decide does a
// request of the one check: two stores on one clock, one asked through
// DecideCheck and one through Decide, give the same results, call after
// call, for every rate algorithm, in ModeAllow and ModeRecord, dry or not,
// for several values and costs; and DecideCheck leaves its check as it
// was.
func TestDecideCheckAsDecide(t *testing.T) {
	t.Parallel()
	checks := []store.Check{
		{Rule: "log", Limit: 5, Window: time.Minute, MinGap: time.Second},
		{Rule: "gcra", Limit: 10, Window: time.Minute, Algorithm: store.GCRA, Burst: 3},
		{Rule: "counter", Limit: 8, Window: time.Minute, Algorithm: store.SlidingCounter},
		{Rule: "shadow", Limit: 2, Window: time.Minute, Shadow: true},
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return at }
	ctx := context.Background()
	byCheck := New(Config{Clock: clock})
	byDecide := New(Config{Clock: clock})
	denied := 0
	for round := range 4 {
		for _, mode := range []store.Mode{store.ModeAllow, store.ModeRecord} {
			for _, dry := range []bool{true, false} {
				for _, c := range checks {
					for _, value := range []string{"ann", "bob", ""} {
						for _, cost := range []int64{1, 2, 4} {
							what := fmt.Sprintf("round %d mode %v dry %v check %q value %q cost %d", round, mode, dry, c.Rule, value, cost)
							kept := c
							got, err := byCheck.DecideCheck(ctx, "p", &c, value, cost, mode, dry)
							if err != nil {
								t.Fatalf("%s: DecideCheck: %v", what, err)
							}
							if !reflect.DeepEqual(c, kept) {
								t.Fatalf("%s: DecideCheck changed its check: %+v, was %+v", what, c, kept)
							}
							one := c
							one.Values, one.Cost = []string{value}, cost
							req := &store.Request{Policy: "p", Checks: []store.Check{one}, Mode: mode, DryRun: dry}
							if err := byDecide.Decide(ctx, req); err != nil {
								t.Fatalf("%s: Decide: %v", what, err)
							}
							if want := req.Results[0]; got != want {
								t.Fatalf("%s: DecideCheck %+v, Decide %+v", what, got, want)
							}
							if !got.Fits {
								denied++
							}
						}
					}
				}
				at = at.Add(1300 * time.Millisecond)
			}
		}
	}
	if denied == 0 {
		t.Error("no check was denied: the comparison saw only admissions")
	}
	if a, b := byCheck.Len(), byDecide.Len(); a != b {
		t.Errorf("windows: %d through DecideCheck, %d through Decide", a, b)
	}
}

// TestDecideCheckErrors checks DecideCheck's errors, which are Decide's: a
// closed store, a canceled context, and a concurrency check outside a dry
// run; none of them creates a window.
func TestDecideCheckErrors(t *testing.T) {
	t.Parallel()
	closed := New(Config{})
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	rate := &store.Check{Rule: "r", Limit: 1, Window: time.Second}
	conc := &store.Check{Rule: "c", Limit: 1, Window: time.Second, Algorithm: store.Concurrency}
	tests := []struct {
		name  string
		s     *Store
		ctx   context.Context
		check *store.Check
		dry   bool
		want  error
	}{
		{"closed", closed, context.Background(), rate, false, store.ErrClosed},
		{"canceled", New(Config{}), canceled, rate, false, context.Canceled},
		{"concurrency", New(Config{}), context.Background(), conc, false, store.ErrLeaseOnly},
		{"concurrency, dry", New(Config{}), context.Background(), conc, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := &store.Request{Policy: "p", Checks: []store.Check{*tt.check}, DryRun: tt.dry}
			req.Checks[0].Values, req.Checks[0].Cost = []string{"v"}, 1
			decideErr := tt.s.Decide(tt.ctx, req)
			_, err := tt.s.DecideCheck(tt.ctx, "p", tt.check, "v", 1, store.ModeAllow, tt.dry)
			if !errors.Is(err, tt.want) || !errors.Is(decideErr, tt.want) {
				t.Fatalf("DecideCheck: %v, Decide: %v; want %v", err, decideErr, tt.want)
			}
			if tt.s.Len() != 0 {
				t.Fatalf("%d windows left", tt.s.Len())
			}
		})
	}
}
