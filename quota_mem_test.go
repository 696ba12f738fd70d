package sluice_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/store"
	"github.com/sluicerate/sluice/storetest"
)

// quotaEnv is a Limiter over a memory store on a manual clock, and a plan
// of 2 a second, 10 a month in New York and credits for the overage.
func quotaEnv(t *testing.T) (*sluice.Limiter, *storetest.Clock, *sluice.Policy) {
	t.Helper()
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock(time.Date(2026, 3, 8, 12, 0, 0, 0, ny))
	st := memstore.New(memstore.Config{Clock: clock.Now})
	t.Cleanup(func() { st.Close() })
	plan := &sluice.Policy{Name: "plan", Rules: []sluice.Rule{
		{Name: "rate", By: []string{"key"}, Limit: 2, Window: time.Second},
		{Name: "monthly", By: []string{"key"}, Period: sluice.Month, Location: ny, Limit: 10},
		{Name: "overage", By: []string{"key"}, Algorithm: sluice.Credits, Covers: "monthly"},
	}}
	return sluice.NewLimiter(st, sluice.Config{}), clock, plan
}

// TestQuotaAllOrNothing: a request the credits deny is counted nowhere,
// nor is one the rate rule denies while the credits would pay for it; a
// request past the quota is paid by the credits and counted past it.
func TestQuotaAllOrNothing(t *testing.T) {
	t.Parallel()
	lim, clock, plan := quotaEnv(t)
	plan.Rules[0].Limit = 4
	ctx := context.Background()
	key := map[string]string{"key": "k"}
	allow := func(cost int64, allowed bool, deniedBy string) {
		t.Helper()
		d, err := lim.AllowN(ctx, plan, key, cost)
		if err != nil || d.Allowed != allowed || d.DeniedBy != deniedBy {
			t.Fatalf("%d: allowed %v denied by %q (%v); want %v %q", cost, d.Allowed, d.DeniedBy, err, allowed, deniedBy)
		}
		if deniedBy == "overage" && d.Cause != sluice.CauseCredits {
			t.Errorf("%d: cause %q, want credits", cost, d.Cause)
		}
	}
	balance := func(want int64) {
		t.Helper()
		if b, err := lim.Credits(ctx, plan, "", key); err != nil || b.Balance != want {
			t.Errorf("balance %d (%v), want %d", b.Balance, err, want)
		}
	}
	allow(4, true, "")
	clock.Advance(time.Second)
	allow(4, true, "") // 8 of the month's 10
	clock.Advance(time.Second)
	allow(4, false, "overage") // no credits yet
	if _, err := lim.AddCredits(ctx, plan, "", key, 3, "p1"); err != nil {
		t.Fatal(err)
	}
	allow(4, false, "overage") // 3 credits do not pay for 4
	allow(2, true, "")         // the quota's last 2
	balance(3)
	allow(3, false, "rate") // the credits would pay; the rate denies
	balance(3)
	clock.Advance(time.Second)
	allow(2, true, "") // paid by the credits
	balance(1)
	if d, err := lim.Peek(ctx, plan, key, 1); err != nil || !d.Allowed {
		t.Errorf("peek: %+v, %v", d, err)
	}
	balance(1)
	usage, err := lim.Usage(ctx, plan, "", key)
	if err != nil || len(usage) != 1 || usage[0].Used != 12 {
		t.Errorf("usage %+v, %v; want this month's 12", usage, err)
	}
}

// TestQuotaLease: a lease on a calendar quota and credits settles to the
// real cost, and a release gives the whole estimate back.
func TestQuotaLease(t *testing.T) {
	t.Parallel()
	lim, _, plan := quotaEnv(t)
	plan.Rules[0].Limit = 100
	ctx := context.Background()
	key := map[string]string{"key": "k"}
	if _, err := lim.AddCredits(ctx, plan, "", key, 20, ""); err != nil {
		t.Fatal(err)
	}
	x, d, err := lim.Acquire(ctx, plan, key, 8)
	if err != nil || !d.Allowed {
		t.Fatalf("acquire 8: %+v, %v", d, err)
	}
	if held, err := x.Settle(ctx, 6); !held || err != nil {
		t.Fatalf("settle: %v, %v", held, err)
	}
	if u, _ := lim.Usage(ctx, plan, "", key); u[0].Used != 6 {
		t.Errorf("the month holds %d after a settle to 6, want 6", u[0].Used)
	}
	// 4 left in the month: an estimate of 10 draws the credits.
	x, d, err = lim.Acquire(ctx, plan, key, 10)
	if err != nil || !d.Allowed {
		t.Fatalf("acquire 10: %+v, %v", d, err)
	}
	if b, _ := lim.Credits(ctx, plan, "", key); b.Balance != 10 {
		t.Errorf("balance %d while 10 are leased, want 10", b.Balance)
	}
	if held, err := x.Release(ctx); !held || err != nil {
		t.Fatalf("release: %v, %v", held, err)
	}
	if b, _ := lim.Credits(ctx, plan, "", key); b.Balance != 20 {
		t.Errorf("balance %d after the release, want 20", b.Balance)
	}
	if u, _ := lim.Usage(ctx, plan, "", key); u[0].Used != 6 {
		t.Errorf("the month holds %d after the release, want 6", u[0].Used)
	}
}

