package storetest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/resolve"
	"github.com/sluicerate/sluice/store"
)

// RunBudget runs the budget cases (store.Budgeter, sluice.Rule.Budget)
// against the stores open returns: the contract called directly, with the
// exact figures it promises, and several Limiters on one store standing
// for several processes, on the manual clock, checked by an independent
// count of what they admitted. A store that does not implement
// store.Budgeter skips them.
func RunBudget(t *testing.T, opener Opener) {
	t.Helper()
	probe := opener(t, NewClock(T0).Now)
	_, ok := probe.Store.(store.Budgeter)
	_ = probe.Store.Close()
	if !ok {
		t.Skipf("%T does not implement store.Budgeter: no budget cases (a budgeted rule is decided per request there)", probe.Store)
	}
	for _, c := range budgetCases {
		t.Run(c.name, func(t *testing.T) {
			c.run(open(t, opener, nil))
		})
	}
}

// budgeter returns the case's store as a store.Budgeter.
func (e *env) budgeter() store.Budgeter { return e.target.Store.(store.Budgeter) }

// budget calls the store's Budget with req and b and fails on error.
func (e *env) budget(req *store.Request, b *store.BudgetRequest) {
	e.t.Helper()
	if err := e.budgeter().Budget(e.ctx, req, b); err != nil {
		e.t.Fatalf("Budget at T0+%v: %v", e.elapsed(), err)
	}
}

// budgetRule is the one rule of the budget cases' policies: limit, window
// and budget, keyed by nothing (a global cap) or by "cat".
func budgetPolicy(name string, alg sluice.Algorithm, limit int64, window, budget time.Duration) *sluice.Policy {
	return &sluice.Policy{Name: name, Rules: []sluice.Rule{{Name: "global", Limit: limit, Window: window, Algorithm: alg, Budget: budget}}}
}

// checkOf returns the check of p's first rule for a request of cost, as a
// Limiter resolves it.
func (e *env) checkOf(p *sluice.Policy, attrs map[string]string, cost int64) store.Check {
	e.t.Helper()
	req, err := resolve.Request(p, attrs, cost)
	if err != nil {
		e.t.Fatal(err)
	}
	return req.Checks[0]
}

// lease asks the store for a slice of want units of p's first rule with a
// request of cost (0: a call with no request but the ask's check, at cost 1)
// and returns the grant.
func (e *env) lease(p *sluice.Policy, cost, want int64, id string) store.Grant {
	e.t.Helper()
	c := e.checkOf(p, nil, max(cost, 1))
	req := &store.Request{Policy: p.Name, Checks: []store.Check{c}}
	b := &store.BudgetRequest{Asks: []store.SliceAsk{{Check: 0, Want: want, ID: id}}}
	e.budget(req, b)
	if len(b.Grants) != 1 {
		e.t.Fatalf("Budget wrote %d grants for 1 ask", len(b.Grants))
	}
	return b.Grants[0]
}

// giveBack returns slice g (asked as id) of p's first rule with used units
// spent.
func (e *env) giveBack(p *sluice.Policy, g store.Grant, id string, used int64) {
	e.t.Helper()
	c := e.checkOf(p, nil, 1)
	e.budget(&store.Request{Policy: p.Name}, &store.BudgetRequest{Returns: []store.SliceReturn{
		{Check: c, ID: id, Start: g.Start, End: g.End, Granted: g.Granted, Used: used}}})
}

// status is what a peek of p's first rule's whole limit (or burst) says of
// its window: denied while anything counts, with the window's figures.
type status struct {
	Allowed                bool
	Used, Remaining        int64
	RetryAfter, ResetAfter time.Duration
}

func (e *env) status(p *sluice.Policy) status {
	e.t.Helper()
	r := &p.Rules[0]
	top := r.Limit
	if r.Algorithm == sluice.GCRA && r.Burst > 0 {
		top = r.Burst
	}
	d := e.peek(p, nil, top)
	return status{d.Allowed, d.Limits()[0].Used, d.Limits()[0].Remaining, d.RetryAfter, d.ResetAfter}
}

