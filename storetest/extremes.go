package storetest

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/sluicerate/sluice"
)

// Extreme cases: amounts at and past the bound (sluice.MaxCost), limits of
// 0, 1 and 2^53, windows of 1µs and of years, many large records and
// settles summed, leases at their shortest and longest. In every answer
// Used is 0 to MaxCost and Remaining 0 to the limit (the burst, for GCRA);
// a cost above MaxCost is an error that changes nothing; a window recorded
// past MaxCost counts MaxCost; and the next decision is what the window
// holds, to the microsecond.

const maxCost = sluice.MaxCost

// years is a window of ten years.
const years = 10 * 365 * 24 * time.Hour

// extremeRules are the rules every extreme case runs on: each algorithm
// with a limit of 1, the most it takes, and windows of 1µs and of years.
var extremeRules = []sluice.Rule{
	{Name: "log-1", Limit: 1, Window: time.Minute},
	{Name: "log-max", Limit: maxCost, Window: years},
	{Name: "log-1us", Limit: 1000, Window: time.Microsecond},
	{Name: "counter-1", Limit: 1, Window: time.Minute, Algorithm: sluice.SlidingCounter},
	{Name: "counter-max", Limit: maxCost, Window: years, Algorithm: sluice.SlidingCounter},
	{Name: "counter-1us", Limit: 1000, Window: time.Microsecond, Algorithm: sluice.SlidingCounter},
	{Name: "gcra-1", Limit: 1, Window: time.Minute, Algorithm: sluice.GCRA},
	{Name: "gcra-1us", Limit: 1, Window: time.Microsecond, Algorithm: sluice.GCRA},
	{Name: "gcra-years", Limit: 1 << 40, Window: years, Algorithm: sluice.GCRA},
	// The largest bucket a GCRA rule may keep: 2^50 units, one a µs.
	{Name: "gcra-max", Limit: 1 << 50, Window: (1 << 50) * time.Microsecond, Algorithm: sluice.GCRA},
}

// fleeting reports whether r's window is shorter than a millisecond: a
// store may drop it after a millisecond of its own time whatever the
// case's clock says (Redis expires keys in whole milliseconds, on its own
// clock), so a case checks each answer of such a window alone, not what a
// later call finds.
func fleeting(r sluice.Rule) bool { return r.Window < time.Millisecond }

// extremeCosts are the costs tried on a rule of limit l.
func extremeCosts(l int64) []int64 {
	return []int64{1, l - 1, l, l + 1, 1 << 31, maxCost - 1, maxCost, maxCost + 1, math.MaxInt64}
}

var extremeCases = func() []testCase {
	var cases []testCase
	for _, r := range extremeRules {
		cases = append(cases,
			testCase{"ExtremeCosts/" + r.Name, func(e *env) { extremeCostsCase(e, r) }},
			testCase{"ExtremeRecords/" + r.Name, func(e *env) { extremeRecordsCase(e, r) }},
			testCase{"ExtremeSettles/" + r.Name, leased(func(e *env) { extremeSettlesCase(e, r) })},
		)
	}
	return append(cases,
		testCase{"ExtremeLimitZero", extremeLimitZero},
		testCase{"ExtremeLeases", leased(extremeLeases)},
	)
}()

// perUser is a policy of rule r keyed by user.
func perUser(name string, r sluice.Rule) *sluice.Policy {
	r.By = []string{"user"}
	return &sluice.Policy{Name: name, Rules: []sluice.Rule{r}}
}

// bound is the most cost r admits at once: its burst for GCRA (the limit
// when not set), else its limit.
func bound(r sluice.Rule) int64 {
	if r.Algorithm == sluice.GCRA && r.Burst > 0 {
		return r.Burst
	}
	return r.Limit
}

// saturated is what a window of r counts after recording cost in all,
// from empty, at one instant: the cost, at most MaxCost; for GCRA, what
// of its burst the bucket holds.
func saturated(r sluice.Rule, cost int64) int64 {
	if r.Algorithm == sluice.GCRA {
		return min(cost, bound(r))
	}
	return min(cost, maxCost)
}

