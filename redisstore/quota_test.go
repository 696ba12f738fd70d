package redisstore_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicerate/sluice/internal/redistest"
	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/store"
	"github.com/sluicerate/sluice/storetest"
)

// quotaScenarios are this file's cases: each runs over every topology
// (TestQuotas) and a Sentinel deployment (TestSentinelQuotas).
var quotaScenarios = []struct {
	name string
	run  func(t *testing.T, b backend)
}{
	{"PeriodicResetsAtLocalMidnight", periodicResetsAtLocalMidnight},
	{"PeriodicDailyNewYork", periodicDailyNewYork},
	{"PeriodicUsage", periodicUsage},
	{"Credits", creditsScenario},
	{"CreditsCoverOverage", creditsCoverOverage},
	{"QuotasRollBack", quotasRollBack},
	{"QuotasInspect", quotasInspect},
}

// quotaBackends are the topologies TestQuotas runs the scenarios over: each
// client on the package's server, with the slot layout per rule, and the
// package's Cluster.
var quotaBackends = append(backends[:len(backends):len(backends)],
	backend{"per-rule", func(tb testing.TB, cfg redisstore.Config) *redisstore.Store {
		cfg.Slots = redisstore.SlotsPerRule
		return openRueidis(tb, cfg)
	}},
	backend{"cluster", openCluster})

func TestQuotas(t *testing.T) {
	for _, sc := range quotaScenarios {
		t.Run(sc.name, func(t *testing.T) {
			for _, b := range quotaBackends {
				t.Run(b.name, func(t *testing.T) { sc.run(t, b) })
			}
		})
	}
}

// TestSentinelQuotas runs the scenarios over a Sentinel deployment of the
// test's own.
func TestSentinelQuotas(t *testing.T) {
	st := redistest.StartSentinel(t)
	b := backend{"sentinel", func(tb testing.TB, cfg redisstore.Config) *redisstore.Store {
		cfg.Mode, cfg.Addrs, cfg.MasterName = redisstore.Sentinel, st.Addrs(), redistest.SentinelMaster
		s, err := redisstore.New(cfg)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { s.Close() })
		return s
	}}
	for _, sc := range quotaScenarios {
		t.Run(sc.name, func(t *testing.T) { sc.run(t, b) })
	}
}

// quotaStore opens a store over backend b with a manual clock at start.
func quotaStore(t *testing.T, b backend, cfg redisstore.Config, start time.Time) (*redisstore.Store, *storetest.Clock) {
	t.Helper()
	clock := storetest.NewClock(start)
	cfg.Prefix, cfg.Clock = newPrefix(), clock.Now
	return b.open(t, cfg), clock
}

func berlin(t *testing.T) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// monthly is a calendar quota of limit a month in Berlin, keeping history
// months.
func monthly(loc *time.Location, limit int64, history int) store.Check {
	return store.Check{Rule: "month", Values: []string{"ann"}, Limit: limit, Window: 32 * 24 * time.Hour,
		Algorithm: store.Periodic, Calendar: store.Calendar{Period: store.Month, Location: loc}, History: history, Cost: 1}
}