// counts checks the Used and Remaining of p's first rule's window.
func (e *env) counts(what string, p *sluice.Policy, used, remaining int64) {
	e.t.Helper()
	if s := e.status(p); s.Used != used || s.Remaining != remaining {
		e.t.Errorf("%s at T0+%v: used %d remaining %d, want %d and %d", what, e.elapsed(), s.Used, s.Remaining, used, remaining)
	}
}

// perRequest decides cost units of p's windows by the store, one request,
// as a Limiter does when it holds no slice: through a Limiter that does
// not see the store as a store.Budgeter (Limiter.Decide answers a
// budgeted check from slices when it does).
func (e *env) perRequest(p *sluice.Policy, cost int64) sluice.Decision {
	e.t.Helper()
	req, err := resolve.Request(p, nil, cost)
	if err != nil {
		e.t.Fatal(err)
	}
	d, err := sluice.NewLimiter(storeOnly{e.target.Store}, e.cfg).Decide(e.ctx, req)
	if err != nil {
		e.t.Fatalf("Decide(%s, %d) at T0+%v: %v", p.Name, cost, e.elapsed(), err)
	}
	return d
}

// storeOnly is a store seen as a plain store.Store: none of the
// interfaces it may also implement.
type storeOnly struct{ store.Store }

// at sets the clock to T0+d.
func (e *env) at(d time.Duration) { e.clock.Set(T0.Add(d)) }

func (e *env) expectStatus(what string, got, want status) {
	e.t.Helper()
	if got != want {
		e.t.Errorf("%s at T0+%v:\n got %+v\nwant %+v", what, e.elapsed(), got, want)
	}
}

func (e *env) expectGrant(what string, g store.Grant, granted int64, life time.Duration, used, remaining int64) {
	e.t.Helper()
	now := e.clock.Now().UnixMicro()
	if g.Granted != granted || g.Start != now || g.End != now+life.Microseconds() || g.Life != life ||
		g.Result.Used != used || g.Result.Remaining != remaining {
		e.t.Errorf("%s at T0+%v: got %+v\nwant granted %d, start %d, end %d, life %v, used %d, remaining %d",
			what, e.elapsed(), g, granted, now, now+life.Microseconds(), life, used, remaining)
	}
}

