package storetest

import (
	"errors"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/store"
)

// Algorithm cases: GCRA and the sliding counter decide by their own
// definitions, with figures every store gives exactly.

var algorithmCases = []testCase{
	{"GCRA", func(e *env) {
		// 10 a second is one unit every 100ms; a burst of 3 admits three at
		// once, then one per interval.
		p := &sluice.Policy{Name: "gcra", Rules: []sluice.Rule{
			{Name: "r", Limit: 10, Window: time.Second, Algorithm: sluice.GCRA, Burst: 3},
		}}
		for i := range 3 {
			d := e.allow(p, nil, 1)
			e.expect("burst", d, outcome{Allowed: true, Remaining: int64(2 - i), ResetAfter: time.Duration(i+1) * 100 * time.Millisecond})
			if d.Limits()[0].Used != int64(i+1) { // GCRA's Used is the part of the burst in use
				e.t.Errorf("burst #%d: used %d, want %d", i+1, d.Limits()[0].Used, i+1)
			}
		}
		// The bucket is full until 100ms: the fourth waits that long.
		e.expect("fourth", e.allow(p, nil, 1), denied("r", 0, 100*time.Millisecond))
		e.expect("cost 2", e.peek(p, nil, 2), denied("r", 0, 200*time.Millisecond))
		e.clock.Set(T0.Add(100*time.Millisecond - time.Microsecond))
		e.expect("1µs early", e.allow(p, nil, 1), denied("r", 0, time.Microsecond))
		e.clock.Set(T0.Add(100 * time.Millisecond))
		e.expect("at 100ms", e.allow(p, nil, 1), allowed(0))
		// After 250ms idle the bucket has 2.5 units free: 2 fit.
		e.clock.Advance(250 * time.Millisecond)
		e.expect("after 250ms", e.peek(p, nil, 2), allowed(0))
		e.expect("3 do not", e.peek(p, nil, 3), denied("r", 2, 50*time.Millisecond))
		// A cost over the burst can never fit.
		if _, err := e.lim.AllowN(e.ctx, p, nil, 4); err == nil {
			e.t.Error("cost 4 over a burst of 3: no error")
		}
	}},

	{"GCRAPenalize", func(e *env) {
		// A penalized attempt moves the arrival time on as an admission
		// would: a client that keeps retrying stays out.
		p := &sluice.Policy{Name: "gcra-penalize", Penalize: true, Rules: []sluice.Rule{
			{Name: "r", Limit: 1, Window: time.Second, Algorithm: sluice.GCRA},
		}}
		e.expect("first", e.allow(p, nil, 1), allowed(0))
		e.clock.Advance(500 * time.Millisecond)
		e.expect("too soon", e.allow(p, nil, 1), denied("r", 0, 1500*time.Millisecond))
		e.clock.Advance(1500 * time.Millisecond)
		e.expect("at RetryAfter", e.allow(p, nil, 1), allowed(0))
	}},

	{"SlidingCounter", func(e *env) {
		// Buckets of a minute, aligned to minutes (T0 is on one): 10 at
		// T0 fill the first. 30s into the next, the previous bucket weighs
		// half: 5 counted, 5 fit.
		p := &sluice.Policy{Name: "counter", Rules: []sluice.Rule{
			{Name: "r", Limit: 10, Window: time.Minute, Algorithm: sluice.SlidingCounter},
		}}
		e.expect("10 at once", e.allow(p, nil, 10), outcome{Allowed: true, Remaining: 0, ResetAfter: 2 * time.Minute})
		// The 11th waits for the next bucket, where the previous one's weight
		// has begun to fall: a µs after it starts.
		e.expect("11th", e.allow(p, nil, 1), denied("r", 0, time.Minute+time.Microsecond))
		e.clock.Set(T0.Add(90 * time.Second))
		d := e.allow(p, nil, 5)
		e.expect("5 at 1m30s", d, outcome{Allowed: true, Remaining: 0, ResetAfter: 90 * time.Second})
		e.expectUsed("5 at 1m30s", d, 10)
		// At 1m31s the previous bucket weighs floor(10*29/60) = 4: 9
		// counted, one fits; then the next waits until the weight falls
		// to 3, 36s into the bucket (past 1m36s).
		e.clock.Set(T0.Add(91 * time.Second))
		e.expect("1 at 1m31s", e.allow(p, nil, 1), allowed(0))
		e.expect("then", e.allow(p, nil, 1), denied("r", 0, 5*time.Second+time.Microsecond))
	}},

	{"SlidingCounterWorstCase", func(e *env) {
		// The estimate assumes the previous bucket's events were spread
		// evenly. When they all came at its very end, the window ending a
		// minute later admits twice the limit: 10 at 59.999999s, and 10
		// more in the next bucket as the previous one's weight fades.
		p := &sluice.Policy{Name: "counter-worst", Rules: []sluice.Rule{
			{Name: "r", Limit: 10, Window: time.Minute, Algorithm: sluice.SlidingCounter},
		}}
		e.clock.Set(T0.Add(time.Minute - time.Microsecond))
		e.expect("10 at the end of a bucket", e.allow(p, nil, 10), allowed(0))
		admitted := 0
		for t := time.Minute; t < 2*time.Minute-time.Microsecond; t += 100 * time.Millisecond {
			e.clock.Set(T0.Add(t))
			if e.allow(p, nil, 1).Allowed {
				admitted++
			}
		}
		if admitted != 10 {
			e.t.Errorf("admitted %d in the next bucket, want 10", admitted)
		}
		// All 20 lie in the one-minute window ending at 1m59.9s.
		e.t.Logf("a sliding counter of limit 10 admitted %d in one window of its length (the log admits 10)", 10+admitted)
	}},

	{"AlgorithmsMix", func(e *env) {
		// Rules of different algorithms in one policy are decided together:
		// a denial by one records in none.
		p := &sluice.Policy{Name: "mix", Rules: []sluice.Rule{
			{Name: "log", Limit: 5, Window: time.Minute},
			{Name: "gcra", Limit: 2, Window: time.Second, Algorithm: sluice.GCRA},
			{Name: "counter", Limit: 4, Window: time.Minute, Algorithm: sluice.SlidingCounter, By: []string{"user"}},
		}}
		u := map[string]string{"user": "ada"}
		e.expect("first", e.allow(p, u, 1), allowed(1))
		e.expect("second", e.allow(p, u, 1), allowed(0))
		d := e.allow(p, u, 1)
		e.expect("third", d, denied("gcra", 0, 500*time.Millisecond))
		e.expectUsed("third", d, 2, 2, 2)
		e.clock.Advance(500 * time.Millisecond)
		e.expect("fourth", e.allow(p, u, 1), allowed(0))
	}},

	{"RecordOverTheLimit", func(e *env) {
		// A cost known once the work is done (Envoy's cost after the
		// response, through Limiter.Decide in ModeRecord) may be more than
		// the whole limit: it is recorded, reported over the limit, and
		// denies until it has left. 5 on a limit of 3 in 3s (GCRA: one unit
		// a second, a burst of 3): a cost of 1 fits again 3s later on the
		// log and GCRA; on the counter when the weight of the previous
		// bucket has fallen to 2, past 1.2s into the next one.
		for k, alg := range []sluice.Algorithm{sluice.Log, sluice.GCRA, sluice.SlidingCounter} {
			start := T0.Add(time.Duration(k) * time.Minute)
			e.clock.Set(start)
			ch := store.Check{Rule: "r", Values: []string{alg.String()}, Limit: 3, Window: 3 * time.Second, Algorithm: alg, Cost: 5}
			if alg == sluice.GCRA {
				ch.Burst = 3
			}
			decide := func(mode store.Mode, cost int64) sluice.Decision {
				e.t.Helper()
				ch.Cost = cost
				d, err := e.lim.Decide(e.ctx, &store.Request{Policy: "over", Mode: mode, Checks: []store.Check{ch}})
				if err != nil {
					e.t.Fatalf("%v: Decide(mode %d, cost %d) at T0+%v: %v", alg, mode, cost, e.elapsed(), err)
				}
				return d
			}
			d := decide(store.ModeRecord, 5)
			if d.Allowed || d.DeniedBy != "r" || d.Limits()[0].Remaining != 0 || alg != sluice.GCRA && d.Limits()[0].Used != 5 {
				e.t.Errorf("%v: record 5 on 3: %+v, want reported over r, 5 used (GCRA: its burst), 0 remaining", alg, d)
			}
			want := 3 * time.Second
			if alg == sluice.SlidingCounter {
				want = 4200*time.Millisecond + time.Microsecond
			}
			if d = decide(store.ModeAllow, 1); d.Allowed || d.RetryAfter != want {
				e.t.Errorf("%v: 1 after recording 5 on 3: allowed %v, retry after %v; want denied, %v", alg, d.Allowed, d.RetryAfter, want)
			}
			e.clock.Set(start.Add(want - time.Microsecond))
			if d = decide(store.ModeAllow, 1); d.Allowed {
				e.t.Errorf("%v: 1 at %v, a µs before its retry: allowed", alg, e.elapsed())
			}
			e.clock.Set(start.Add(want))
			if d = decide(store.ModeAllow, 1); !d.Allowed {
				e.t.Errorf("%v: 1 at its retry, %v after the record: %+v, want allowed", alg, want, d)
			}
		}
		// Limiter.Record of a policy takes such a cost too, where AllowN
		// and Peek refuse it as one that can never fit.
		e.clock.Set(T0.Add(10 * time.Minute))
		p := &sluice.Policy{Name: "over-policy", Rules: []sluice.Rule{{Name: "r", By: []string{"user"}, Limit: 3, Window: 3 * time.Second}}}
		u := map[string]string{"user": "ann"}
		if _, err := e.lim.AllowN(e.ctx, p, u, 5); !errors.Is(err, sluice.ErrCostExceedsLimit) {
			e.t.Errorf("AllowN 5 on 3: %v, want ErrCostExceedsLimit", err)
		}
		if _, err := e.lim.Peek(e.ctx, p, u, 5); !errors.Is(err, sluice.ErrCostExceedsLimit) {
			e.t.Errorf("Peek 5 on 3: %v, want ErrCostExceedsLimit", err)
		}
		d, err := e.lim.Record(e.ctx, p, u, 5)
		if err != nil || d.Allowed || d.DeniedBy != "r" || d.Limits()[0].Used != 5 || d.Limits()[0].Remaining != 0 {
			e.t.Errorf("Record 5 on 3: %+v, %v; want recorded and reported over r, 5 used, 0 remaining", d, err)
		}
		e.expect("1 after Record of 5 on 3", e.allow(p, u, 1), denied("r", 0, 3*time.Second))
		e.clock.Advance(3 * time.Second)
		e.expect("1 when the 5 left", e.allow(p, u, 1), allowed(2))
	}},
}