// sane checks the invariants of every answer: Used 0 to MaxCost (for
// GCRA, to the burst), Remaining 0 to the limit (the burst), and the
// overall Remaining the tightest rule's.
func (e *env) sane(what string, d sluice.Decision, rules ...sluice.Rule) {
	e.t.Helper()
	if len(d.Limits()) != len(rules) {
		e.t.Fatalf("%s: %d limit statuses, want %d", what, len(d.Limits()), len(rules))
	}
	for i, s := range d.Limits() {
		top := bound(rules[i])
		if rules[i].Concurrency > 0 {
			top = rules[i].Concurrency
		}
		upper := int64(maxCost)
		if rules[i].Algorithm == sluice.GCRA {
			upper = top
		}
		if s.Used < 0 || s.Used > upper || s.Remaining < 0 || s.Remaining > top {
			e.t.Errorf("%s at T0+%v: rule %q used %d, remaining %d; want used 0 to %d, remaining 0 to %d",
				what, e.elapsed(), s.Rule, s.Used, s.Remaining, upper, top)
		}
		if s.Limit != top && rules[i].Algorithm != sluice.GCRA {
			e.t.Errorf("%s: rule %q limit %d, want %d", what, s.Rule, s.Limit, top)
		}
	}
}

// extremeCostsCase decides every extreme cost on a window of r of its own:
// a cost above MaxCost is refused by every call and changes nothing; one
// above the limit is refused by AllowN and saturates a Record; one that
// fits is admitted; and the next request fits exactly when the window has
// room for it.
func extremeCostsCase(e *env, r sluice.Rule) {
	p := perUser("extreme-costs", r)
	b := bound(r)
	for i, c := range extremeCosts(r.Limit) {
		if c < 1 {
			continue
		}
		attrs := map[string]string{"user": strconv.Itoa(i)}
		what := fmt.Sprintf("cost %d", c)
		switch {
		case c > maxCost:
			_, errAllow := e.lim.AllowN(e.ctx, p, attrs, c)
			_, errPeek := e.lim.Peek(e.ctx, p, attrs, c)
			_, errRecord := e.lim.Record(e.ctx, p, attrs, c)
			for _, err := range []error{errAllow, errPeek, errRecord} {
				if !errors.Is(err, sluice.ErrInvalidCost) {
					e.t.Errorf("%s: error %v, want ErrInvalidCost", what, err)
				}
			}
			d := e.peek(p, attrs, 1)
			e.sane(what+": then", d, r)
			e.expectUsed(what+": nothing recorded", d, 1)
		case c > b:
			if _, err := e.lim.AllowN(e.ctx, p, attrs, c); !errors.Is(err, sluice.ErrCostExceedsLimit) {
				e.t.Errorf("%s: AllowN error %v, want ErrCostExceedsLimit", what, err)
			}
			d := e.record(p, attrs, c)
			e.sane(what+": record", d, r)
			if d.Limits()[0].Fits || d.Limits()[0].Used != saturated(r, c) {
				e.t.Errorf("%s: record fits %v, used %d; want false, %d", what, d.Limits()[0].Fits, d.Limits()[0].Used, saturated(r, c))
			}
			next := e.peek(p, attrs, 1)
			e.sane(what+": next", next, r)
			if next.Allowed && !fleeting(r) {
				e.t.Errorf("%s: the next request is allowed over a window holding %d of %d", what, d.Limits()[0].Used, b)
			}
		default:
			d := e.allow(p, attrs, c)
			e.sane(what, d, r)
			if !d.Allowed || d.Limits()[0].Used != c || d.Limits()[0].Remaining != b-c {
				e.t.Errorf("%s: allowed %v, used %d, remaining %d; want true, %d, %d", what, d.Allowed, d.Limits()[0].Used, d.Limits()[0].Remaining, c, b-c)
			}
			next := e.peek(p, attrs, 1)
			e.sane(what+": next", next, r)
			if next.Allowed != (c < b) && !fleeting(r) {
				e.t.Errorf("%s: the next request allowed %v, want %v", what, next.Allowed, c < b)
			}
		}
	}
}