// decideOne decides req and returns the result of check i.
func decideOne(t *testing.T, s *redisstore.Store, req *store.Request, i int) store.Result {
	t.Helper()
	if err := s.Decide(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	return req.Results[i]
}

// periodicResetsAtLocalMidnight: a monthly quota in Berlin resets at
// local midnight of the 1st, across February and the spring DST change,
// and a denial's RetryAfter is the time to it, to the µs.
func periodicResetsAtLocalMidnight(t *testing.T, b backend) {
	loc := berlin(t)
	start := time.Date(2026, 2, 27, 12, 0, 0, 0, loc)
	s, clock := quotaStore(t, b, redisstore.Config{}, start)
	req := &store.Request{Policy: "api", Shared: []string{"ann"}, Checks: []store.Check{monthly(loc, 2, 0)}}
	for i := range 2 {
		if r := decideOne(t, s, req, 0); !r.Fits || r.Used != int64(i+1) {
			t.Fatalf("decision %d: %+v; want it to fit with used %d", i+1, r, i+1)
		}
	}
	march := time.Date(2026, 3, 1, 0, 0, 0, 0, loc)
	r := decideOne(t, s, req, 0)
	if r.Fits || r.Cause != store.CauseLimit || r.RetryAfter != march.Sub(start) || r.Used != 2 {
		t.Fatalf("third decision: %+v; want a denial with retry %v", r, march.Sub(start))
	}
	clock.Set(march.Add(-time.Microsecond))
	if r := decideOne(t, s, req, 0); r.Fits || r.RetryAfter != time.Microsecond {
		t.Fatalf("1µs before March: %+v; want a denial with retry 1µs", r)
	}
	clock.Set(march)
	if r := decideOne(t, s, req, 0); !r.Fits || r.Used != 1 || r.Remaining != 1 {
		t.Fatalf("at March's start: %+v; want a fit with used 1", r)
	}
	// March has 31 days, one of 23 hours: April starts 30 days
	// and 23 hours after March does.
	april := time.Date(2026, 4, 1, 0, 0, 0, 0, loc)
	if april.Sub(march) != 30*24*time.Hour+23*time.Hour {
		t.Fatalf("March in Berlin lasts %v", april.Sub(march))
	}
	req.Checks[0].Cost = 2
	if r := decideOne(t, s, req, 0); r.Fits || r.RetryAfter != april.Sub(march) || r.ResetAfter != april.Sub(march) {
		t.Fatalf("cost 2 with 1 left: %+v; want a denial with retry %v", r, april.Sub(march))
	}
	req.Checks[0].Cost = 3
	if r := decideOne(t, s, req, 0); r.Fits || r.RetryAfter != store.MaxRetry {
		t.Fatalf("cost above the limit: %+v; want retry MaxRetry", r)
	}
}

// periodicDailyNewYork: a daily quota in New York resets at local
// midnight on a day of 25 hours.
func periodicDailyNewYork(t *testing.T, b backend) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	day := time.Date(2026, 11, 1, 0, 0, 0, 0, ny)
	next := time.Date(2026, 11, 2, 0, 0, 0, 0, ny)
	s, clock := quotaStore(t, b, redisstore.Config{}, day.Add(time.Hour))
	req := &store.Request{Policy: "api", Checks: []store.Check{{Rule: "day", Limit: 1, Window: 26 * time.Hour, Algorithm: store.Periodic,
		Calendar: store.Calendar{Period: store.Day, Location: ny}, Cost: 1}}}
	decideOne(t, s, req, 0)
	if r := decideOne(t, s, req, 0); r.Fits || r.RetryAfter != next.Sub(day)-time.Hour || next.Sub(day) != 25*time.Hour {
		t.Fatalf("second of the day: %+v; want retry %v", r, next.Sub(day)-time.Hour)
	}
	clock.Set(next)
	if r := decideOne(t, s, req, 0); !r.Fits {
		t.Fatalf("next day: %+v; want a fit", r)
	}
}

