package sluice_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/store"
	"github.com/sluicerate/sluice/storetest"
)

func TestBudgetValidation(t *testing.T) {
	rule := func(mod func(r *sluice.Rule)) *sluice.Policy {
		r := sluice.Rule{Name: "r", Limit: 100, Window: time.Minute, Budget: time.Second}
		mod(&r)
		return &sluice.Policy{Name: "p", Rules: []sluice.Rule{r}}
	}
	for _, tt := range []struct {
		name string
		p    *sluice.Policy
		want string // "" when valid
	}{
		{"log at a quarter of the window", rule(func(r *sluice.Rule) { r.Budget = 15 * time.Second }), ""},
		{"log past a quarter", rule(func(r *sluice.Rule) { r.Budget = 15*time.Second + time.Microsecond }), "is longer than 15s, a quarter of the window"},
		{"counter past a quarter", rule(func(r *sluice.Rule) { r.Algorithm = sluice.SlidingCounter; r.Budget = 16 * time.Second }), "a slice never outlives its fixed window"},
		// 100 a minute: an interval of 600ms; a burst of 10 refills in 6s.
		{"gcra within its refill", rule(func(r *sluice.Rule) { r.Algorithm = sluice.GCRA; r.Burst = 10; r.Budget = 1500 * time.Millisecond }), ""},
		{"gcra past its refill", rule(func(r *sluice.Rule) { r.Algorithm = sluice.GCRA; r.Burst = 10; r.Budget = 2 * time.Second }), "is longer than 1.5s, a quarter of the time gcra's burst takes to refill"},
		{"negative", rule(func(r *sluice.Rule) { r.Budget = -time.Second }), "budget -1s is negative"},
		{"too short", rule(func(r *sluice.Rule) { r.Budget = time.Microsecond }), "shorter than 1ms"},
		{"min gap", rule(func(r *sluice.Rule) { r.MinGap = time.Second }), "a min gap cannot be budgeted"},
		{"spread", rule(func(r *sluice.Rule) { r.Spread = 2 }), "a spread rule cannot be budgeted"},
		{"shadow", rule(func(r *sluice.Rule) { r.Shadow = true }), "a shadow rule cannot be budgeted"},
		{"concurrency", rule(func(r *sluice.Rule) { r.Limit, r.Window, r.Concurrency, r.Lease = 0, 0, 2, time.Second }), "a concurrency rule cannot be budgeted"},
		{"limit 0", rule(func(r *sluice.Rule) { r.Limit = 0 }), ""},
		{"penalize", func() *sluice.Policy { p := rule(func(*sluice.Rule) {}); p.Penalize = true; return p }(), "a penalize policy records denied attempts"},
		{"beside a spread rule", func() *sluice.Policy {
			p := rule(func(*sluice.Rule) {})
			p.Rules = append(p.Rules, sluice.Rule{Name: "s", Limit: 10, Window: time.Minute, Spread: 2})
			return p
		}(), `rule "r" is budgeted and rule "s" is spread`},
	} {
		err := tt.p.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v, want valid", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, sluice.ErrInvalidPolicy)):
			t.Errorf("%s: error %v, want ErrInvalidPolicy with %q", tt.name, err, tt.want)
		}
	}
}

// TestBudgetConcurrent decides one budgeted window from many goroutines of
// one Limiter at one instant: never more than the limit, and after Close
// the store counts exactly what was admitted, every other unit given back.
func TestBudgetConcurrent(t *testing.T) {
	clock := storetest.NewClock(storetest.T0)
	s := memstore.New(memstore.Config{Clock: clock.Now})
	lim := sluice.NewLimiter(s, sluice.Config{Clock: clock})
	p := &sluice.Policy{Name: "api", Rules: []sluice.Rule{{Name: "global", Limit: 1000, Window: time.Minute, Budget: 10 * time.Second}}}
	ctx := context.Background()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		admitted int64
		local    int64
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				d, err := lim.Allow(ctx, p, nil)
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					mu.Lock()
					admitted++
					if d.Local {
						local++
					}
					mu.Unlock()
				} else if d.RetryAfter <= 0 || d.Local {
					t.Errorf("a denial without the store's wait: %+v", d)
				}
			}
		}()
	}
	wg.Wait()
	if err := lim.Close(); err != nil {
		t.Fatal(err)
	}
	st := lim.BudgetStats()
	d, err := lim.Peek(ctx, p, nil, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if admitted > 1000 || admitted+st.UnitsReturned != 1000 || d.Limits()[0].Used != admitted || st.UnitsStranded != 0 {
		t.Errorf("admitted %d (%d locally), stats %+v, the store counts %d after Close; want at most 1000, the rest returned, and the store to count what was admitted",
			admitted, local, st, d.Limits()[0].Used)
	}
	if local == 0 || st.Local != local {
		t.Errorf("%d decisions answered locally, stats %+v", local, st)
	}
}