var budgetCases = []testCase{
	{"LeaseBesideABudgetedRuleSettles", func(e *env) {
		for _, alg := range []sluice.Algorithm{sluice.Log, sluice.GCRA} {
			p := &sluice.Policy{Name: "blease" + alg.String(), Rules: []sluice.Rule{
				{Name: "global", Limit: 10, Window: time.Minute, Algorithm: alg, Budget: 10 * time.Second},
				{Name: "in-flight", Concurrency: 2, Lease: time.Minute},
			}}
			x, d := e.acquire(p, nil, 5)
			if !d.Allowed {
				e.t.Fatalf("%v: a lease of 5 beside a budgeted rule of 10 was denied: %+v", alg, d)
			}
			e.counts(fmt.Sprintf("%v: the lease's estimate of 5", alg), p, 5, 5)
			// Settling moves what the lease recorded in the budgeted
			// window as in any other: to the real cost.
			e.end(fmt.Sprintf("%v: settled at 2", alg), x, 2, true)
			e.counts(fmt.Sprintf("%v: settled at 2", alg), p, 2, 8)
		}
	}},
	{"LogSliceIsAnEntryStampedAtItsEnd", func(e *env) {
		p := budgetPolicy("blog", sluice.Log, 10, time.Minute, 10*time.Second)
		g := e.lease(p, 1, 4, "s1")
		e.expectGrant("a slice of 4 with a request of 1", g, 4, 10*time.Second, 5, 5)
		// Until the request's entry leaves (T0+1m) both count; then the
		// slice alone, until its end plus the window (T0+1m10s).
		e.at(time.Minute - time.Microsecond)
		e.expectStatus("before the request leaves", e.status(p), status{false, 5, 5, 10*time.Second + time.Microsecond, 10*time.Second + time.Microsecond})
		e.at(time.Minute)
		e.expectStatus("the slice alone", e.status(p), status{false, 4, 6, 10 * time.Second, 10 * time.Second})
		e.at(70*time.Second - time.Microsecond)
		e.expectStatus("1µs before the slice leaves", e.status(p), status{false, 4, 6, time.Microsecond, time.Microsecond})
		e.at(70 * time.Second)
		e.expectStatus("the slice left", e.status(p), status{true, 10, 0, 0, time.Minute})
	}},
	{"LogFutureEntriesCountAndOrder", func(e *env) {
		p := budgetPolicy("blogf", sluice.Log, 10, time.Minute, 10*time.Second)
		g := e.lease(p, 1, 8, "s1")
		e.expectGrant("a slice of 8", g, 8, 10*time.Second, 9, 1)
		e.at(time.Second)
		e.expect("the last unit", e.perRequest(p, 1), allowed(0))
		// The per-request entries leave at T0+1m and T0+1m1s, the slice at
		// T0+1m10s: a request of 2 fits when the first two have left.
		e.at(2 * time.Second)
		// (Stamped after the slice, at T0+10s, the second would wait 68s.)
		e.expect("full", e.perRequest(p, 2), denied("global", 0, 59*time.Second))
		e.at(time.Minute + time.Second)
		e.expect("room for 2", e.perRequest(p, 2), allowed(0))
		e.at(time.Minute + 2*time.Second)
		e.expect("the slice still counts", e.perRequest(p, 1), denied("global", 0, 8*time.Second))
	}},
	{"LogReturnShrinksAndRestampsOrRemovesTheEntry", func(e *env) {
		p := budgetPolicy("blogr", sluice.Log, 10, time.Minute, 10*time.Second)
		g1 := e.lease(p, 1, 4, "s1")
		g2 := e.lease(p, 1, 3, "s2")
		e.expectGrant("a second slice", g2, 3, 10*time.Second, 9, 1)
		e.at(time.Second)
		e.giveBack(p, g1, "s1", 1)
		e.expectStatus("s1 shrunk to 1", e.status(p), status{false, 6, 4, 69 * time.Second, 69 * time.Second})
		e.giveBack(p, g2, "s2", 0)
		// s1's unit is stamped at its return, T0+1s, before its end.
		e.expectStatus("s2 gone", e.status(p), status{false, 3, 7, time.Minute, time.Minute})
		e.at(time.Minute)
		e.expectStatus("the requests left, s1's unit counts", e.status(p), status{false, 1, 9, time.Second, time.Second})
		e.at(time.Minute + time.Second)
		e.expectStatus("s1's unit left", e.status(p), status{true, 10, 0, 0, time.Minute})
	}},
	{"GrantIsCappedByRoomAndZeroWhenDenied", func(e *env) {
		for _, alg := range []sluice.Algorithm{sluice.Log, sluice.GCRA, sluice.SlidingCounter} {
			p := budgetPolicy("bcap-"+alg.String(), alg, 10, time.Minute, 10*time.Second)
			life := 10 * time.Second
			if g := e.lease(p, 2, 100, "s1"); g.Granted != 8 || g.Result.Remaining != 0 || g.Life != life {
				e.t.Errorf("%v: a slice of 100 asked with 2 of 10 used: got %+v, want 8 granted, 0 remaining", alg, g)
			}
			req := &store.Request{Policy: p.Name, Checks: []store.Check{e.checkOf(p, nil, 1)}}
			b := &store.BudgetRequest{Asks: []store.SliceAsk{{Check: 0, Want: 5, ID: "s2"}}}
			e.budget(req, b)
			if req.Results[0].Fits || b.Grants[0].Granted != 0 {
				e.t.Errorf("%v: a request of a full window: got fits %v, granted %d; want a denial and nothing granted", alg, req.Results[0].Fits, b.Grants[0].Granted)
			}
		}
	}},
	{"GCRAHeldTokensCountAgainstTheBurst", func(e *env) {
		// 10 a minute: one unit every 6s, a burst of 10.
		p := budgetPolicy("bgcra", sluice.GCRA, 10, time.Minute, 15*time.Second)
		g := e.lease(p, 1, 6, "s1")
		e.expectGrant("a slice of 6", g, 6, 15*time.Second, 7, 3)
		// While the slice is held its tokens do not refill: at T0+12s the
		// request's unit has refilled (6s) and only that.
		e.at(12 * time.Second)
		e.expectStatus("held", e.status(p), status{false, 6, 4, 36 * time.Second, 36 * time.Second})
		// At its end (T0+15s) the hold settles as 6 units taken then.
		e.at(15*time.Second - time.Microsecond)
		e.expectStatus("1µs before the end", e.status(p), status{false, 6, 4, 36 * time.Second, 36 * time.Second})
		e.at(15 * time.Second)
		e.expectStatus("settled at the end", e.status(p), status{false, 6, 4, 36 * time.Second, 36 * time.Second})
		e.at(15*time.Second + 6*time.Second)
		e.expectStatus("one more refilled", e.status(p), status{false, 5, 5, 30 * time.Second, 30 * time.Second})
	}},
	{"GCRAReturnGivesBackTheUnused", func(e *env) {
		p := budgetPolicy("bgcrar", sluice.GCRA, 10, time.Minute, 15*time.Second)
		g := e.lease(p, 1, 6, "s1")
		e.at(6 * time.Second)
		// Held: the request's unit refilled, the slice's 6 not.
		e.expectStatus("held", e.status(p), status{false, 6, 4, 36 * time.Second, 36 * time.Second})
		e.giveBack(p, g, "s1", 2)
		// The 4 unused are back; the 2 used count from now.
		e.expectStatus("returned", e.status(p), status{false, 2, 8, 12 * time.Second, 12 * time.Second})
		e.giveBack(p, g, "s1", 2)
		e.expectStatus("a second return changes nothing", e.status(p), status{false, 2, 8, 12 * time.Second, 12 * time.Second})
	}},
	{"CounterSliceNeverOutlivesItsBucket", func(e *env) {
		p := budgetPolicy("bctr", sluice.SlidingCounter, 10, time.Minute, 15*time.Second)
		// T0 is a multiple of the minute: the bucket ends at T0+1m.
		e.at(50 * time.Second)
		g := e.lease(p, 1, 4, "s1")
		e.expectGrant("a slice cut at the bucket's end", g, 4, 10*time.Second, 5, 5)
		e.at(time.Minute + 30*time.Second)
		// The previous bucket's 5 weigh half.
		e.counts("in the next bucket", p, 2, 8)
		e.giveBack(p, g, "s1", 1)
		e.counts("3 back from the previous bucket", p, 1, 9)
		e.at(2*time.Minute + time.Second)
		g2 := e.lease(p, 1, 2, "s2")
		e.expectGrant("a slice of a fresh bucket", g2, 2, 15*time.Second, 3, 7)
		e.at(4*time.Minute + 30*time.Second)
		e.perRequest(p, 5)
		e.giveBack(p, g2, "s2", 0)
		e.counts("a return after the previous bucket changes nothing", p, 5, 5)
	}},
	{"DeadHolderCountsAsSpentAtItsEnd", func(e *env) {
		// A slice never returned counts exactly as its size recorded at
		// its end (log, GCRA), or at its grant in its bucket (counter): it
		// is free again as such an event would be.
		for i, alg := range []sluice.Algorithm{sluice.Log, sluice.GCRA, sluice.SlidingCounter} {
			base := time.Duration(i) * 5 * time.Minute
			p := budgetPolicy("bdead-"+alg.String(), alg, 10, time.Minute, 10*time.Second)
			ref := budgetPolicy("bdeadref-"+alg.String(), alg, 10, time.Minute, 10*time.Second)
			e.at(base + time.Second)
			g := e.lease(p, 1, 5, "s1")
			e.record(ref, nil, 1)
			if alg == sluice.SlidingCounter {
				e.record(ref, nil, 5)
			}
			end := time.Duration(g.End-T0.UnixMicro()) * time.Microsecond
			e.at(end)
			if alg != sluice.SlidingCounter {
				e.record(ref, nil, 5)
			}
			for _, t := range []time.Duration{end, end + 6*time.Second, base + time.Minute + time.Second, end + time.Minute - time.Microsecond, end + time.Minute, base + 2*time.Minute} {
				e.at(t)
				e.expectStatus(alg.String()+": the dead holder's window as the reference", e.status(p), e.status(ref))
			}
		}
	}},
	{"DroppedLimiterSliceIsFreeAsAnEventAtItsEnd", func(e *env) {
		// A process leases a slice of 5 with a request of 5 and dies
		// without Close: its slice counts as 5 events at its end (T0+10s)
		// and is free again exactly when they leave the window.
		p := budgetPolicy("bdrop", sluice.Log, 10, time.Minute, 10*time.Second)
		dead := e.process()
		if d := e.decide(dead, p, nil, 5); !d.Allowed || d.Local {
			e.t.Fatalf("the first request: %+v, want admitted by the store", d)
		}
		if st := dead.BudgetStats(); st.SlicesLeased != 1 || st.UnitsLeased != 5 {
			e.t.Fatalf("stats %+v, want one slice of 5", st)
		}
		e.at(time.Second)
		e.expect("full", e.perRequest(p, 1), denied("global", 0, 59*time.Second))
		e.at(time.Minute)
		e.expect("the request left, not the slice", e.perRequest(p, 6), denied("global", 5, 10*time.Second))
		e.expect("the rest", e.perRequest(p, 5), allowed(0))
		e.at(70*time.Second - time.Microsecond)
		e.expect("1µs before the slice leaves", e.perRequest(p, 1), denied("global", 0, time.Microsecond))
		e.at(70 * time.Second)
		e.expect("the slice left", e.perRequest(p, 5), allowed(0))
	}},
	{"OneProcessAnswersLocally", func(e *env) {
		p := budgetPolicy("blocal", sluice.Log, 1000, time.Minute, 10*time.Second)
		lim := e.process()
		var local, admitted int
		for i := range 200 {
			e.at(time.Duration(i) * 10 * time.Millisecond)
			d := e.decide(lim, p, nil, 1)
			if !d.Allowed {
				e.t.Fatalf("request %d denied with %d of 1000 admitted: %+v", i, admitted, d)
			}
			admitted++
			if d.Local {
				local++
				if d.Remaining+int64(admitted) > 1000 {
					e.t.Fatalf("a local decision's Remaining %d with %d admitted is more than the store would grant", d.Remaining, admitted)
				}
			}
		}
		st := lim.BudgetStats()
		if local < 150 || st.Local != int64(local) || st.Store != int64(200-local) || st.SlicesLeased == 0 {
			e.t.Errorf("200 requests: %d answered locally, stats %+v; want most local and the stats to agree", local, st)
		}
		if err := lim.Close(); err != nil {
			e.t.Fatal(err)
		}
		// Each store call admitted its own request; every leased unit was
		// admitted locally or given back, and the window counts exactly
		// what was admitted.
		st = lim.BudgetStats()
		if got := e.status(p); got.Used != int64(admitted) || st.UnitsLeased-st.UnitsReturned != int64(local) || st.UnitsStranded != 0 {
			e.t.Errorf("after Close: the store counts %d, %d admitted, %d locally; stats %+v", got.Used, admitted, local, st)
		}
		if d := e.decide(lim, p, nil, 1); d.Local || !d.Allowed {
			e.t.Errorf("after Close a request is decided by the store: %+v", d)
		}
	}},
	{"HierarchyStaysAllOrNothing", func(e *env) {
		// The notifier's policy: a global cap, budgeted, over a cap per
		// category decided per request.
		p := &sluice.Policy{Name: "bnotify", Rules: []sluice.Rule{
			{Name: "global", Limit: 100, Window: time.Minute, Budget: 5 * time.Second},
			{Name: "category", Limit: 10, Window: time.Minute, By: []string{"cat"}},
		}}
		procs := []*sluice.Limiter{e.process(), e.process(), e.process()}
		rng := rand.New(rand.NewPCG(7, 7))
		var events []budgetEvent
		perCat := map[string]int64{}
		for i := range 600 {
			e.at(time.Duration(i) * 20 * time.Millisecond)
			cat := "c" + strconv.Itoa(rng.IntN(12))
			d := e.decide(procs[rng.IntN(len(procs))], p, map[string]string{"cat": cat}, 1)
			if d.Allowed {
				events = append(events, budgetEvent{e.clock.Now().UnixMicro(), 1})
				perCat[cat]++
			} else if d.DeniedBy == "global" && d.RetryAfter <= 0 {
				e.t.Fatalf("a denial by the global cap without a wait: %+v", d)
			}
		}
		for cat, n := range perCat {
			if n > 10 {
				e.t.Errorf("category %s admitted %d, limit 10", cat, n)
			}
		}
		if at, n := maxInWindow(events, time.Minute.Microseconds()); n > 100 {
			e.t.Errorf("%d admitted in the minute ending at %d, limit 100", n, at)
		}
		// 12 categories of 10: at most 100 fit the global cap, and the
		// slices must not strand the last units for ever: every process
		// is closed and the store counts exactly what was admitted, denials
		// elsewhere having given their units back.
		var stranded int64
		for _, lim := range procs {
			if err := lim.Close(); err != nil {
				e.t.Fatal(err)
			}
			stranded += lim.BudgetStats().UnitsStranded
		}
		c := e.checkOf(p, map[string]string{"cat": "none"}, 1)
		c.Cost = c.Limit
		d, err := e.lim.Decide(e.ctx, &store.Request{Policy: p.Name, DryRun: true, Checks: []store.Check{c}})
		if err != nil {
			e.t.Fatal(err)
		}
		if d.Allowed || d.Limits()[0].Used != int64(len(events))+stranded {
			e.t.Errorf("after Close the global window counts %d: %d admitted, %d stranded", d.Limits()[0].Used, len(events), stranded)
		}
		if len(events) < 80 {
			e.t.Errorf("%d admitted of a global cap of 100 under 12 categories of 10 (%d stranded)", len(events), stranded)
		}
	}},
	{"LateHolderStaysWithinTheLimit", func(e *env) {
		// A holder spends its whole slice at the last µs of its life while
		// another process takes all the store gives at that instant and
		// at the instants where a slice kept wrongly would free room: as
		// it leaves the window stamped at its start (log), after the refill
		// its held tokens would have taken (GCRA), late in the next
		// bucket (counter).
		for i, alg := range []sluice.Algorithm{sluice.Log, sluice.GCRA, sluice.SlidingCounter} {
			base := time.Duration(i) * 10 * time.Minute
			p := budgetPolicy("blate-"+alg.String(), alg, 10, time.Minute, 15*time.Second)
			other := e.process()
			e.at(base + 50*time.Second)
			g := e.lease(p, 1, 5, "s1")
			start := e.clock.Now().UnixMicro()
			events := []budgetEvent{{start, 1}}
			last := start + g.Life.Microseconds() - 1
			drain := func(at int64) {
				e.clock.Set(time.UnixMicro(at))
				for range 30 {
					if !e.decide(other, p, nil, 1).Allowed {
						return
					}
					events = append(events, budgetEvent{at, 1})
				}
			}
			events = append(events, budgetEvent{last, g.Granted})
			for _, at := range []int64{last, start + time.Minute.Microseconds(), base.Microseconds() + T0.UnixMicro() + 119*time.Second.Microseconds(), last + time.Minute.Microseconds() - 1} {
				drain(at)
			}
			slices.SortStableFunc(events, func(a, b budgetEvent) int { return int(a.at - b.at) })
			if msg := overAdmitted(alg, events, 10, 10, time.Minute); msg != "" {
				e.t.Errorf("%v: %s", alg, msg)
			}
		}
	}},
	{"SteadyDemandAboveTheLimitIsAdmittedNearly", func(e *env) {
		// Four processes whose demand is six times the limit: the
		// windows after the first admit at least 95% of it, for every
		// algorithm (slices sized to demand, given back as the next is
		// leased; per request near the limit).
		for i, alg := range []sluice.Algorithm{sluice.Log, sluice.GCRA, sluice.SlidingCounter} {
			base := time.Duration(i) * 10 * time.Minute
			p := budgetPolicy("bsteady-"+alg.String(), alg, 1000, time.Minute, 3*time.Second)
			procs := []*sluice.Limiter{e.process(), e.process(), e.process(), e.process()}
			rng := rand.New(rand.NewPCG(uint64(i), 11))
			perMinute := map[int64]int64{}
			for step := range 18000 {
				e.at(base + time.Duration(step)*10*time.Millisecond)
				if e.decide(procs[rng.IntN(len(procs))], p, nil, 1).Allowed {
					perMinute[int64(step)/6000]++
				}
			}
			for m := int64(1); m < 3; m++ {
				if n := perMinute[m]; n < 950 || n > 1000 && alg == sluice.Log {
					e.t.Errorf("%v: %d admitted in minute %d of a limit of 1000 a minute", alg, n, m)
				}
			}
			for _, lim := range procs {
				_ = lim.Close()
			}
		}
	}},
	{"ProcessesNeverOverAdmit", func(e *env) {
		for _, seed := range propertySeeds(e.t) {
			if !runBudgetProperty(e, seed) {
				e.t.Fatalf("seed %d failed; replay it alone with %s=%d", seed, propertySeedEnv, seed)
			}
		}
	}},
}