// periodicUsage: after a scripted year, Usage gives each month's
// count, the months without any as 0, and History bounds what is kept.
func periodicUsage(t *testing.T, b backend) {
	loc := berlin(t)
	s, clock := quotaStore(t, b, redisstore.Config{}, time.Date(2026, 1, 10, 0, 0, 0, 0, loc))
	check := monthly(loc, 1000, 12)
	req := &store.Request{Policy: "api", Shared: []string{"ann"}, Checks: []store.Check{check}}
	want := map[int64]int64{}
	for m := range 14 {
		if m%4 == 2 {
			continue // a month with nothing
		}
		at := time.Date(2026, time.January+time.Month(m), 1+m, 12, 0, 0, 0, loc)
		clock.Set(at)
		idx, _, _ := check.Calendar.At(at.UnixMicro())
		for range m + 1 {
			decideOne(t, s, req, 0)
			want[idx]++
		}
	}
	u := &store.UsageRequest{Policy: "api", Shared: []string{"ann"}, Check: check}
	if err := s.Usage(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	if len(u.Periods) != 13 {
		t.Fatalf("got %d periods; want 13", len(u.Periods))
	}
	cur, _, _ := check.Calendar.At(clock.Now().UnixMicro())
	for j, p := range u.Periods {
		start, end := check.Calendar.Bounds(cur - int64(j))
		if p.Index != cur-int64(j) || p.Start != start || p.End != end || p.Used != want[p.Index] {
			t.Errorf("period %d: %+v; want index %d used %d", j, p, cur-int64(j), want[cur-int64(j)])
		}
	}
}

// credits is a credits check of balance limit, refilled monthly by refill.
func credits(loc *time.Location, limit int64, refill store.Refill) store.Check {
	c := store.Check{Rule: "credits", Values: []string{"ann"}, Limit: limit, Window: time.Microsecond, Algorithm: store.Credits, Refill: refill, Cost: 1}
	if refill != (store.Refill{}) {
		c.Calendar = store.Calendar{Period: store.Month, Location: loc}
	}
	return c
}

// creditsScenario: a balance drawn, denied with CauseCredits, refilled, topped
// up once under one id, and settled below 0.
func creditsScenario(t *testing.T, b backend) {
	loc := berlin(t)
	ctx := context.Background()
	start := time.Date(2026, 2, 27, 12, 0, 0, 0, loc)
	s, clock := quotaStore(t, b, redisstore.Config{}, start)
	check := credits(loc, 3, store.Refill{Add: 2})
	req := &store.Request{Policy: "api", Shared: []string{"ann"}, Checks: []store.Check{check}}
	req.Checks[0].Cost = 2
	if r := decideOne(t, s, req, 0); !r.Fits || r.Remaining != 1 || r.Used != 2 {
		t.Fatalf("first draw: %+v; want remaining 1", r)
	}
	// 1 left, cost 6: three refills of 2 make it 7, at the start
	// of May.
	req.Checks[0].Cost = 6
	may := time.Date(2026, 5, 1, 0, 0, 0, 0, loc)
	if r := decideOne(t, s, req, 0); r.Fits || r.Cause != store.CauseCredits || r.RetryAfter != may.Sub(start) || r.Remaining != 1 {
		t.Fatalf("cost 6 with 1: %+v; want a credits denial with retry %v", r, may.Sub(start))
	}
	cr := &store.CreditRequest{Policy: "api", Shared: []string{"ann"}, Check: check, Op: store.CreditAdd, Amount: 10, ID: "order-1"}
	for i := range 2 {
		if err := s.Credit(ctx, cr); err != nil {
			t.Fatal(err)
		}
		if cr.Balance != 11 || cr.Applied != (i == 0) {
			t.Fatalf("top-up %d: balance %d applied %v; want 11, %v", i+1, cr.Balance, cr.Applied, i == 0)
		}
	}
	march := time.Date(2026, 3, 1, 0, 0, 0, 0, loc)
	if cr.NextRefill != march.Sub(start) {
		t.Fatalf("next refill in %v; want %v", cr.NextRefill, march.Sub(start))
	}
	clock.Set(time.Date(2026, 4, 2, 0, 0, 0, 0, loc)) // two refills
	cr.Op, cr.ID = store.CreditGet, ""
	if err := s.Credit(ctx, cr); err != nil || cr.Balance != 15 || cr.Applied {
		t.Fatalf("get after two refills: %+v, %v; want 15", cr, err)
	}
	// A lease of estimate 5 settled at 20 takes the balance below 0.
	req.Checks[0].Cost = 5
	lease := &store.LeaseGrant{ID: "job-1", TTL: time.Minute}
	if err := s.Acquire(ctx, req, lease); err != nil || !req.Results[0].Fits || req.Results[0].Remaining != 10 {
		t.Fatalf("acquire: %+v, %v; want remaining 10", req.Results, err)
	}
	fin := &store.FinishRequest{Policy: "api", Shared: []string{"ann"}, Checks: req.Checks, ID: "job-1", Op: store.LeaseSettle, Cost: 20}
	if st, err := s.Finish(ctx, fin); err != nil || !st.Held {
		t.Fatalf("settle: %+v, %v", st, err)
	}
	if err := s.Credit(ctx, cr); err != nil || cr.Balance != -5 {
		t.Fatalf("after the settle: balance %d, %v; want -5", cr.Balance, err)
	}
	req.Checks[0].Cost = 1
	if r := decideOne(t, s, req, 0); r.Fits || r.Remaining != -5 || r.Used != 8 {
		t.Fatalf("a draw on -5: %+v; want a denial", r)
	}
	cr.Op, cr.Amount, cr.ID = store.CreditSet, 4, "reset"
	if err := s.Credit(ctx, cr); err != nil || cr.Balance != 4 || !cr.Applied {
		t.Fatalf("set: %+v, %v", cr, err)
	}
}

// creditsCoverOverage: credits that pay for a calendar quota's
// overage, with a rate rule all or nothing.
func creditsCoverOverage(t *testing.T, b backend) {
	loc := berlin(t)
	s, clock := quotaStore(t, b, redisstore.Config{}, time.Date(2026, 6, 1, 12, 0, 0, 0, loc))
	cr := credits(loc, 2, store.Refill{})
	cr.Covers = 2
	req := &store.Request{Policy: "api", Shared: []string{"ann"}, Checks: []store.Check{
		{Rule: "rate", Values: []string{"ann"}, Limit: 3, Window: time.Second, Cost: 1},
		monthly(loc, 2, 3), cr}}
	step := func(name string, fits, quota, creditsFit bool, used, balance int64) {
		t.Helper()
		if err := s.Decide(context.Background(), req); err != nil {
			t.Fatal(err)
		}
		rs := req.Results
		admitted := (rs[0].Fits) && (rs[1].Fits || rs[2].Fits) && rs[2].Fits
		if admitted != fits || rs[1].Fits != quota || rs[2].Fits != creditsFit || rs[1].Used != used || rs[2].Remaining != balance {
			t.Fatalf("%s: %+v; want admitted %v, quota fits %v used %d, credits fit %v balance %d", name, rs, fits, quota, used, creditsFit, balance)
		}
		clock.Advance(time.Second)
	}
	step("1st: the quota", true, true, true, 1, 2)
	step("2nd: the quota", true, true, true, 2, 2)
	step("3rd: credits", true, false, true, 3, 1)
	step("4th: credits", true, false, true, 4, 0)
	step("5th: none", false, false, false, 4, 0)
	// The rate rule denies: nothing is drawn or counted.
	cr2 := &store.CreditRequest{Policy: "api", Shared: []string{"ann"}, Check: cr, Op: store.CreditAdd, Amount: 5}
	if err := s.Credit(context.Background(), cr2); err != nil || cr2.Balance != 5 {
		t.Fatalf("top-up: %+v, %v", cr2, err)
	}
	for range 3 {
		if err := s.Decide(context.Background(), req); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Decide(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if rs := req.Results; rs[0].Fits || rs[1].Used != 7 || rs[2].Remaining != 2 {
		t.Fatalf("denied by the rate rule: %+v; want used 7, balance 2", rs)
	}
}

// quotasRollBack: a request that a global rule denies after its calendar
// quota and its credits counted it (per rule slots: the global rule's
// group is decided last) leaves both as they were, and a peek draws
// nothing.
func quotasRollBack(t *testing.T, b backend) {
	loc := berlin(t)
	s, _ := quotaStore(t, b, redisstore.Config{}, time.Date(2026, 6, 1, 12, 0, 0, 0, loc))
	req := &store.Request{Policy: "api", Checks: []store.Check{
		monthly(loc, 10, 2), credits(loc, 10, store.Refill{To: 10}),
		{Rule: "global", Limit: 1, Window: time.Hour, Cost: 1}}}
	if r := decideOne(t, s, req, 0); !r.Fits || req.Results[1].Remaining != 9 || !req.Results[2].Fits {
		t.Fatalf("first: %+v; want every rule to fit", req.Results)
	}
	rs := req.Results
	if err := s.Decide(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if rs[2].Fits || rs[0].Used != 1 || rs[1].Remaining != 9 || rs[1].Used != 1 {
		t.Fatalf("denied by the global rule: %+v; want the quota at 1 and the balance at 9", rs)
	}
	req.DryRun = true
	req.Checks[2].Limit = 5
	if err := s.Decide(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if !rs[0].Fits || rs[0].Used != 2 || rs[1].Remaining != 8 {
		t.Fatalf("peek: %+v; want the quota at 2 and the balance at 8, as a write would leave them", rs)
	}
	req.DryRun = false
	req.Checks[2].Limit = 1
	windows, _, err := s.Inspect(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if st := windows[0].State; len(st) != 2 || st[1] != 1 {
		t.Fatalf("the quota's stored state %v; want its period and a count of 1", st)
	}
	if st := windows[1].State; len(st) != 2 || st[0] != 9 {
		t.Fatalf("the balance's stored state %v; want 9 and its period", st)
	}
}

// quotasInspect: Inspect shows a calendar quota's period and count with
// the key's TTL (its period's end), and a balance, which never expires.
func quotasInspect(t *testing.T, b backend) {
	loc := berlin(t)
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, loc)
	s, _ := quotaStore(t, b, redisstore.Config{}, now)
	cr := credits(loc, 4, store.Refill{})
	req := &store.Request{Policy: "api", Shared: []string{"ann"}, Checks: []store.Check{monthly(loc, 10, 0), cr}}
	req.Checks[0].Cost, req.Checks[1].Cost = 3, 3
	decideOne(t, s, req, 0)
	windows, _, err := s.Inspect(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	idx, _, end := req.Checks[0].Calendar.At(now.UnixMicro())
	if w := windows[0]; w.Algorithm != store.Periodic || len(w.State) != 2 || w.State[0] != idx || w.State[1] != 3 ||
		w.TTL <= 0 || w.TTL > time.Duration(end-now.UnixMicro())*time.Microsecond+time.Millisecond {
		t.Errorf("the quota's window: %+v; want period %d, count 3, a TTL of at most %v", w, idx, time.Duration(end-now.UnixMicro())*time.Microsecond)
	}
	if w := windows[1]; w.Algorithm != store.Credits || len(w.State) != 2 || w.State[0] != 1 || w.TTL != -1 {
		t.Errorf("the balance: %+v; want 1, and no expiry", w)
	}
	// Found by its name alone (sluice inspect --key, the admin view's SCAN).
	for i, alg := range []store.Algorithm{store.Periodic, store.Credits} {
		w, _, err := s.InspectKey(context.Background(), windows[i].Key)
		if err != nil || w.Algorithm != alg || !slices.Equal(w.State, windows[i].State) {
			t.Errorf("InspectKey(%s): %+v, %v; want %v with state %v", windows[i].Key, w, err, alg, windows[i].State)
		}
	}
}

// TestQuotasRefused: a credits rule that covers a calendar quota of
// another slot group, and a budget over a calendar quota, are refused
// before anything is sent.
func TestQuotasRefused(t *testing.T) {
	loc := berlin(t)
	s, _ := quotaStore(t, quotaBackends[len(backends)], redisstore.Config{}, time.Date(2026, 6, 1, 12, 0, 0, 0, loc))
	cr := credits(loc, 4, store.Refill{})
	cr.Values, cr.Covers = nil, 1
	req := &store.Request{Policy: "api", Checks: []store.Check{monthly(loc, 10, 0), cr}}
	err := s.Decide(context.Background(), req)
	if err == nil || !strings.Contains(err.Error(), "different slot groups") {
		t.Errorf("covers across slot groups: %v; want an error that says so", err)
	}
	req.Checks = []store.Check{monthly(loc, 10, 0), {Rule: "rate", Limit: 100, Window: time.Minute, Budget: time.Second, Cost: 1}}
	b := &store.BudgetRequest{Asks: []store.SliceAsk{{Check: 1, Want: 1, ID: "slice-1"}}}
	if err := s.Budget(context.Background(), req, b); err == nil || !strings.Contains(err.Error(), "takes no budget") {
		t.Errorf("a budget beside a calendar quota: %v; want an error that says it takes none", err)
	}
}

// TestQuotasOnRedisClock: without Config.Clock the scripts take the
// period Redis's TIME is in, from the periods this process's clock sends.
func TestQuotasOnRedisClock(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range quotaBackends {
		t.Run(b.name, func(t *testing.T) {
			s := b.open(t, redisstore.Config{Prefix: newPrefix()})
			cal := store.Calendar{Period: store.Day, Location: ny}
			q := store.Check{Rule: "day", Values: []string{"ann"}, Limit: 2, Window: 26 * time.Hour, Algorithm: store.Periodic, Calendar: cal, History: 1, Cost: 1}
			cr := store.Check{Rule: "credits", Values: []string{"ann"}, Limit: 1, Window: time.Microsecond, Algorithm: store.Credits,
				Calendar: cal, Refill: store.Refill{Add: 1}, Cost: 1}
			req := &store.Request{Policy: "api", Shared: []string{"ann"}, Checks: []store.Check{q, cr}}
			first := decideOne(t, s, req, 0)
			if !first.Fits || first.Used != 1 || first.ResetAfter <= 0 || first.ResetAfter > 25*time.Hour || req.Results[1].Remaining != 0 {
				t.Fatalf("first: %+v; want the day's count at 1, reset within the day, the balance at 0", req.Results)
			}
			second := decideOne(t, s, req, 1)
			if second.Fits || second.Cause != store.CauseCredits || second.RetryAfter <= 0 || second.RetryAfter > 25*time.Hour {
				t.Fatalf("second: %+v; want a credits denial until the next day's refill", second)
			}
			if req.Results[0].Used != 1 {
				t.Fatalf("second: the day counts %d; want 1, nothing recorded", req.Results[0].Used)
			}
			u := &store.UsageRequest{Policy: "api", Shared: []string{"ann"}, Check: q}
			if err := s.Usage(context.Background(), u); err != nil {
				t.Fatal(err)
			}
			if len(u.Periods) != 2 || u.Periods[0].Used != 1 || u.Periods[1].Used != 0 || u.Periods[0].Index != u.Periods[1].Index+1 {
				t.Fatalf("usage %+v; want today's 1 and yesterday's 0", u.Periods)
			}
			c := &store.CreditRequest{Policy: "api", Shared: []string{"ann"}, Check: cr, Op: store.CreditGet}
			if err := s.Credit(context.Background(), c); err != nil || c.Balance != 0 || c.NextRefill <= 0 || c.NextRefill > 25*time.Hour {
				t.Fatalf("get: %+v, %v; want 0 and a refill within the day", c, err)
			}
		})
	}
}

// TestQuotaKeysOfAnotherKind: a calendar quota's or a balance's key that
// holds a value of another format is an error that names the key and what
// it holds, for a decision, Usage, Credit and Inspect, on functions and on
// scripts, and the value is left as it was. A count below 0 is not a
// calendar quota's; a balance below 0 is a balance.
func TestQuotaKeysOfAnotherKind(t *testing.T) {
	ctx := context.Background()
	loc := berlin(t)
	for _, b := range backends[:2] {
		t.Run(b.name, func(t *testing.T) {
			s, _ := quotaStore(t, b, redisstore.Config{}, time.Date(2026, 6, 1, 12, 0, 0, 0, loc))
			req := &store.Request{Policy: "api", Shared: []string{"ann"}, Checks: []store.Check{monthly(loc, 10, 0), credits(loc, 4, store.Refill{})}}
			decideOne(t, s, req, 0)
			windows, _, err := s.Inspect(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			quotaKey, balanceKey, idx := windows[0].Key, windows[1].Key, windows[0].State[0]
			c := admin(t)
			set := func(key, v string) {
				t.Helper()
				if err := c.Do(ctx, c.B().Set().Key(key).Value(v).Build()).Error(); err != nil {
					t.Fatal(err)
				}
			}
			usage := func() error {
				return s.Usage(ctx, &store.UsageRequest{Policy: "api", Shared: []string{"ann"}, Check: req.Checks[0]})
			}
			credit := func() error {
				return s.Credit(ctx, &store.CreditRequest{Policy: "api", Shared: []string{"ann"}, Check: req.Checks[1], Op: store.CreditAdd, Amount: 5})
			}
			inspect := func() error { _, _, err := s.Inspect(ctx, req); return err }
			decide := func() error { return s.Decide(ctx, req) }
			for _, tc := range []struct {
				key, value, want string
				calls            []func() error
			}{
				{quotaKey, "x:1", `is not a calendar quota's count (it holds "x:1")`, []func() error{decide, usage, inspect}},
				{quotaKey, fmt.Sprintf("%d:-1", idx), fmt.Sprintf(`is not a calendar quota's count (it holds "%d:-1")`, idx), []func() error{decide, usage, inspect}},
				{balanceKey, "1:2:3", `is not a credits balance (it holds "1:2:3")`, []func() error{decide, credit, inspect}},
			} {
				set(quotaKey, fmt.Sprintf("%d:0", idx))
				set(balanceKey, "4:0")
				set(tc.key, tc.value)
				for i, call := range tc.calls {
					err := call()
					if err == nil || !strings.Contains(err.Error(), "key "+tc.key+" "+tc.want+": remove it or use another prefix") {
						t.Errorf("%s holding %q, call %d: %v; want an error that names the key, what it holds and the fix", tc.key, tc.value, i, err)
					}
				}
				if v, err := c.Do(ctx, c.B().Get().Key(tc.key).Build()).ToString(); err != nil || v != tc.value {
					t.Errorf("%s after the calls: %q, %v; want %q as it was", tc.key, v, err, tc.value)
				}
			}
			// A balance below 0 is a balance: Credit adds to it.
			set(balanceKey, "-3:0")
			r := &store.CreditRequest{Policy: "api", Shared: []string{"ann"}, Check: req.Checks[1], Op: store.CreditAdd, Amount: 5}
			if err := s.Credit(ctx, r); err != nil || r.Balance != 2 {
				t.Errorf("adding 5 to a balance of -3: %+v, %v; want 2", r, err)
			}
		})
	}
}
