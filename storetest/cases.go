package storetest

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluicerate/sluice"
)

// testCase is one conformance case.
type testCase struct {
	name string
	run  func(e *env)
}

// freesRoom marks a case that frees room a concurrent request may see
// taken: a cross-slot decision reserves in one slot group and rolls back
// when another denies. With the deny cache on, a request denied for such a
// reservation keeps its window denied after the rollback, so the case may
// admit less than its limit: it then asserts at most the limit, and logs
// what it under-admitted (expectAdmitted).
func freesRoom(run func(e *env)) func(e *env) {
	return func(e *env) {
		e.frees = true
		run(e)
	}
}

// mayUnderAdmit reports whether the case may admit less than its limit:
// the deny cache is on and the case frees room.
func (e *env) mayUnderAdmit() bool { return e.cache != nil && e.frees }

// expectAdmitted checks how many requests a concurrent case admitted.
func (e *env) expectAdmitted(what string, got, want int) {
	e.t.Helper()
	switch {
	case got == want:
	case got < want && e.mayUnderAdmit():
		e.t.Logf("%s: admitted %d of %d with the deny cache: rollbacks freed room it had seen taken", what, got, want)
	default:
		e.t.Errorf("%s: admitted %d, want exactly %d", what, got, want)
	}
}

// notify is the notifier's policy: a global cap over a per-category cap.
func notify() *sluice.Policy {
	return &sluice.Policy{Name: "notify", Rules: []sluice.Rule{
		{Name: "global", Limit: 10, Window: time.Minute},
		{Name: "category", Limit: 3, Window: time.Minute, By: []string{"category"}},
	}}
}

func category(c string) map[string]string { return map[string]string{"category": c} }

func single(name string, limit int64, window time.Duration) *sluice.Policy {
	return &sluice.Policy{Name: name, Rules: []sluice.Rule{{Name: "r", Limit: limit, Window: window}}}
}