// process returns a new Limiter on the case's store and clock, standing for
// one process.
func (e *env) process() *sluice.Limiter {
	cfg := e.cfg
	cfg.Clock = e.clock
	return sluice.NewLimiter(e.target.Store, cfg)
}

// decide decides cost units of p with lim and fails on error.
func (e *env) decide(lim *sluice.Limiter, p *sluice.Policy, attrs map[string]string, cost int64) sluice.Decision {
	e.t.Helper()
	d, err := lim.AllowN(e.ctx, p, attrs, cost)
	if err != nil {
		e.t.Fatalf("AllowN(%s, %v, %d) at T0+%v: %v", p.Name, attrs, cost, e.elapsed(), err)
	}
	return d
}

// budgetEvent is an admitted request: its time in µs and its cost.
type budgetEvent struct{ at, cost int64 }

// maxInWindow returns the most cost of events (in time order) in any
// window (t-window, t], and a t where it is reached.
func maxInWindow(events []budgetEvent, window int64) (at, most int64) {
	var sum int64
	j := 0
	for i := range events {
		sum += events[i].cost
		for events[j].at <= events[i].at-window {
			sum -= events[j].cost
			j++
		}
		if sum > most {
			at, most = events[i].at, sum
		}
	}
	return at, most
}

// runBudgetProperty drives K Limiters on one store through a random
// interleaving of requests of one budgeted rule per algorithm and checks
// what they admitted, counted independently, against the rule: never more
// than Limit in any window (log), conforming to (rate, burst) (GCRA), and,
// at every admission, the sliding counter's estimate of the admitted
// events within Limit (a slice that outlived its bucket would admit
// events its bucket does not count). It reports whether all held.
func runBudgetProperty(e *env, seed uint64) bool {
	rng := rand.New(rand.NewPCG(seed, seed^0xb0d9e7))
	window := time.Minute
	ok := true
	for _, alg := range []sluice.Algorithm{sluice.Log, sluice.GCRA, sluice.SlidingCounter} {
		limit := 20 + rng.Int64N(200)
		budget := time.Duration(1+rng.Int64N(15)) * time.Second
		p := budgetPolicy(fmt.Sprintf("bprop-%d-%v", seed, alg), alg, limit, window, budget)
		if alg == sluice.GCRA {
			p.Rules[0].Burst = 1 + rng.Int64N(limit)
			budget = min(budget, sluice.MaxBudget(alg, limit, p.Rules[0].Burst, window))
			p.Rules[0].Budget = max(budget, sluice.MinBudget)
		}
		top := limit // the most a request may cost
		if alg == sluice.GCRA {
			top = p.Rules[0].Burst
		}
		k := 2 + rng.IntN(4)
		procs := make([]*sluice.Limiter, k)
		for i := range procs {
			procs[i] = e.process()
		}
		var events []budgetEvent
		start := e.clock.Now()
		for range 1500 {
			// Bursts of requests at one instant, and gaps from 1µs to
			// beyond a budget.
			switch r := rng.IntN(10); {
			case r < 5:
			case r < 9:
				e.clock.Advance(time.Duration(1+rng.Int64N(400_000)) * time.Microsecond)
			default:
				e.clock.Advance(time.Duration(1+rng.Int64N(20)) * time.Second)
			}
			// Process 0 takes most requests, the others few: their slices
			// are spent late, across refills and buckets.
			i := 0
			if rng.IntN(4) == 0 {
				i = rng.IntN(k)
			}
			if rng.IntN(200) == 0 {
				// A process dies (dropped without Close) and another starts.
				procs[i] = e.process()
			}
			cost := 1 + rng.Int64N(min(3, top))
			d := e.decide(procs[i], p, nil, cost)
			if d.Allowed {
				events = append(events, budgetEvent{e.clock.Now().UnixMicro(), cost})
			}
		}
		what := fmt.Sprintf("seed %d %v limit %d burst %d budget %v, %d processes from %v", seed, alg, limit, p.Rules[0].Burst, p.Rules[0].Budget, k, start.Sub(T0))
		if len(events) == 0 {
			e.t.Errorf("%s: nothing admitted", what)
			ok = false
		}
		if msg := overAdmitted(alg, events, limit, p.Rules[0].Burst, window); msg != "" {
			e.t.Errorf("%s: %s", what, msg)
			ok = false
		}
		slices.Reverse(procs) // close in another order than made
		for _, lim := range procs {
			if err := lim.Close(); err != nil {
				e.t.Errorf("%s: Close: %v", what, err)
				ok = false
			}
		}
	}
	return ok
}