// extremeRecordsCase records MaxCost 1,024 times at one instant into one
// window of r: every answer counts MaxCost (GCRA: the bucket is full), no
// sum wraps, and the window has room again exactly when the next
// decision's RetryAfter says, not a microsecond sooner.
func extremeRecordsCase(e *env, r sluice.Rule) {
	p := perUser("extreme-records", r)
	attrs := map[string]string{"user": "u"}
	for i := range 1024 {
		d := e.record(p, attrs, maxCost)
		e.sane("record", d, r)
		if d.Limits()[0].Used != saturated(r, maxCost) || d.Limits()[0].Remaining != 0 {
			e.t.Fatalf("record #%d: used %d, remaining %d; want %d, 0", i+1, d.Limits()[0].Used, d.Limits()[0].Remaining, saturated(r, maxCost))
		}
	}
	d := e.peek(p, attrs, 1)
	e.sane("after the records", d, r)
	if fleeting(r) {
		return
	}
	if d.Allowed || d.RetryAfter <= 0 {
		e.t.Fatalf("after the records: allowed %v, retry after %v; want denied with a wait", d.Allowed, d.RetryAfter)
	}
	wait := d.RetryAfter
	if wait > 200*365*24*time.Hour {
		e.t.Fatalf("after the records: retry after %v, more than a bucket or window is held", wait)
	}
	if wait > time.Microsecond {
		e.clock.Advance(wait - time.Microsecond)
		if d := e.peek(p, attrs, 1); d.Allowed {
			e.t.Errorf("1µs before the retry (%v): allowed", wait)
		} else {
			e.sane("1µs before the retry", d, r)
		}
		e.clock.Advance(time.Microsecond)
	} else {
		e.clock.Advance(wait)
	}
	d = e.allow(p, attrs, 1)
	e.sane("at the retry", d, r)
	if !d.Allowed {
		e.t.Errorf("at the retry (%v): denied, retry after %v", wait, d.RetryAfter)
	}
}

// extremeSettlesCase takes up to 1,024 leases of cost 1 on a rate rule r
// and settles each at MaxCost: the window counts MaxCost (GCRA: full),
// never more; a settle above MaxCost or below 0 is refused and keeps the
// lease.
func extremeSettlesCase(e *env, r sluice.Rule) {
	n := min(1024, bound(r))
	r.By = []string{"user"}
	conc := sluice.Rule{Name: "in-flight", By: []string{"user"}, Concurrency: n, Lease: time.Hour}
	p := &sluice.Policy{Name: "extreme-settles", Rules: []sluice.Rule{r, conc}}
	attrs := map[string]string{"user": "u"}
	leases := make([]*sluice.Lease, 0, n)
	for range n {
		x, d := e.acquire(p, attrs, 1)
		e.sane("acquire", d, r, conc)
		if x == nil {
			e.t.Fatalf("acquire #%d of %d denied by %s", len(leases)+1, n, d.DeniedBy)
		}
		leases = append(leases, x)
	}
	for _, c := range []int64{-1, maxCost + 1, math.MaxInt64, math.MinInt64} {
		if _, err := leases[0].Settle(e.ctx, c); !errors.Is(err, sluice.ErrInvalidCost) {
			e.t.Errorf("settle at %d: error %v, want ErrInvalidCost", c, err)
		}
	}
	for i, x := range leases {
		e.end(fmt.Sprintf("settle #%d at 2^53", i+1), x, maxCost, true)
		d := e.peek(p, attrs, 1)
		e.sane("after a settle", d, r, conc)
		if fleeting(r) {
			continue
		}
		if got, want := d.Limits()[0].Used, saturated(r, maxCost+1); got != want {
			e.t.Fatalf("after settle #%d: used %d, want %d", i+1, got, want)
		}
		if d.Allowed {
			e.t.Fatalf("after settle #%d: a request fits a full window", i+1)
		}
	}
}