// TestQuotaRuntimeOverride: a runtime override gives a calendar quota and
// a credits balance a limit of their own, for decisions and the credits
// calls alike, and one with a window is refused.
func TestQuotaRuntimeOverride(t *testing.T) {
	t.Parallel()
	ov := &overrideMap{}
	ov.set("plan|monthly|vip", sluice.Override{Limit: 1000})
	ov.set("plan|overage|vip", sluice.Override{Limit: 50})
	ov.set("plan|monthly|odd", sluice.Override{Limit: 5, Window: time.Hour})
	_, _, plan := quotaEnv(t)
	plan.Rules[0].Limit = 100
	clock := storetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	lim := sluice.NewLimiter(memstore.New(memstore.Config{Clock: clock.Now}), sluice.Config{Overrides: ov})
	ctx := context.Background()
	d, err := lim.AllowN(ctx, plan, map[string]string{"key": "vip"}, 20)
	if err != nil || !d.Allowed || d.Limits()[1].Limit != 1000 {
		t.Errorf("20 on a vip's quota of 1000: %+v, %v", d, err)
	}
	if b, err := lim.Credits(ctx, plan, "", map[string]string{"key": "vip"}); err != nil || b.Balance != 50 {
		t.Errorf("a vip's balance: %+v, %v; want 50 to start", b, err)
	}
	if _, err := lim.Allow(ctx, plan, map[string]string{"key": "odd"}); !errors.Is(err, sluice.ErrInvalidPolicy) || !strings.Contains(err.Error(), "takes a limit only") {
		t.Errorf("an override with a window on a calendar quota: %v", err)
	}
}

// TestQuotaBesideBudget: a budgeted rule beside a calendar quota is
// decided per request (the store leases no slices beside a quota), so
// the quota holds.
func TestQuotaBesideBudget(t *testing.T) {
	t.Parallel()
	clock := storetest.NewClock(time.Date(2026, 1, 31, 23, 59, 0, 0, time.UTC))
	lim := sluice.NewLimiter(memstore.New(memstore.Config{Clock: clock.Now}), sluice.Config{})
	p := &sluice.Policy{Name: "b", Rules: []sluice.Rule{
		{Name: "rate", Limit: 1000, Window: time.Minute, Budget: time.Second},
		{Name: "daily", Period: sluice.Day, Limit: 3},
	}}
	ctx := context.Background()
	for i, want := range []bool{true, true, true, false} {
		d, err := lim.Allow(ctx, p, nil)
		if err != nil || d.Allowed != want || d.Local {
			t.Fatalf("request %d: %+v, %v; want allowed %v by the store", i+1, d, err, want)
		}
		if !want && (d.DeniedBy != "daily" || d.RetryAfter != time.Minute) {
			t.Errorf("request %d: denied by %q for %v, want daily until midnight", i+1, d.DeniedBy, d.RetryAfter)
		}
	}
	clock.Advance(time.Minute)
	if d, err := lim.Allow(ctx, p, nil); err != nil || !d.Allowed {
		t.Errorf("the next day: %+v, %v", d, err)
	}
	req := &store.Request{Policy: "b", Checks: []store.Check{
		{Rule: "rate", Limit: 1000, Window: time.Minute, Budget: time.Second, Cost: 1},
		{Rule: "daily", Algorithm: store.Periodic, Calendar: store.Calendar{Period: sluice.Day}, Limit: 3, Window: store.MaxPeriodLength, Cost: 1},
	}}
	if d, err := lim.Decide(ctx, req); err != nil || !d.Allowed || d.Local {
		t.Errorf("Limiter.Decide of a budgeted check beside a calendar one: %+v, %v", d, err)
	}
}

// TestQuotaBesideSpread: a spread rule whose sub-window is full falls over
// to the next while the credits pay for the quota's overage.
func TestQuotaBesideSpread(t *testing.T) {
	t.Parallel()
	clock := storetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	lim := sluice.NewLimiter(memstore.New(memstore.Config{Clock: clock.Now}), sluice.Config{})
	p := &sluice.Policy{Name: "s", Rules: []sluice.Rule{
		{Name: "hot", By: []string{"key"}, Limit: 4, Window: time.Minute, Spread: 2, SpreadBy: "client"},
		{Name: "monthly", By: []string{"key"}, Period: sluice.Month, Limit: 1},
		{Name: "overage", By: []string{"key"}, Algorithm: sluice.Credits, Limit: 10, Covers: "monthly"},
	}}
	ctx := context.Background()
	attrs := map[string]string{"key": "k", "client": "c"}
	for i := range 4 {
		if d, err := lim.Allow(ctx, p, attrs); err != nil || !d.Allowed {
			t.Fatalf("request %d: %+v, %v; want both sub-windows used, the credits paying past the first", i+1, d, err)
		}
	}
	if d, err := lim.Allow(ctx, p, attrs); err != nil || d.Allowed || d.DeniedBy != "hot" {
		t.Errorf("a fifth: %+v, %v; want denied by hot", d, err)
	}
	if b, _ := lim.Credits(ctx, p, "", map[string]string{"key": "k"}); b.Balance != 7 {
		t.Errorf("balance %d, want 7 (3 paid)", b.Balance)
	}
}