var cases = []testCase{
	{"WindowEdge", func(e *env) {
		// An entry recorded exactly one window ago is out; a microsecond
		// less and it still counts.
		p := single("edge", 2, 10*time.Second)
		e.expect("first", e.allow(p, nil, 1), allowed(1))
		e.clock.Advance(time.Second)
		e.expect("second", e.allow(p, nil, 1), allowed(0))
		e.clock.Advance(time.Second)
		e.expect("third", e.allow(p, nil, 1), denied("r", 0, 8*time.Second))
		e.clock.Set(T0.Add(10*time.Second - time.Microsecond))
		e.expect("one µs before the edge", e.allow(p, nil, 1), denied("r", 0, time.Microsecond))
		e.clock.Set(T0.Add(10 * time.Second))
		d := e.allow(p, nil, 1)
		e.expect("at the edge", d, allowed(0))
		e.expectUsed("at the edge", d, 2)
	}},

	{"Hierarchy", func(e *env) {
		// The notifier: the 4th "errors" is denied by category; after 10
		// admitted across categories the next is denied by global.
		p := notify()
		for i := range 3 {
			e.expect(fmt.Sprintf("errors #%d", i+1), e.allow(p, category("errors"), 1), allowed(int64(2-i)))
		}
		d := e.allow(p, category("errors"), 1)
		e.expect("errors #4", d, denied("category", 0, time.Minute))
		e.expectUsed("errors #4", d, 3, 3)
		admitted := 3
		for _, c := range []string{"warnings", "info", "debug"} {
			for range 3 {
				if admitted == 10 {
					break
				}
				e.clock.Advance(time.Millisecond)
				if d := e.allow(p, category(c), 1); !d.Allowed {
					e.t.Fatalf("%s after %d admitted: denied by %q", c, admitted, d.DeniedBy)
				}
				admitted++
			}
		}
		d = e.allow(p, category("debug"), 1)
		e.expect("11th", d, denied("global", 0, time.Minute-7*time.Millisecond))
		e.expectUsed("11th", d, 10, 1)
		// A category over its own cap and the global cap: both deny, the
		// first rule is named and RetryAfter is the larger of the two.
		d = e.allow(p, category("errors"), 1)
		e.expect("errors over both", d, denied("global", 0, time.Minute-7*time.Millisecond))
		if d.Limits()[1].Fits || d.Limits()[1].RetryAfter != time.Minute-7*time.Millisecond {
			e.t.Errorf("category status = %+v, want not fitting with RetryAfter %v", d.Limits()[1], time.Minute-7*time.Millisecond)
		}
	}},

	{"DeniedConsumesNothing", func(e *env) {
		// Global 10, category 3: five attempts on one category admit three
		// and leave seven globally; the two denials leave no trace.
		p := notify()
		var admitted int
		for range 5 {
			if e.allow(p, category("errors"), 1).Allowed {
				admitted++
			}
			e.clock.Advance(time.Second)
		}
		if admitted != 3 {
			e.t.Errorf("admitted %d of 5, want 3", admitted)
		}
		// A peek counts the request it would admit: 3 + 1 and 0 + 1.
		d := e.peek(p, category("warnings"), 1)
		e.expectUsed("peek", d, 4, 1)
		if d.Limits()[0].Remaining != 6 {
			e.t.Errorf("global remaining %d, want 6", d.Limits()[0].Remaining)
		}
		// The window of the denied category still ends with its admitted
		// entries: at T0+60s the first one leaves and one more fits.
		e.clock.Set(T0.Add(time.Minute))
		e.expect("after the first leaves", e.allow(p, category("errors"), 1), allowed(0))
	}},

	{"Penalize", func(e *env) {
		// The push notifier's behaviour, on request: denied attempts are recorded,
		// so a client retrying while denied stays denied.
		p := single("penalize", 3, 10*time.Second)
		p.Penalize = true
		for i := range 5 {
			d := e.allow(p, nil, 1)
			if want := i < 3; d.Allowed != want {
				e.t.Errorf("attempt %d: allowed %v, want %v", i+1, d.Allowed, want)
			}
			e.expectUsed(fmt.Sprintf("attempt %d", i+1), d, int64(i+1))
			e.clock.Advance(time.Second)
		}
		// At T0+10s the first attempt left; four are counted, still denied.
		// A peek gives what Allow would: the attempt penalized too (five
		// counted), so a retry waits for three entries to leave, at T0+13s.
		e.clock.Set(T0.Add(10 * time.Second))
		d := e.peek(p, nil, 1)
		e.expect("after one window", d, denied("r", 0, 3*time.Second))
		e.expectUsed("after one window", d, 5)
	}},

	{"PenalizeRetryAfter", func(e *env) {
		// Limit 3 per 3s, penalized: admitted at 0, 1.2s and 1.5s; the
		// fourth, at 2.4s, is denied and recorded. Three entries then count
		// from 2.4s on (1.2s, 1.5s, 2.4s), so a retry fits when the one of
		// 1.2s leaves, at 4.2s: RetryAfter 1.8s, not the 0.6s until the
		// first entry leaves. Waiting exactly that long admits.
		p := single("penalize-retry", 3, 3*time.Second)
		p.Penalize = true
		for _, at := range []time.Duration{0, 1200 * time.Millisecond, 1500 * time.Millisecond} {
			e.clock.Set(T0.Add(at))
			if d := e.allow(p, nil, 1); !d.Allowed {
				e.t.Fatalf("at %v: denied by %s", at, d.DeniedBy)
			}
		}
		e.clock.Set(T0.Add(2400 * time.Millisecond))
		d := e.allow(p, nil, 1)
		e.expect("fourth", d, denied("r", 0, 1800*time.Millisecond))
		e.expectUsed("fourth", d, 4)
		if d.Cause != sluice.CauseLimit {
			e.t.Errorf("fourth: cause %q, want %q", d.Cause, sluice.CauseLimit)
		}
		// A microsecond early it is still denied; a peek tells what Allow
		// would: that attempt penalized too, a retry would wait for the
		// entry of 1.5s, until 4.5s.
		e.clock.Set(T0.Add(4200*time.Millisecond - time.Microsecond))
		e.expect("1µs early", e.peek(p, nil, 1), denied("r", 0, 300*time.Millisecond+time.Microsecond))
		e.clock.Set(T0.Add(4200 * time.Millisecond))
		e.expect("at RetryAfter", e.allow(p, nil, 1), allowed(0))
	}},

	{"MinGap", func(e *env) {
		// Push notifications: at least 100ms between messages, and the exact time left.
		p := &sluice.Policy{Name: "push", Rules: []sluice.Rule{
			{Name: "per-user", Limit: 10, Window: time.Minute, MinGap: 100 * time.Millisecond, By: []string{"user"}},
		}}
		u := map[string]string{"user": "u1"}
		e.expect("first", e.allow(p, u, 1), allowed(9))
		e.clock.Advance(30 * time.Millisecond)
		d := e.allow(p, u, 1)
		e.expect("30ms later", d, denied("per-user", 9, 70*time.Millisecond))
		if d.Cause != sluice.CauseGap || d.Limits()[0].Cause != sluice.CauseGap {
			e.t.Errorf("30ms later: cause %q (rule %q), want %q", d.Cause, d.Limits()[0].Cause, sluice.CauseGap)
		}
		e.expect("other user", e.allow(p, map[string]string{"user": "u2"}, 1), allowed(9))
		e.clock.Set(T0.Add(100*time.Millisecond - time.Microsecond))
		e.expect("1µs before the gap", e.allow(p, u, 1), denied("per-user", 9, time.Microsecond))
		e.clock.Set(T0.Add(100 * time.Millisecond))
		e.expect("at the gap", e.allow(p, u, 1), allowed(8))
	}},

	{"MinGapOutlivesWindow", func(e *env) {
		// A gap longer than the window is still enforced after the entry
		// left the window.
		p := &sluice.Policy{Name: "gap", Rules: []sluice.Rule{
			{Name: "r", Limit: 5, Window: time.Second, MinGap: 3 * time.Second},
		}}
		e.expect("first", e.allow(p, nil, 1), allowed(4))
		e.clock.Advance(2 * time.Second)
		e.expect("window passed, gap not", e.allow(p, nil, 1), denied("r", 5, time.Second))
		e.clock.Advance(time.Second)
		e.expect("gap passed", e.allow(p, nil, 1), allowed(4))
	}},

	{"CostN", func(e *env) {
		p := single("cost", 10, 10*time.Second)
		e.expect("cost 4", e.allow(p, nil, 4), allowed(6))
		e.clock.Advance(time.Second)
		e.expect("cost 3", e.allow(p, nil, 3), allowed(3))
		e.clock.Advance(time.Second)
		// 7 used; 7 more needs 4 freed: the first entry (4) leaves at T0+10s.
		e.expect("cost 7", e.allow(p, nil, 7), denied("r", 3, 8*time.Second))
		// 8 more needs 5 freed: both entries, the second leaves at T0+11s.
		e.expect("cost 8", e.allow(p, nil, 8), denied("r", 3, 9*time.Second))
		e.expect("cost 3 fits exactly", e.allow(p, nil, 3), allowed(0))
		e.clock.Set(T0.Add(10 * time.Second))
		d := e.peek(p, nil, 1)
		e.expect("after the first leaves", d, allowed(3))
		e.expectUsed("after the first leaves", d, 7) // 6, and the request a peek counts
	}},

	{"RetryAfterExact", func(e *env) {
		// Advancing by RetryAfter makes the same request fit; a microsecond
		// less does not.
		p := &sluice.Policy{Name: "retry", Rules: []sluice.Rule{
			{Name: "fast", Limit: 3, Window: 10 * time.Second},
			{Name: "slow", Limit: 5, Window: time.Minute},
		}}
		steps := []time.Duration{0, 1500 * time.Millisecond, 1234567 * time.Microsecond}
		for i, s := range steps {
			e.clock.Advance(s)
			if d := e.allow(p, nil, 1); !d.Allowed {
				e.t.Fatalf("event %d denied by %s", i+1, d.DeniedBy)
			}
		}
		// Cost 1 waits for the first entry (T0+10s), cost 2 for the second
		// (T0+11.5s); now is T0+2.734567s.
		now := e.elapsed()
		e.expect("cost 1", e.peek(p, nil, 1), denied("fast", 0, 10*time.Second-now))
		e.expect("cost 2", e.peek(p, nil, 2), denied("fast", 0, 11500*time.Millisecond-now))
		// A second rule that also denies makes RetryAfter the larger wait:
		// "slow" has 2 left, so cost 3 needs one of its entries to leave too,
		// a minute after T0.
		e.expect("cost 3", e.peek(p, nil, 3), denied("fast", 0, time.Minute-now))
		// Time only moves forward: each cost waits longer than the one before.
		for _, cost := range []int64{1, 2, 3} {
			d := e.peek(p, nil, cost)
			if d.Allowed || d.RetryAfter <= 0 {
				e.t.Fatalf("cost %d: got %+v, want a denial with a RetryAfter", cost, d)
			}
			base := e.clock.Now()
			e.clock.Set(base.Add(d.RetryAfter - time.Microsecond))
			if d2 := e.peek(p, nil, cost); d2.Allowed {
				e.t.Errorf("cost %d: allowed 1µs before RetryAfter %v", cost, d.RetryAfter)
			}
			e.clock.Set(base.Add(d.RetryAfter))
			if d2 := e.peek(p, nil, cost); !d2.Allowed {
				e.t.Errorf("cost %d: denied by %s at RetryAfter %v", cost, d2.DeniedBy, d.RetryAfter)
			}
		}
	}},

	{"ResetAfter", func(e *env) {
		p := notify()
		e.allow(p, category("a"), 1)
		e.clock.Advance(20 * time.Second)
		d := e.allow(p, category("b"), 1)
		e.expect("after two", d, outcome{Allowed: true, Remaining: 2, ResetAfter: time.Minute})
		if got := d.Limits()[1].ResetAfter; got != time.Minute {
			e.t.Errorf("category b ResetAfter %v, want 1m", got)
		}
		e.clock.Advance(10 * time.Second)
		// A denied peek (cost 3 does not fit category a's 2 left) reports
		// the windows as they are.
		d = e.peek(p, category("a"), 3)
		if d.ResetAfter != 50*time.Second || d.Limits()[1].ResetAfter != 30*time.Second {
			e.t.Errorf("peek a: ResetAfter %v (category %v), want 50s (30s)", d.ResetAfter, d.Limits()[1].ResetAfter)
		}
		if d := e.peek(p, category("never"), 1); d.Limits()[1].ResetAfter != time.Minute {
			e.t.Errorf("empty window, admitted by a peek: ResetAfter %v, want 1m (its entry's)", d.Limits()[1].ResetAfter)
		}
		if d := e.peek(p, category("never"), 3); d.Limits()[1].ResetAfter != time.Minute || !d.Allowed {
			e.t.Errorf("empty window: peek %+v", d)
		}
	}},

	{"PeekRecordsNothing", func(e *env) {
		p := single("peek", 2, time.Minute)
		for range 3 {
			e.expect("peek on empty", e.peek(p, nil, 1), allowed(1)) // 1 left after it
		}
		e.allow(p, nil, 1)
		e.allow(p, nil, 1)
		e.clock.Advance(time.Second)
		d := e.peek(p, nil, 1)
		e.expect("peek when full", d, denied("r", 0, 59*time.Second))
		e.expectUsed("peek when full", d, 2)
		e.clock.Set(T0.Add(time.Minute))
		e.expect("full window passed", e.allow(p, nil, 2), allowed(0))
	}},

	{"RecordAddsToEveryWindow", func(e *env) {
		// The telecom platform: one event into many windows, unconditionally.
		p := &sluice.Policy{Name: "cps", Rules: []sluice.Rule{
			{Name: "out", Limit: 3, Window: time.Second},
			{Name: "peer", Limit: 2, Window: time.Second, By: []string{"peer"}},
			{Name: "customer", Limit: 10, Window: time.Minute, By: []string{"customer"}},
		}}
		a := map[string]string{"peer": "45", "customer": "c1"}
		e.expectUsed("first", e.record(p, a, 1), 1, 1, 1)
		e.expectUsed("second", e.record(p, a, 1), 2, 2, 2)
		d := e.record(p, a, 1)
		if d.Allowed || d.DeniedBy != "peer" {
			e.t.Errorf("third record: allowed %v denied by %q, want reported over peer", d.Allowed, d.DeniedBy)
		}
		e.expectUsed("third", d, 3, 3, 3)
		e.expectUsed("other peer", e.peek(p, map[string]string{"peer": "46", "customer": "c1"}, 1), 3, 0, 3)
	}},

	{"FrozenInstant", func(e *env) {
		// 1,000 events at one microsecond are 1,000 distinct entries.
		p := single("burst", 1000, time.Minute)
		for i := range 1000 {
			if d := e.allow(p, nil, 1); !d.Allowed {
				e.t.Fatalf("event %d denied", i+1)
			}
		}
		d := e.allow(p, nil, 1)
		e.expect("1001st", d, denied("r", 0, time.Minute))
		e.expectUsed("1001st", d, 1000)
		e.clock.Advance(time.Minute)
		e.expectUsed("a window later", e.peek(p, nil, 1), 1) // the peeked request alone
	}},

	{"AttributesSelectWindows", func(e *env) {
		// Distinct values never share a window, whatever characters they
		// contain.
		p := &sluice.Policy{Name: "pair", Rules: []sluice.Rule{
			{Name: "r", Limit: 1, Window: time.Minute, By: []string{"a", "b"}},
		}}
		values := [][2]string{{"x:y", "z"}, {"x", "y:z"}, {"{x}", ""}, {"", "{x}"}, {"x}:{y", ""}, {"ü", "%"}, {"%C3%BC", "%25"}}
		for _, v := range values {
			attrs := map[string]string{"a": v[0], "b": v[1]}
			if d := e.allow(p, attrs, 1); !d.Allowed {
				e.t.Errorf("first request for %q denied: shares a window with another value", v)
			}
		}
		for _, v := range values {
			if d := e.allow(p, map[string]string{"a": v[0], "b": v[1]}, 1); d.Allowed {
				e.t.Errorf("second request for %q allowed", v)
			}
		}
		// The same rule name in another policy is another window.
		q := &sluice.Policy{Name: "pair2", Rules: p.Rules}
		if d := e.allow(q, map[string]string{"a": "x:y", "b": "z"}, 1); !d.Allowed {
			e.t.Errorf("policy pair2 shares a window with policy pair")
		}
	}},

	{"Shadow", func(e *env) {
		p := single("shadow", 1, time.Minute)
		p.Shadow = true
		e.expect("first", e.allow(p, nil, 1), allowed(0))
		d := e.allow(p, nil, 1)
		if !d.Allowed || !d.Shadowed || d.DeniedBy != "r" || d.RetryAfter != time.Minute {
			e.t.Errorf("second: %+v, want allowed, shadowed, denied by r, retry 1m", d)
		}
		e.expectUsed("second", d, 1)
	}},

	{"BadInputChangesNothing", func(e *env) {
		p := notify()
		attrs := category("errors")
		checks := []struct {
			name string
			p    *sluice.Policy
			a    map[string]string
			cost int64
			want error
		}{
			{"cost 0", p, attrs, 0, sluice.ErrInvalidCost},
			{"cost -1", p, attrs, -1, sluice.ErrInvalidCost},
			{"cost over limit", p, attrs, 4, sluice.ErrCostExceedsLimit},
			{"empty policy", &sluice.Policy{Name: "empty"}, attrs, 1, sluice.ErrEmptyPolicy},
			{"nil policy", nil, attrs, 1, sluice.ErrInvalidPolicy},
			{"missing attribute", p, map[string]string{"cat": "errors"}, 1, sluice.ErrMissingAttribute},
			{"nil attributes", p, nil, 1, sluice.ErrMissingAttribute},
			{"negative limit", single("negative", -1, time.Minute), nil, 1, sluice.ErrInvalidPolicy},
			{"zero window", single("nowindow", 1, 0), nil, 1, sluice.ErrInvalidPolicy},
		}
		for _, c := range checks {
			for _, call := range []struct {
				name string
				fn   func() (sluice.Decision, error)
			}{
				{"AllowN", func() (sluice.Decision, error) { return e.lim.AllowN(e.ctx, c.p, c.a, c.cost) }},
				{"Peek", func() (sluice.Decision, error) { return e.lim.Peek(e.ctx, c.p, c.a, c.cost) }},
				{"Record", func() (sluice.Decision, error) { return e.lim.Record(e.ctx, c.p, c.a, c.cost) }},
			} {
				if call.name == "Record" && c.want == sluice.ErrCostExceedsLimit {
					continue // Record takes any cost: RecordOverTheLimit
				}
				d, err := call.fn()
				if !errors.Is(err, c.want) {
					e.t.Errorf("%s %s: error %v, want %v", call.name, c.name, err, c.want)
				}
				if d.Allowed {
					e.t.Errorf("%s %s: allowed on error", call.name, c.name)
				}
			}
		}
		e.expectUsed("after bad input", e.peek(p, attrs, 1), 1, 1) // the peeked request alone
		if e.target.TTLs != nil {
			keys, err := e.target.TTLs(e.ctx)
			if err != nil {
				e.t.Fatal(err)
			}
			if len(keys) != 0 {
				e.t.Errorf("bad input left keys: %v", keys)
			}
		}
	}},

	{"KeysExpire", func(e *env) {
		if e.target.TTLs == nil {
			e.t.Skip("store reports no TTLs")
		}
		p := &sluice.Policy{Name: "ttl", Rules: []sluice.Rule{
			{Name: "short", Limit: 5, Window: 2 * time.Second},
			{Name: "gap", Limit: 5, Window: 3 * time.Second, MinGap: 500 * time.Millisecond, By: []string{"u"}},
			{Name: "long", Limit: 5, Window: 5 * time.Second, By: []string{"u"}},
		}}
		max := map[string]time.Duration{"short": 2 * time.Second, "gap": 3500 * time.Millisecond, "long": 5 * time.Second}
		e.allow(p, map[string]string{"u": "a"}, 1)
		e.record(p, map[string]string{"u": "b"}, 2)
		e.clock.Advance(100 * time.Millisecond)
		e.allow(p, map[string]string{"u": "a"}, 1) // denied by the gap: no key refreshed
		keys, err := e.target.TTLs(e.ctx)
		if err != nil {
			e.t.Fatal(err)
		}
		if len(keys) != 5 {
			e.t.Errorf("got %d keys, want 5: %v", len(keys), keys)
		}
		for k, ttl := range keys {
			var limit time.Duration
			for name, m := range max {
				if containsRule(k, name) {
					limit = m
				}
			}
			if ttl <= 0 || limit == 0 || ttl > limit {
				e.t.Errorf("key %q has TTL %v, want in (0, %v]", k, ttl, limit)
			}
		}
	}},

	{"Concurrent", freesRoom(func(e *env) {
		// Many callers at once: exactly the limit is admitted, per level.
		p := e.policy(notify())
		p.Rules[0].Limit = 40
		p.Rules[1].Limit = 7
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			admitted = map[string]int{}
		)
		for g := range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := fmt.Sprintf("c%d", g%8)
				for range 4 {
					d, err := e.lim.Allow(e.ctx, p, category(c))
					if err != nil {
						e.t.Error(err)
						return
					}
					if d.Allowed {
						mu.Lock()
						admitted[c]++
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		total := 0
		for c, n := range admitted {
			total += n
			if n > 7 {
				e.t.Errorf("category %s admitted %d, limit 7", c, n)
			}
		}
		e.expectAdmitted("in total", total, 40)
	})},
}

// containsRule reports whether key names rule name as a path element.
func containsRule(key, name string) bool {
	for i := 0; i+len(name) <= len(key); i++ {
		if key[i:i+len(name)] == name &&
			(i == 0 || !isWordByte(key[i-1])) &&
			(i+len(name) == len(key) || !isWordByte(key[i+len(name)])) {
			return true
		}
	}
	return false
}

func isWordByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '-' || b == '_'
}