// overAdmitted checks admitted events, in time order, against a rule of
// alg with limit, burst (GCRA) and window, counted independently of any
// store, and describes the first excess, or returns "": more than limit
// in a window (log); not conforming to (rate, burst) (GCRA); the sliding
// counter's estimate of the events above limit at an admission.
func overAdmitted(alg sluice.Algorithm, events []budgetEvent, limit, burst int64, window time.Duration) string {
	win := window.Microseconds()
	switch alg {
	case sluice.Log:
		if at, n := maxInWindow(events, win); n > limit {
			return fmt.Sprintf("%d admitted in the window ending at T0+%v", n, time.UnixMicro(at).Sub(T0))
		}
	case sluice.GCRA:
		iv := (win + limit - 1) / limit
		var tat int64
		for _, ev := range events {
			tat = max(tat, ev.at) + ev.cost*iv
			if tat-ev.at > burst*iv {
				return fmt.Sprintf("admitting %d at T0+%v goes beyond the burst %d", ev.cost, time.UnixMicro(ev.at).Sub(T0), burst)
			}
		}
	case sluice.SlidingCounter:
		buckets := map[int64]int64{}
		for _, ev := range events {
			b := ev.at / win
			buckets[b] += ev.cost
			elapsed := ev.at - b*win
			if est := buckets[b] + int64(float64(buckets[b-1])*float64(win-elapsed)/float64(win)); est > limit {
				return fmt.Sprintf("admitting %d at T0+%v makes the estimate %d", ev.cost, time.UnixMicro(ev.at).Sub(T0), est)
			}
		}
	}
	return ""
}
