package memstore

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicerate/sluice/store"
	"github.com/sluicerate/sluice/storetest"
)

// windowOf returns the window s keeps for c of policy, or nil.
func windowOf(s *Store, policy string, c *store.Check) *window {
	k := key{policy: policy, rule: c.Rule, values: encodeValues(c.Values)}
	h := k.hash(s.seed)
	sh := &s.shards[h&s.mask]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.lookup(h, &k)
}

func TestPeriodicHistoryIsBounded(t *testing.T) {
	// A monthly quota keeping 3 periods, written in 40 months in a row:
	// its window holds at most 3 past totals, the last 3.
	clock := storetest.NewClock(time.Date(2027, 1, 15, 0, 0, 0, 0, time.UTC))
	s := New(Config{Clock: clock.Now, Shards: 1})
	ctx := context.Background()
	q := store.Check{Rule: "month", Values: []string{"u"}, Limit: 1000, Window: store.MaxPeriodLength,
		Algorithm: store.Periodic, Calendar: store.Calendar{Period: store.Month}, History: 3}
	for i := range 40 {
		clock.Set(time.Date(2027, time.January+time.Month(i), 15, 0, 0, 0, 0, time.UTC))
		q.Cost = int64(i + 1)
		req := store.Request{Policy: "p", Checks: []store.Check{q}}
		if err := s.Decide(ctx, &req); err != nil || !req.Results[0].Fits {
			t.Fatalf("month %d: %v, %+v", i, err, req.Results)
		}
		if w := windowOf(s, "p", &q); w.n > 3 || len(w.ring) > 3 {
			t.Fatalf("month %d: %d totals in a ring of %d, want at most 3", i, w.n, len(w.ring))
		}
	}
	u := store.UsageRequest{Policy: "p", Check: q}
	if err := s.Usage(ctx, &u); err != nil {
		t.Fatal(err)
	}
	var got []int64
	for _, p := range u.Periods {
		got = append(got, p.Used)
	}
	if want := []int64{40, 39, 38, 37}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("usage %v, want %v", got, want)
	}
}

func TestCreditIDsAreBounded(t *testing.T) {
	// Changes with distinct ids: a balance remembers at most MaxCreditIDs.
	clock := storetest.NewClock(storetest.T0)
	s := New(Config{Clock: clock.Now, Shards: 1})
	c := store.Check{Rule: "credits", Limit: 0, Window: time.Second, Algorithm: store.Credits}
	for i := range 3 * store.MaxCreditIDs {
		clock.Advance(time.Second)
		req := store.CreditRequest{Policy: "p", Check: c, Op: store.CreditAdd, Amount: 1, ID: fmt.Sprint(i)}
		if err := s.Credit(context.Background(), &req); err != nil || !req.Applied {
			t.Fatalf("add %d: %v, applied %v", i, err, req.Applied)
		}
	}
	if n := len(windowOf(s, "p", &c).credit.ids); n > store.MaxCreditIDs {
		t.Errorf("%d ids remembered, want at most %d", n, store.MaxCreditIDs)
	}
}

func TestQuotaDecideAllocs(t *testing.T) {
	// A decision on a calendar quota covered by credits, both windows
	// written, allocates nothing.
	clock := storetest.NewClock(time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC))
	s := New(Config{Clock: clock.Now})
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	req := &store.Request{Policy: "p", Checks: []store.Check{
		{Rule: "month", Values: []string{"u"}, Limit: 1 << 40, Window: store.MaxPeriodLength, Algorithm: store.Periodic,
			Calendar: store.Calendar{Period: store.Month, Location: berlin}, History: 12, Cost: 1},
		{Rule: "credits", Values: []string{"u"}, Limit: 1 << 40, Window: time.Second, Algorithm: store.Credits,
			Calendar: store.Calendar{Period: store.Day, Location: berlin}, Refill: store.Refill{Add: 1}, Cost: 1, Covers: 1},
	}}
	ctx := context.Background()
	if err := s.Decide(ctx, req); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(100, func() {
		clock.Advance(time.Millisecond)
		if err := s.Decide(ctx, req); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("%v allocations per decision, want 0", n)
	}
}

func TestBudgetRefusesQuotas(t *testing.T) {
	// A budget request holding a calendar quota or credits is an error
	// and changes nothing.
	clock := storetest.NewClock(storetest.T0)
	s := New(Config{Clock: clock.Now})
	rate := store.Check{Rule: "rate", Limit: 100, Window: time.Minute, Cost: 1, Budget: time.Second}
	for _, c := range []store.Check{
		{Rule: "month", Limit: 10, Window: store.MaxPeriodLength, Algorithm: store.Periodic, Calendar: store.Calendar{Period: store.Month}, Cost: 1},
		{Rule: "credits", Limit: 10, Window: time.Second, Algorithm: store.Credits, Cost: 1},
	} {
		req := &store.Request{Policy: "p", Checks: []store.Check{rate, c}}
		b := &store.BudgetRequest{Asks: []store.SliceAsk{{Check: 0, Want: 10, ID: "slice"}}}
		err := s.Budget(context.Background(), req, b)
		if err == nil || !strings.Contains(err.Error(), "takes no budget") {
			t.Errorf("budget with a %v check: %v, want an error saying it takes no budget", c.Algorithm, err)
		}
	}
	if n := s.Len(); n != 0 {
		t.Errorf("%d windows after refused budgets, want 0", n)
	}
}

func TestLeaseCoversAnotherKey(t *testing.T) {
	// The memory store keeps no slots: credits that cover a quota of
	// another key (which redisstore with a slot group per rule refuses)
	// are leased as any other, the balance paying for the quota's
	// overage and the release giving it back.
	clock := storetest.NewClock(time.Date(2027, 3, 10, 0, 0, 0, 0, time.UTC))
	s := New(Config{Clock: clock.Now})
	ctx := context.Background()
	q := store.Check{Rule: "month", Values: []string{"ann"}, Limit: 1, Window: store.MaxPeriodLength,
		Algorithm: store.Periodic, Calendar: store.Calendar{Period: store.Month}, Cost: 1}
	c := store.Check{Rule: "credits", Values: []string{"bob"}, Limit: 5, Window: time.Second, Algorithm: store.Credits, Cost: 1, Covers: 1}
	slots := store.Check{Rule: "slots", Values: []string{"ann"}, Limit: 2, Window: time.Minute, Algorithm: store.Concurrency, Cost: 1}
	for i, want := range []int64{5, 4} { // the quota pays the first, the balance the second
		req := &store.Request{Policy: "p", Checks: []store.Check{q, c, slots}}
		grant := &store.LeaseGrant{ID: fmt.Sprint("job-", i), TTL: time.Minute}
		if err := s.Acquire(ctx, req, grant); err != nil || grant.Expires.IsZero() || req.Results[1].Remaining != want {
			t.Fatalf("lease %d: %+v, expires %v, %v; want a lease, the balance at %d", i, req.Results, grant.Expires, err, want)
		}
	}
	fin := &store.FinishRequest{Policy: "p", Checks: []store.Check{q, c, slots}, ID: "job-1", Op: store.LeaseRelease}
	if st, err := s.Finish(ctx, fin); err != nil || !st.Held {
		t.Fatalf("release: %+v, %v; want it held", st, err)
	}
	get := &store.CreditRequest{Policy: "p", Check: c}
	if err := s.Credit(ctx, get); err != nil || get.Balance != 5 {
		t.Errorf("after the release: balance %d, %v; want 5", get.Balance, err)
	}
}