// TestBudgetLocalAllocs checks that a decision answered from a slice
// allocates nothing (but for the rule statuses' shared blocks, one per
// fifteen decisions).
func TestBudgetLocalAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops items: allocations are counted without it")
	}
	lim := sluice.NewLimiter(memstore.New(memstore.Config{}), sluice.Config{})
	p := &sluice.Policy{Name: "api", Rules: []sluice.Rule{{Name: "global", Limit: 1 << 40, Window: time.Hour, Budget: 15 * time.Minute}}}
	ctx := context.Background()
	for range 1000 {
		if _, err := lim.Allow(ctx, p, nil); err != nil {
			t.Fatal(err)
		}
	}
	before := lim.BudgetStats()
	n := testing.AllocsPerRun(1000, func() {
		if d, _ := lim.Allow(ctx, p, nil); !d.Allowed {
			t.Fatal("denied")
		}
	})
	st := lim.BudgetStats()
	if local, byStore := st.Local-before.Local, st.Store-before.Store; local < 990 || n > 0.1 {
		t.Errorf("%.2f allocations per decision, %d answered locally and %d by the store", n, local, byStore)
	}
}

// BenchmarkBudgetLocal measures Limiter.Allow of one budgeted global rule
// over the memory store: nearly every decision answered from the slice.
func BenchmarkBudgetLocal(b *testing.B) {
	lim := sluice.NewLimiter(memstore.New(memstore.Config{}), sluice.Config{})
	p := &sluice.Policy{Name: "api", Rules: []sluice.Rule{{Name: "global", Limit: 1 << 50, Window: time.Hour, Budget: 15 * time.Minute}}}
	ctx := context.Background()
	calls := func(b *testing.B, before sluice.BudgetStats) {
		st := lim.BudgetStats()
		local, byStore := st.Local-before.Local, st.Store-before.Store
		b.ReportMetric(float64(byStore)/float64(local+byStore), "store-calls/op")
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		before := lim.BudgetStats()
		for b.Loop() {
			if _, err := lim.Allow(ctx, p, nil); err != nil {
				b.Fatal(err)
			}
		}
		calls(b, before)
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		before := lim.BudgetStats()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := lim.Allow(ctx, p, nil); err != nil {
					b.Error(err)
					return
				}
			}
		})
		calls(b, before)
	})
}

// flakyBudgeter is a memory store whose calls fail while fail is set.
type flakyBudgeter struct {
	*memstore.Store
	fail atomic.Bool
}

var errFlaky = errors.New("flaky: the store is down")

func (f *flakyBudgeter) Decide(ctx context.Context, req *store.Request) error {
	if f.fail.Load() {
		return errFlaky
	}
	return f.Store.Decide(ctx, req)
}

func (f *flakyBudgeter) Budget(ctx context.Context, req *store.Request, b *store.BudgetRequest) error {
	if f.fail.Load() {
		return errFlaky
	}
	return f.Store.Budget(ctx, req, b)
}

// TestBudgetStoreFailure: a store failure denies (OnError Deny) and gives
// back the units taken from slices; a lease call that failed does not
// stop the slice from leasing again.
func TestBudgetStoreFailure(t *testing.T) {
	clock := storetest.NewClock(storetest.T0)
	s := &flakyBudgeter{Store: memstore.New(memstore.Config{Clock: clock.Now})}
	lim := sluice.NewLimiter(s, sluice.Config{Clock: clock})
	p := &sluice.Policy{Name: "notify", Rules: []sluice.Rule{
		{Name: "global", Limit: 1000, Window: time.Minute, Budget: 10 * time.Second},
		{Name: "category", By: []string{"cat"}, Limit: 1000, Window: time.Minute},
	}}
	ctx := context.Background()
	attrs := map[string]string{"cat": "a"}
	admitted := 0
	allow := func() sluice.Decision {
		t.Helper()
		d, err := lim.Allow(ctx, p, attrs)
		if d.Allowed {
			admitted++
		}
		if err != nil && !errors.Is(err, errFlaky) {
			t.Fatal(err)
		}
		return d
	}
	for range 20 {
		allow()
	}
	down := func() {
		t.Helper()
		s.fail.Store(true)
		for range 5 {
			if d := allow(); d.Allowed || !d.Degraded {
				t.Fatalf("with the store down: %+v, want a degraded denial", d)
			}
		}
		s.fail.Store(false)
	}
	down() // the global rule answered from the slice, the category failing
	// Past the slice's end: the failing calls ask for a new one.
	clock.Advance(11 * time.Second)
	down()
	before := lim.BudgetStats()
	for range 50 {
		clock.Advance(10 * time.Millisecond)
		if d := allow(); !d.Allowed {
			t.Fatalf("after the store is back: %+v", d)
		}
	}
	if st := lim.BudgetStats(); st.SlicesLeased <= before.SlicesLeased {
		t.Errorf("no slice leased after the store came back: %+v", st)
	}
	if err := lim.Close(); err != nil {
		t.Fatal(err)
	}
	d, err := lim.Peek(ctx, p, attrs, 1000)
	if err != nil {
		t.Fatal(err)
	}
	// The slice that ended before the failing calls is stranded: its
	// return went with a call that failed.
	if st := lim.BudgetStats(); d.Limits()[0].Used != int64(admitted)+st.UnitsStranded {
		t.Errorf("the global window counts %d after Close, %d admitted, stats %+v", d.Limits()[0].Used, admitted, st)
	}
}