// extremeLimitZero: a limit of 0 admits nothing, whatever the algorithm;
// a record on it counts as any record does.
func extremeLimitZero(e *env) {
	for _, r := range []sluice.Rule{
		{Name: "log", Limit: 0, Window: time.Minute},
		{Name: "counter", Limit: 0, Window: time.Minute, Algorithm: sluice.SlidingCounter},
		{Name: "gcra", Limit: 0, Window: time.Minute, Algorithm: sluice.GCRA, Burst: 1},
	} {
		p := perUser("zero-"+r.Name, r)
		attrs := map[string]string{"user": "u"}
		for _, c := range []int64{1, maxCost} {
			d := e.allow(p, attrs, c)
			e.sane(r.Name+": allow", d, r)
			if d.Allowed || d.Remaining != 0 {
				e.t.Errorf("%s: cost %d allowed %v, remaining %d on a limit of 0", r.Name, c, d.Allowed, d.Remaining)
			}
			d = e.record(p, attrs, c)
			e.sane(r.Name+": record", d, r)
			if d.Limits()[0].Fits {
				e.t.Errorf("%s: record of %d fits a limit of 0", r.Name, c)
			}
		}
	}
}

// extremeLeases: concurrency rules of 1 and of 2^53 leases, with the
// shortest lease and one of 50 years (a wait reported in full: see
// store.MaxRetry).
func extremeLeases(e *env) {
	for _, c := range []struct {
		name  string
		n     int64
		lease time.Duration
	}{
		{"one-short", 1, sluice.MinLease},
		{"one-long", 1, 50 * 365 * 24 * time.Hour},
		{"max-short", maxCost, sluice.MinLease},
		{"max-long", maxCost, 50 * 365 * 24 * time.Hour},
	} {
		p := inFlight("extreme-"+c.name, c.n, c.lease)
		r := p.Rules[0]
		attrs := map[string]string{"user": "u"}
		a, d := e.acquire(p, attrs, maxCost) // a lease takes one slot whatever its cost
		e.sane(c.name+": first", d, r)
		if a == nil || d.Limits()[0].Used != 1 || d.Limits()[0].Remaining != c.n-1 {
			e.t.Fatalf("%s: first lease: %+v, want held, used 1, remaining %d", c.name, d, c.n-1)
		}
		// A store may drop a lease of 1ms after 1ms of its own time, as
		// fleeting says of windows: the second lease and the moment before
		// the lease time are checked on longer leases.
		steady := c.lease >= time.Second
		b, d := e.acquire(p, attrs, 1)
		e.sane(c.name+": second", d, r)
		switch {
		case !steady:
		case c.n == 1:
			if b != nil || d.RetryAfter != c.lease {
				e.t.Errorf("%s: second lease held %v, retry after %v; want denied, %v", c.name, b != nil, d.RetryAfter, c.lease)
			}
		case b == nil || d.Limits()[0].Used != 2:
			e.t.Errorf("%s: second lease: %+v, want held, used 2", c.name, d)
		}
		// A peek counts the lease it would take.
		e.clock.Advance(c.lease - time.Microsecond)
		if d := e.peekLease(p, attrs); steady && (c.n == 1 && d.Allowed || c.n > 1 && d.Limits()[0].Used != 3) {
			e.t.Errorf("%s: 1µs before the lease time: allowed %v, used %d; want the leases still alive", c.name, d.Allowed, d.Limits()[0].Used)
		}
		e.clock.Advance(time.Microsecond)
		if d := e.peekLease(p, attrs); d.Limits()[0].Used != 1 || !d.Allowed {
			e.t.Errorf("%s: at the lease time: allowed %v, used %d; want allowed, used 1 (the peek's)", c.name, d.Allowed, d.Limits()[0].Used)
		}
		e.end(c.name+": release expired", a, release, false)
		e.clock.Set(T0)
	}
}

// peekLease peeks at p's concurrency rule for attrs.
func (e *env) peekLease(p *sluice.Policy, attrs map[string]string) sluice.Decision {
	e.t.Helper()
	d := e.peek(p, attrs, 1)
	e.sane("peek", d, p.Rules...)
	return d
}
