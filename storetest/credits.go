package storetest

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sluicerate/sluice/store"
)

// Credits cases: store.Credits checks, balances drawn by cost, refilled
// per calendar period and changed by store.Crediter, decided by the store
// directly, on stores that keep balances (store.Crediter); the others skip
// them.

// credited wraps a credits case: it skips stores that keep no balances.
func credited(run func(e *env)) func(e *env) {
	return func(e *env) {
		if _, ok := e.target.Store.(store.Crediter); !ok {
			e.t.Skipf("store %T keeps no credit balances (store.Crediter)", e.target.Store)
		}
		run(e)
	}
}

// balance is a Credits check of rule with key value: a balance starting
// at limit, refilled by refill each period of cal, of cost 1.
func balance(rule, value string, limit int64, cal store.Calendar, refill store.Refill) store.Check {
	return store.Check{Rule: rule, Values: []string{value}, Limit: limit, Window: time.Second,
		Algorithm: store.Credits, Calendar: cal, Refill: refill, Cost: 1}
}

// has is the result of a Credits check that fits, leaving bal of limit.
func has(limit, bal int64) store.Result {
	return store.Result{Fits: true, Used: max(0, limit-bal), Remaining: bal}
}

// short is the result of a Credits check denied for its balance bal.
func short(limit, bal int64, retry time.Duration) store.Result {
	return store.Result{Cause: store.CauseCredits, Used: max(0, limit-bal), Remaining: bal, RetryAfter: retry}
}

// credit sends the store a credit request of op and amount with id on
// the balance of c, and checks the balance it reports and whether it was
// applied.
func (e *env) credit(what, policy string, c store.Check, op store.CreditOp, amount int64, id string, bal int64, applied bool) store.CreditRequest {
	e.t.Helper()
	req := store.CreditRequest{Policy: policy, Check: c, Op: op, Amount: amount, ID: id}
	if err := e.target.Store.(store.Crediter).Credit(e.ctx, &req); err != nil {
		e.t.Fatalf("%s at %v: Credit: %v", what, e.clock.Now(), err)
	}
	if req.Balance != bal || req.Applied != applied {
		e.t.Errorf("%s at %v: balance %d applied %v, want %d, %v", what, e.clock.Now(), req.Balance, req.Applied, bal, applied)
	}
	return req
}

// get reads the balance of c and checks it.
func (e *env) get(what, policy string, c store.Check, bal int64) store.CreditRequest {
	e.t.Helper()
	return e.credit(what, policy, c, store.CreditGet, 0, "", bal, false)
}