// TestBudgetDecide decides store requests with a budgeted check through
// Limiter.Decide, as a front with a model of its own (Envoy's) does, from
// two Limiters on one store: answered from slices, never more than the
// limit, the unbudgeted check beside it decided by the store and given
// back on its denial, and the request the caller made left as it was.
func TestBudgetDecide(t *testing.T) {
	clock := storetest.NewClock(storetest.T0)
	s := memstore.New(memstore.Config{Clock: clock.Now})
	lims := []*sluice.Limiter{
		sluice.NewLimiter(s, sluice.Config{Clock: clock}),
		sluice.NewLimiter(s, sluice.Config{Clock: clock}),
	}
	global := store.Check{Rule: "global", Limit: 500, Window: time.Minute, Cost: 1, Budget: 10 * time.Second}
	ctx := context.Background()
	admitted, local := int64(0), 0
	for i := range 1000 {
		user := store.Check{Rule: "user", Values: []string{string(rune('a' + i%4))}, Limit: 100, Window: time.Minute, Cost: 1}
		req := &store.Request{Policy: "envoy/api", Mode: store.ModeAllow, Checks: []store.Check{global, user}}
		d, err := lims[i%2].Decide(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if len(req.Results) != 0 || req.Checks[1].Values[0] != user.Values[0] {
			t.Fatalf("Decide changed the caller's request: results %v, checks %+v", req.Results, req.Checks)
		}
		if len(d.Limits()) != 2 || d.Limits()[0].Rule != "global" || d.Limits()[1].Rule != "user" {
			t.Fatalf("decision %d: limits %+v, want global and user", i, d.Limits())
		}
		if d.Allowed {
			admitted++
		} else if d.DeniedBy == "" || d.RetryAfter <= 0 {
			t.Fatalf("decision %d: a denial without its rule or the store's wait: %+v", i, d)
		}
		if d.Limits()[0].Remaining > 500 {
			t.Fatalf("decision %d: global remaining %d above the limit", i, d.Limits()[0].Remaining)
		}
		if d.Local {
			local++
		}
		clock.Advance(10 * time.Millisecond)
	}
	for _, lim := range lims {
		if err := lim.Close(); err != nil {
			t.Fatal(err)
		}
	}
	var stats sluice.BudgetStats
	for _, lim := range lims {
		st := lim.BudgetStats()
		stats.Local += st.Local
		stats.Store += st.Store
		stats.UnitsStranded += st.UnitsStranded
	}
	peek := &store.Request{Policy: "envoy/api", Mode: store.ModeAllow, DryRun: true, Checks: []store.Check{global}}
	d, err := lims[0].Decide(ctx, peek)
	if err != nil {
		t.Fatal(err)
	}
	// Four users of 100 each: at most 400 admitted, all within the global
	// limit; the store counts exactly what was admitted once the slices
	// are back (and the peek's unit, as it would admit it).
	if admitted != 400 || d.Limits()[0].Used != admitted+stats.UnitsStranded+1 {
		t.Errorf("admitted %d, the store counts %d (stranded %d); want 400, all counted", admitted, d.Limits()[0].Used, stats.UnitsStranded)
	}
	// The user check asks the store every time: no decision is answered
	// from slices alone, but most take the global unit from one.
	if local < 300 || stats.Local != 0 || stats.Store != 1000 {
		t.Errorf("%d decisions took a unit from a slice, stats %+v; want most, every one asking the store", local, stats)
	}
}

// TestDecideNegativeBudget refuses a check whose budget is negative.
func TestDecideNegativeBudget(t *testing.T) {
	lim := sluice.NewLimiter(memstore.New(memstore.Config{}), sluice.Config{})
	req := &store.Request{Policy: "p", Checks: []store.Check{{Rule: "r", Limit: 10, Window: time.Minute, Cost: 1, Budget: -time.Second}}}
	if _, err := lim.Decide(context.Background(), req); !errors.Is(err, sluice.ErrInvalidPolicy) || !strings.Contains(err.Error(), "budget -1s is negative") {
		t.Errorf("error %v, want ErrInvalidPolicy naming the negative budget", err)
	}
}