var creditCases = []testCase{
	{"CreditsDraw", credited(func(e *env) {
		// A balance of 10, never refilled: drawn by cost, a request it
		// cannot pay for denied with CauseCredits and nothing drawn; a
		// decision never takes it below 0 (ModeRecord draws what is left).
		c := balance("credits", "draw", 10, store.Calendar{}, store.Refill{})
		e.clock.Set(time.Date(2027, 1, 5, 9, 0, 0, 0, time.UTC))
		if r := e.get("untouched", "cr", c, 10); r.NextRefill != 0 {
			e.t.Errorf("untouched: next refill %v, want 0 without a refill", r.NextRefill)
		}
		e.allowChecks("4", "cr", checks(costing(c, 4)), true, has(10, 6))
		e.allowChecks("4 more", "cr", checks(costing(c, 4)), true, has(10, 2))
		e.allowChecks("3 of 2", "cr", checks(costing(c, 3)), false, short(10, 2, store.MaxRetry))
		before := e.state("cr", checks(c))
		e.decideChecks("peek 2", "cr", store.ModeAllow, true, checks(costing(c, 2)), true, has(10, 0))
		e.unchanged("after the peek", "cr", checks(c), before)
		e.allowChecks("2", "cr", checks(costing(c, 2)), true, has(10, 0))
		e.allowChecks("1 of 0", "cr", checks(c), false, short(10, 0, store.MaxRetry))
		e.get("empty", "cr", c, 0)
		e.decideChecks("record 3 of 0", "cr", store.ModeRecord, false, checks(costing(c, 3)), false, short(10, 0, store.MaxRetry))
		e.get("after recording on 0", "cr", c, 0)

		d := balance("credits", "record", 2, store.Calendar{}, store.Refill{})
		e.decideChecks("record 3 of 2", "cr", store.ModeRecord, false, checks(costing(d, 3)), false, short(2, 0, store.MaxRetry))
		e.get("after recording 3 of 2", "cr", d, 0)
	})},

	{"CreditsRefill", credited(func(e *env) {
		// Refill To: the balance is set to To at the first use in a new
		// period, once however many periods passed, even down from more.
		berlin := e.zone("Europe/Berlin")
		month := store.Calendar{Period: store.Month, Location: berlin}
		to := balance("credits", "to", 10, month, store.Refill{To: 10})
		e.clock.Set(time.Date(2027, 3, 20, 12, 0, 0, 0, berlin))
		april := time.Date(2027, 4, 1, 0, 0, 0, 0, berlin)
		if r := e.get("untouched", "cr", to, 10); r.NextRefill != april.Sub(e.clock.Now()) {
			e.t.Errorf("untouched: next refill %v, want %v", r.NextRefill, april.Sub(e.clock.Now()))
		}
		e.allowChecks("10", "cr", checks(costing(to, 10)), true, has(10, 0))
		left := april.Sub(e.clock.Now())
		e.allowChecks("1 of 0", "cr", checks(to), false, short(10, 0, left))
		e.clock.Set(april.Add(-time.Microsecond))
		e.allowChecks("1µs before April", "cr", checks(to), false, short(10, 0, time.Microsecond))
		e.clock.Set(april)
		e.allowChecks("in April", "cr", checks(costing(to, 4)), true, has(10, 6))
		e.clock.Set(time.Date(2027, 7, 15, 0, 0, 0, 0, berlin)) // three months idle
		e.get("in July", "cr", to, 10)
		e.credit("add 50", "cr", to, store.CreditAdd, 50, "", 60, true)
		e.clock.Set(time.Date(2027, 8, 1, 0, 0, 0, 0, berlin))
		e.get("in August", "cr", to, 10)
		// A cost above To: no refill brings it.
		e.allowChecks("11 of 10", "cr", checks(costing(to, 11)), false, short(10, 10, store.MaxRetry))

		// Refill Add: Add per period that began, for a rollover plan; a
		// denial waits for the refill that brings the balance to the cost.
		day := store.Calendar{Period: store.Day}
		add := balance("credits", "add", 5, day, store.Refill{Add: 5})
		e.clock.Set(time.Date(2027, 1, 10, 12, 0, 0, 0, time.UTC))
		e.get("first day: no refill", "cr", add, 5)
		e.allowChecks("5", "cr", checks(costing(add, 5)), true, has(5, 0))
		e.allowChecks("12 of 0", "cr", checks(costing(add, 12)), false, short(5, 0, 60*time.Hour))
		e.clock.Set(time.Date(2027, 1, 13, 0, 0, 0, 0, time.UTC).Add(-time.Microsecond))
		e.allowChecks("12 of 10", "cr", checks(costing(add, 12)), false, short(5, 10, time.Microsecond))
		e.clock.Set(time.Date(2027, 1, 13, 0, 0, 0, 0, time.UTC))
		e.allowChecks("12 of 15", "cr", checks(costing(add, 12)), true, has(5, 3))
		e.clock.Set(time.Date(2027, 1, 20, 6, 0, 0, 0, time.UTC)) // seven days idle
		e.get("a week later", "cr", add, 3+7*5)
	})},

	{"CreditsTopUp", credited(func(e *env) {
		// Changes by Crediter: an add or a set with an id is applied once
		// (while the store remembers the id); without an id, every time; an
		// add may take the balance below 0, which denies every request.
		c := balance("credits", "topup", 0, store.Calendar{}, store.Refill{})
		t0 := time.Date(2027, 2, 1, 10, 0, 0, 0, time.UTC)
		e.clock.Set(t0)
		e.allowChecks("1 of 0", "cr", checks(c), false, short(0, 0, store.MaxRetry))
		e.credit("add 100", "cr", c, store.CreditAdd, 100, "order-1", 100, true)
		e.credit("add 100 again", "cr", c, store.CreditAdd, 100, "order-1", 100, false)
		e.credit("add 50", "cr", c, store.CreditAdd, 50, "", 150, true)
		e.credit("add 50 again, no id", "cr", c, store.CreditAdd, 50, "", 200, true)
		e.allowChecks("30", "cr", checks(costing(c, 30)), true, has(0, 170))
		e.credit("set 20", "cr", c, store.CreditSet, 20, "reset-1", 20, true)
		e.credit("set 999, same id", "cr", c, store.CreditSet, 999, "reset-1", 20, false)
		e.credit("take 25", "cr", c, store.CreditAdd, -25, "refund-1", -5, true)
		e.allowChecks("1 of -5", "cr", checks(c), false, short(0, -5, store.MaxRetry))
		e.get("get", "cr", c, -5)

		// Bad input changes nothing.
		cr := e.target.Store.(store.Crediter)
		notCredits := c
		notCredits.Algorithm = store.Log
		for _, bad := range []store.CreditRequest{
			{Policy: "cr", Check: c, Op: store.CreditAdd, Amount: 0},
			{Policy: "cr", Check: c, Op: store.CreditAdd, Amount: store.MaxCost + 1},
			{Policy: "cr", Check: c, Op: store.CreditSet, Amount: -store.MaxCost - 1},
			{Policy: "cr", Check: c, Op: store.CreditAdd, Amount: 1, ID: strings.Repeat("x", store.MaxCreditID+1)},
			{Policy: "cr", Check: c, Op: store.CreditOp(9), Amount: 1},
			{Policy: "cr", Check: notCredits, Op: store.CreditAdd, Amount: 1},
		} {
			if err := cr.Credit(e.ctx, &bad); err == nil {
				e.t.Errorf("Credit(op %d, amount %d, id of %d bytes, %v): no error", bad.Op, bad.Amount, len(bad.ID), bad.Check.Algorithm)
			}
		}
		e.get("after bad input", "cr", c, -5)

		// Saturation at ±MaxCost.
		e.credit("set max", "cr", c, store.CreditSet, store.MaxCost, "", store.MaxCost, true)
		e.credit("add max", "cr", c, store.CreditAdd, store.MaxCost, "", store.MaxCost, true)
		e.credit("set -max", "cr", c, store.CreditSet, -store.MaxCost, "", -store.MaxCost, true)
		e.credit("take 1", "cr", c, store.CreditAdd, -1, "", -store.MaxCost, true)

		// An id is remembered for CreditIDTTL after its change.
		e.credit("set 0", "cr", c, store.CreditSet, 0, "", 0, true)
		e.clock.Set(t0.Add(store.CreditIDTTL - time.Microsecond))
		e.credit("order-1 before its TTL", "cr", c, store.CreditAdd, 100, "order-1", 0, false)
		e.clock.Set(t0.Add(store.CreditIDTTL))
		e.credit("order-1 at its TTL", "cr", c, store.CreditAdd, 100, "order-1", 100, true)

		// And among the newest MaxCreditIDs (one a µs: the newest are
		// the latest).
		d := balance("credits", "ids", 0, store.Calendar{}, store.Refill{})
		for i := range store.MaxCreditIDs + 1 {
			e.clock.Advance(time.Microsecond)
			e.credit("many ids", "cr", d, store.CreditAdd, 1, fmt.Sprint("id-", i), int64(i+1), true)
		}
		e.clock.Advance(time.Microsecond)
		e.credit("id-1, remembered", "cr", d, store.CreditAdd, 1, "id-1", store.MaxCreditIDs+1, false)
		e.credit("id-0, forgotten", "cr", d, store.CreditAdd, 1, "id-0", store.MaxCreditIDs+2, true)
		e.credit(fmt.Sprint("id-", store.MaxCreditIDs), "cr", d, store.CreditAdd, 1, fmt.Sprint("id-", store.MaxCreditIDs), store.MaxCreditIDs+2, false)
	})},

	{"CreditsCover", credited(calendared(func(e *env) {
		// A monthly quota of 3, then credits: the balance is not drawn
		// while the quota has room; it pays for the overage, the quota
		// counting past its limit; with neither, the request is denied by
		// both, credits with CauseCredits, and retries at the quota's
		// next period (the sooner of the two).
		q := quota("month", "cover", 3, store.Calendar{Period: store.Month}, 0)
		c := balance("credits", "cover", 2, store.Calendar{}, store.Refill{})
		c.Covers = 1
		cs := checks(q, c)
		e.clock.Set(time.Date(2027, 10, 5, 0, 0, 0, 0, time.UTC))
		left := time.Date(2027, 11, 1, 0, 0, 0, 0, time.UTC).Sub(e.clock.Now())
		for i := range int64(3) {
			e.allowChecks(fmt.Sprintf("#%d", i+1), "cover", cs, true, fits(3, i+1, left), has(2, 2))
		}
		over := func(used int64) store.Result {
			return store.Result{Cause: store.CauseLimit, Used: used, ResetAfter: left}
		}
		e.decideChecks("peek #4", "cover", store.ModeAllow, true, cs, true, over(4), has(2, 1))
		e.allowChecks("#4", "cover", cs, true, over(4), has(2, 1))
		e.allowChecks("#5", "cover", cs, true, over(5), has(2, 0))
		before := e.state("cover", cs)
		e.allowChecks("#6", "cover", cs, false, full(3, 5, left, left), short(2, 0, left))
		e.unchanged("after #6", "cover", cs, before)
		e.credit("add 1", "cover", c, store.CreditAdd, 1, "", 1, true)
		e.allowChecks("2 of 1", "cover", checks(costing(q, 2), costing(c, 2)), false, full(3, 5, left, left), short(2, 1, left))
		e.allowChecks("#7", "cover", cs, true, over(6), has(2, 0))
		// November: the quota again, the balance untouched.
		e.clock.Set(time.Date(2027, 11, 1, 0, 0, 0, 0, time.UTC))
		e.allowChecks("November", "cover", cs, true, fits(3, 1, 30*24*time.Hour), has(2, 0))
		e.get("November", "cover", c, 0)
	}))},

	{"CreditsWithRateRules", credited(func(e *env) {
		// Credits decided with a rate rule (the log, then GCRA), all or
		// nothing: a request denied by the rate rule draws nothing, one
		// denied by the credits records nothing in the rate window; a
		// dry run changes nothing; Shadow credits do not deny, and are
		// drawn to 0 at most; ModeRecord records in both.
		for _, alg := range []store.Algorithm{store.Log, store.GCRA} {
			rate := store.Check{Rule: "rate", Values: []string{alg.String()}, Limit: 2, Window: time.Second, Algorithm: alg, Cost: 1}
			if alg == store.GCRA {
				rate.Burst = 2
			}
			c := balance("credits", alg.String(), 5, store.Calendar{}, store.Refill{})
			cs := checks(rate, c)
			e.clock.Set(time.Date(2027, 5, 10, 12, 0, 0, 0, time.UTC))
			for i := range int64(2) {
				got := e.allowChecks(fmt.Sprintf("%v #%d", alg, i+1), "crmix", cs, true)
				if got[1] != has(5, 4-i) {
					e.t.Errorf("%v #%d: credits %+v, want %+v", alg, i+1, got[1], has(5, 4-i))
				}
			}
			before := e.state("crmix", cs)
			got := e.allowChecks(fmt.Sprintf("%v #3", alg), "crmix", cs, false)
			if got[0].Fits || got[1] != has(5, 3) {
				e.t.Errorf("%v #3: %+v, want the rate rule denying, the credits fitting with 3", alg, got)
			}
			e.unchanged(fmt.Sprintf("%v, denied by the rate rule", alg), "crmix", cs, before)

			e.clock.Advance(time.Second)
			four := checks(rate, costing(c, 4))
			before = e.state("crmix", cs)
			got = e.allowChecks(fmt.Sprintf("%v, 4 of 3", alg), "crmix", four, false)
			if !got[0].Fits || got[1] != short(5, 3, store.MaxRetry) {
				e.t.Errorf("%v, 4 of 3: %+v, want the rate rule fitting, the credits short", alg, got)
			}
			e.unchanged(fmt.Sprintf("%v, denied by the credits", alg), "crmix", cs, before)
			e.decideChecks(fmt.Sprintf("%v, dry run", alg), "crmix", store.ModeAllow, true, checks(rate, costing(c, 3)), true)
			e.unchanged(fmt.Sprintf("%v, after a dry run", alg), "crmix", cs, before)

			got = e.allowChecks(fmt.Sprintf("%v, shadow credits", alg), "crmix", checks(rate, shadowed(costing(c, 4))), true)
			if r := got[1]; r.Fits || r.Cause != store.CauseCredits || r.Used != 5 || r.Remaining != 0 {
				e.t.Errorf("%v, shadow credits: %+v, want short, drawn to 0", alg, got[1])
			}
			e.decideChecks(fmt.Sprintf("%v, record", alg), "crmix", store.ModeRecord, false, cs, false)
			if r := e.decideRaw("rate after the record", "crmix", store.ModeAllow, true, checks(rate)); r[0].Fits {
				e.t.Errorf("%v: the rate rule after the record: %+v, want full", alg, r[0])
			}
			e.get(fmt.Sprintf("%v, after the record", alg), "crmix", c, 0)
		}
	})},
}

var quotaCases = []testCase{
	{"QuotaBadInput", credited(calendared(func(e *env) {
		// Calendar and credits checks a store cannot decide are refused
		// with an error, and change nothing.
		month := store.Calendar{Period: store.Month}
		q := quota("month", "bad", 5, month, 0)
		c := balance("credits", "bad", 5, month, store.Refill{To: 5})
		rate := store.Check{Rule: "rate", Values: []string{"bad"}, Limit: 5, Window: time.Minute, Cost: 1}
		e.clock.Set(time.Date(2027, 2, 3, 0, 0, 0, 0, time.UTC))
		before := e.state("bad", checks(q, c, rate))
		change := func(c store.Check, f func(*store.Check)) store.Check {
			f(&c)
			return c
		}
		for _, bad := range []struct {
			what string
			cs   []store.Check
		}{
			{"a quota without a period", checks(change(q, func(c *store.Check) { c.Calendar = store.Calendar{} }))},
			{"a quota of period 9", checks(change(q, func(c *store.Check) { c.Calendar.Period = 9 }))},
			{"a negative history", checks(change(q, func(c *store.Check) { c.History = -1 }))},
			{"a budgeted quota", checks(change(q, func(c *store.Check) { c.Budget = time.Second }))},
			{"budgeted credits", checks(change(c, func(c *store.Check) { c.Budget = time.Second }))},
			{"a refill both to and add", checks(change(c, func(c *store.Check) { c.Refill.Add = 1 }))},
			{"a negative refill", checks(change(c, func(c *store.Check) { c.Refill = store.Refill{Add: -1} }))},
			{"a refill without a period", checks(change(c, func(c *store.Check) { c.Calendar = store.Calendar{} }))},
			{"covers past the checks", checks(q, change(c, func(c *store.Check) { c.Covers = 4 }))},
			{"covers itself", checks(q, change(c, func(c *store.Check) { c.Covers = 2 }))},
			{"covers a rate rule", checks(q, change(c, func(c *store.Check) { c.Covers = 3 }))},
			{"a quota that covers", checks(change(q, func(c *store.Check) { c.Covers = 2 }), c)},
		} {
			for _, dry := range []bool{false, true} {
				req := store.Request{Policy: "bad", Checks: append(bad.cs, rate), DryRun: dry}
				if err := e.target.Store.Decide(e.ctx, &req); err == nil {
					e.t.Errorf("%s (dry run %v): no error", bad.what, dry)
				}
			}
		}
		e.unchanged("after bad input", "bad", checks(q, c, rate), before)
	}))},

	{"QuotaConcurrent", credited(calendared(func(e *env) {
		// Many callers at once on a quota of 40 covered by 30 credits:
		// exactly 70 are admitted, 40 in the quota and 30 paid for.
		q := quota("month", "many", 40, store.Calendar{Period: store.Month}, 0)
		c := balance("credits", "many", 30, store.Calendar{}, store.Refill{})
		c.Covers = 1
		e.clock.Set(time.Date(2027, 9, 9, 0, 0, 0, 0, time.UTC))
		var (
			wg sync.WaitGroup
			mu sync.Mutex
			n  int
		)
		for range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 4 {
					req := store.Request{Policy: "many", Checks: checks(q, c)}
					if err := e.target.Store.Decide(e.ctx, &req); err != nil {
						e.t.Error(err)
						return
					}
					if admitted(req.Checks, req.Results) {
						mu.Lock()
						n++
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		if n != 70 {
			e.t.Errorf("admitted %d of 128, want 70", n)
		}
		e.get("after", "many", c, 0)
		if s := e.state("many", checks(q)); s[0].Used != 70 {
			e.t.Errorf("the quota counts %d, want 70", s[0].Used)
		}
	}))},
}
