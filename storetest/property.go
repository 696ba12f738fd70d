package storetest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sluicerate/sluice"
)

// The property case drives a store with random sequences of decide, peek and
// record calls, with random costs, gaps and penalize on or off, and holds
// every decision to model: a naive log of every event, which answers from
// the contract's and each algorithm's definitions (RetryAfter by searching for the least wait, not
// by a formula a store also uses). After every denial it checks the
// contract's promise directly: a microsecond before RetryAfter the same
// request is still denied, at RetryAfter it is admitted.
//
// Each run uses a fixed seed and a random one; a failure names the seed, and
// SLUICE_PROPERTY_SEED=<seed> replays that one alone.

// propertySteps is how many random calls each seed makes (denials add their
// retry checks on top).
const propertySteps = 1200

// propertySeedEnv names a seed to replay alone.
const propertySeedEnv = "SLUICE_PROPERTY_SEED"

func propertySeeds(t interface{ Fatalf(string, ...any) }) []uint64 {
	if s := os.Getenv(propertySeedEnv); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q is not a seed", propertySeedEnv, s)
		}
		return []uint64{seed}
	}
	return []uint64{1, rand.Uint64()}
}

var propertyCases = []testCase{
	{"RandomSequencesKeepTheContract", func(e *env) {
		for _, seed := range propertySeeds(e.t) {
			var hits int64
			if e.cache != nil {
				hits = e.cache.hits.Load()
			}
			ok, cacheable := runProperty(e, seed)
			if !ok {
				e.t.Fatalf("seed %d failed; replay it alone with %s=%d", seed, propertySeedEnv, seed)
			}
			// A seed whose only denials are of penalizing policies gives the
			// cache nothing to answer: such a policy's store records every
			// attempt.
			if e.cache != nil && cacheable && e.cache.hits.Load() == hits {
				e.t.Errorf("seed %d: the deny cache answered none of the decisions; they checked nothing of it", seed)
			}
		}
	}},
}

// propertyPolicies returns a few random policies: one to three rules, small
// limits, windows of minutes (a Redis store expires keys on its own clock,
// which must not catch up with the manual one during a run), gaps on some
// rules, penalize on some policies. Policy names carry the seed, so the
// seeds of one run never share windows.
func propertyPolicies(rng *rand.Rand, seed uint64) []*sluice.Policy {
	attrs := []string{"user", "kind"}
	var out []*sluice.Policy
	for i := range 4 {
		p := &sluice.Policy{Name: fmt.Sprintf("prop%d-%d", seed%1000003, i), Penalize: rng.IntN(2) == 0}
		for j := range 1 + rng.IntN(3) {
			r := sluice.Rule{
				Name:   fmt.Sprintf("r%d", j),
				Limit:  1 + rng.Int64N(8),
				Window: time.Duration(1+rng.IntN(5)) * time.Minute,
			}
			switch rng.IntN(6) {
			case 0:
				r.Algorithm = sluice.GCRA
				if rng.IntN(2) == 0 {
					r.Burst = 1 + rng.Int64N(r.Limit+2)
				}
			case 1:
				r.Algorithm = sluice.SlidingCounter
			default:
				if rng.IntN(3) == 0 {
					r.MinGap = time.Duration(1+rng.IntN(20)) * time.Second
				}
			}
			for _, a := range attrs {
				if rng.IntN(2) == 0 {
					r.By = append(r.By, a)
				}
			}
			p.Rules = append(p.Rules, r)
		}
		out = append(out, p)
	}
	return out
}

// propertyAdvance returns a random step of the clock: none, a microsecond,
// milliseconds, seconds, or a good part of a window.
func propertyAdvance(rng *rand.Rand) time.Duration {
	switch rng.IntN(6) {
	case 0:
		return 0
	case 1:
		return time.Microsecond
	case 2:
		return time.Duration(rng.Int64N(int64(50 * time.Millisecond)))
	case 3:
		return time.Duration(rng.Int64N(int64(5 * time.Second)))
	case 4:
		return time.Duration(rng.Int64N(int64(30 * time.Second)))
	}
	return time.Duration(rng.Int64N(int64(3 * time.Minute)))
}

// propertyCall is one call of a sequence.
type propertyCall struct {
	op    string // "allow", "peek" or "record"
	p     *sluice.Policy
	attrs map[string]string
	cost  int64
}

func (c propertyCall) String() string {
	return fmt.Sprintf("%s(%s penalize=%v, %v, cost %d)", c.op, c.p.Name, c.p.Penalize, c.attrs, c.cost)
}

// runProperty runs one seed and reports whether every decision matched, and
// whether a deny cache could answer any of them: a policy that does not
// penalize denied an allow or a record, so the peek that follows is the
// cache's to answer. (A seed may draw only penalizing policies, or limits
// its calls never reach.)
func runProperty(e *env, seed uint64) (ok, cacheable bool) {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	policies := propertyPolicies(rng, seed)
	m := newModel()
	ok = true
	do := func(step int, c propertyCall) sluice.Decision {
		var got sluice.Decision
		var err error
		switch p := e.policy(c.p); c.op {
		case "allow":
			got, err = e.lim.AllowN(e.ctx, p, c.attrs, c.cost)
		case "peek":
			got, err = e.lim.Peek(e.ctx, p, c.attrs, c.cost)
		default:
			got, err = e.lim.Record(e.ctx, p, c.attrs, c.cost)
		}
		if err != nil {
			e.t.Fatalf("seed %d step %d: %v at %v: %v", seed, step, c, e.elapsed(), err)
		}
		want := m.decide(e.clock.Now(), c)
		if os.Getenv("SLUICE_PROPERTY_TRACE") != "" {
			e.t.Logf("step %d %v at %v: got %+v", step, c, e.elapsed(), got)
		}
		if got.Cached {
			// The deny cache answered (RunDenyCache): held to the model's
			// decision, which the sequence then goes on with.
			if msg := e.cache.check(got, want); msg != "" && ok {
				e.t.Errorf("seed %d step %d: %v at T0+%v answered from the deny cache:\n%s", seed, step, c, e.elapsed(), msg)
				ok = false
			}
			return want
		}
		if diff := diffDecision(got, want); diff != "" && ok {
			e.t.Errorf("seed %d step %d: %v at T0+%v:\n%s", seed, step, c, e.elapsed(), diff)
			ok = false
		}
		return got
	}
	for step := range propertySteps {
		if !ok {
			break
		}
		e.clock.Advance(propertyAdvance(rng))
		p := policies[rng.IntN(len(policies))]
		limit := p.Rules[0].Limit
		for _, r := range p.Rules {
			limit = min(limit, r.Limit)
			if r.Algorithm == sluice.GCRA {
				limit = min(limit, burst(&r))
			}
		}
		c := propertyCall{
			op:    []string{"allow", "allow", "allow", "peek", "record"}[rng.IntN(5)],
			p:     p,
			attrs: map[string]string{"user": "u" + strconv.Itoa(rng.IntN(3)), "kind": "k" + strconv.Itoa(rng.IntN(2))},
			cost:  1 + rng.Int64N(limit),
		}
		d := do(step, c)
		if d.Allowed || !ok || c.op == "peek" && c.p.Penalize {
			// A peek on a Penalize policy reports the wait after the
			// penalty Allow would record; the peek recorded nothing.
			continue
		}
		// The promise: the same request a microsecond before RetryAfter is
		// denied (asked by a peek, which changes nothing), and at RetryAfter
		// it is admitted. With the deny cache on, the peek is answered from
		// it and the admission shows that its entry expired in time.
		retry := propertyCall{op: "allow", p: c.p, attrs: c.attrs, cost: c.cost}
		cacheable = cacheable || c.op != "peek" && !c.p.Penalize
		at := e.clock.Now()
		if d.RetryAfter <= 0 {
			e.t.Errorf("seed %d step %d: %v denied with RetryAfter %v", seed, step, c, d.RetryAfter)
			return false, cacheable
		}
		e.clock.Set(at.Add(d.RetryAfter - time.Microsecond))
		if early := do(step, propertyCall{op: "peek", p: c.p, attrs: c.attrs, cost: c.cost}); early.Allowed && ok {
			e.t.Errorf("seed %d step %d: %v: admitted 1µs before RetryAfter %v", seed, step, c, d.RetryAfter)
			ok = false
		}
		e.clock.Set(at.Add(d.RetryAfter))
		if late := do(step, retry); !late.Allowed && ok {
			e.t.Errorf("seed %d step %d: %v: denied by %s at RetryAfter %v", seed, step, c, late.DeniedBy, d.RetryAfter)
			ok = false
		}
	}
	return ok, cacheable
}

// diffDecision describes how got differs from want, or returns "".
func diffDecision(got, want sluice.Decision) string {
	var b strings.Builder
	top := func(name string, g, w any) {
		if g != w {
			fmt.Fprintf(&b, "  %s: got %v, want %v\n", name, g, w)
		}
	}
	top("Allowed", got.Allowed, want.Allowed)
	top("DeniedBy", got.DeniedBy, want.DeniedBy)
	top("Cause", got.Cause, want.Cause)
	top("Remaining", got.Remaining, want.Remaining)
	top("RetryAfter", got.RetryAfter, want.RetryAfter)
	top("ResetAfter", got.ResetAfter, want.ResetAfter)
	if len(got.Limits()) != len(want.Limits()) {
		fmt.Fprintf(&b, "  %d limit statuses, want %d\n", len(got.Limits()), len(want.Limits()))
		return b.String()
	}
	for i := range want.Limits() {
		if got.Limits()[i] != want.Limits()[i] {
			fmt.Fprintf(&b, "  rule %d:\n    got  %+v\n    want %+v\n", i, got.Limits()[i], want.Limits()[i])
		}
	}
	return b.String()
}

// model is the contract's reference: every event of every window, as a
// plain list, in absolute µs, from which each algorithm's definition is
// computed directly (the sliding counter's buckets are sums over the list;
// GCRA's theoretical arrival time is kept as the definition gives it).
type model struct {
	logs map[string]*modelLog
}

type modelLog struct {
	events []modelEvent
	newest int64 // time of the newest event ever recorded; -1 for none
	tat    int64 // GCRA's theoretical arrival time
}

type modelEvent struct{ at, cost int64 }

func newModel() *model { return &model{logs: map[string]*modelLog{}} }

// sum returns the cost of the log's events at times in (from, to].
func (l *modelLog) sum(from, to int64) int64 {
	var n int64
	for _, ev := range l.events {
		if ev.at > from && ev.at <= to {
			n += ev.cost
		}
	}
	return n
}

// interval is GCRA's time per unit of cost: Window/Limit rounded up.
func interval(r *sluice.Rule) int64 {
	w := r.Window.Microseconds()
	return (w + r.Limit - 1) / r.Limit
}

// burst is GCRA's bucket size.
func burst(r *sluice.Rule) int64 {
	if r.Burst > 0 {
		return r.Burst
	}
	return r.Limit
}

// estimate is the sliding counter's count at t: the current bucket's sum
// plus the previous one's weighted by the part the window still covers.
func (l *modelLog) estimate(r *sluice.Rule, t int64) int64 {
	w := r.Window.Microseconds()
	start := t / w * w
	curr, prev := l.sum(start-1, t), l.sum(start-w-1, start-1)
	return curr + int64(math.Floor(float64(prev)*float64(w-(t-start))/float64(w)))
}

// fits reports whether rule r fits cost at t, by room and by gap.
func (l *modelLog) fits(r *sluice.Rule, cost, t int64) (room, gap bool) {
	switch r.Algorithm {
	case sluice.GCRA:
		return max(l.tat, t)+cost*interval(r)-burst(r)*interval(r) <= t, true
	case sluice.SlidingCounter:
		return l.estimate(r, t)+cost <= r.Limit, true
	}
	room = l.sum(t-r.Window.Microseconds(), t)+cost <= r.Limit
	gap = r.MinGap == 0 || l.newest < 0 || t-l.newest >= r.MinGap.Microseconds()
	return room, gap
}

// horizon bounds the wait for rule r: it fits cost by then, whatever
// happened before now.
func horizon(r *sluice.Rule, cost int64) int64 {
	h := 2*r.Window.Microseconds() + r.MinGap.Microseconds() + 1
	if r.Algorithm == sluice.GCRA {
		h += (cost + burst(r)) * interval(r)
	}
	return h
}

// wait returns the least d >= 0 such that cond(now+d) holds; cond is false
// at now and turns true for good within horizon µs.
func wait(now, horizon int64, cond func(t int64) bool) int64 {
	lo, hi := int64(0), horizon // cond(now+lo) false, cond(now+hi) true
	for lo+1 < hi {
		mid := lo + (hi-lo)/2
		if cond(now + mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

func (l *modelLog) clone() *modelLog {
	c := *l
	c.events = slices.Clone(l.events)
	return &c
}

// record adds cost at now: a log entry never before the newest, and GCRA's
// arrival time moved on.
func (l *modelLog) record(r *sluice.Rule, cost, now int64) {
	at := max(now, l.newest)
	if r.Algorithm == sluice.SlidingCounter {
		at = now
	}
	l.events = append(l.events, modelEvent{at, cost})
	l.newest = at
	if r.Algorithm == sluice.GCRA {
		l.tat = max(l.tat, now) + cost*interval(r)
	}
}

// report sets st's Used, Remaining and ResetAfter from l at now, by r's
// algorithm's definitions.
func (l *modelLog) report(st *sluice.LimitStatus, r *sluice.Rule, now int64) {
	w := r.Window.Microseconds()
	switch r.Algorithm {
	case sluice.GCRA:
		iv, b, level := interval(r), burst(r), max(l.tat, now)-now
		st.Remaining = min(b, max(0, (b*iv-level)/iv))
		st.Used, st.ResetAfter = b-st.Remaining, time.Duration(level)*time.Microsecond
		return
	case sluice.SlidingCounter:
		st.Used = l.estimate(r, now)
		st.Remaining = max(0, r.Limit-st.Used)
		start := now / w * w
		switch {
		case l.sum(start-1, now) > 0:
			st.ResetAfter = time.Duration(start+2*w-now) * time.Microsecond
		case l.sum(start-w-1, start-1) > 0:
			st.ResetAfter = time.Duration(start+w-now) * time.Microsecond
		}
		return
	}
	st.Used = l.sum(now-w, now)
	st.Remaining = max(0, r.Limit-st.Used)
	for _, ev := range l.events {
		if ev.at > now-w {
			st.ResetAfter = max(st.ResetAfter, time.Duration(ev.at+w-now)*time.Microsecond)
		}
	}
}

// decide returns the decision the contract gives for c at time t.
func (m *model) decide(t time.Time, c propertyCall) sluice.Decision {
	now := t.UnixMicro()
	rules := c.p.Rules
	logs := make([]*modelLog, len(rules))
	limits := make([]sluice.LimitStatus, len(rules))
	allFit := true
	for i := range rules {
		r := &rules[i]
		k := c.p.Name + "\x00" + r.Name
		for _, a := range r.By {
			k += "\x00" + c.attrs[a]
		}
		if m.logs[k] == nil {
			m.logs[k] = &modelLog{newest: -1}
		}
		logs[i] = m.logs[k]
		room, gap := logs[i].fits(r, c.cost, now)
		st := &limits[i]
		st.Rule, st.Limit, st.Window, st.Fits = r.Name, r.Limit, r.Window, room && gap
		switch {
		case !room && !gap:
			// Both: the one that takes longer to clear.
			h := horizon(r, c.cost)
			roomWait := wait(now, h, func(t int64) bool { ok, _ := logs[i].fits(r, c.cost, t); return ok })
			gapWait := wait(now, h, func(t int64) bool { _, ok := logs[i].fits(r, c.cost, t); return ok })
			st.Cause = sluice.CauseLimit
			if gapWait > roomWait {
				st.Cause = sluice.CauseGap
			}
		case !room:
			st.Cause = sluice.CauseLimit
		case !gap:
			st.Cause = sluice.CauseGap
		}
		allFit = allFit && st.Fits
	}
	record := allFit || c.op == "record" || c.p.Penalize
	after := logs
	if c.op == "peek" {
		after = make([]*modelLog, len(logs))
		for i, l := range logs {
			after[i] = l.clone()
		}
	}
	for i := range rules {
		r := &rules[i]
		st := &limits[i]
		if record {
			after[i].record(r, c.cost, now)
		}
		after[i].report(st, r, now)
		if !allFit {
			l := after[i]
			if room, gap := l.fits(r, c.cost, now); !room || !gap {
				st.RetryAfter = time.Duration(wait(now, horizon(r, c.cost), func(t int64) bool {
					room, gap := l.fits(r, c.cost, t)
					return room && gap
				})) * time.Microsecond
			}
		}
	}
	return combine(limits)
}

// combine is the contract's combination of rule statuses: allowed when
// every rule fits, Remaining the tightest, RetryAfter the longest wait of
// any rule (every wait 0 when allowed), ResetAfter the latest, DeniedBy and
// Cause the first rule that does not fit.
func combine(limits []sluice.LimitStatus) sluice.Decision {
	d := sluice.Decision{Allowed: true}
	d.SetLimits(limits)
	for i, s := range limits {
		if i == 0 || s.Remaining < d.Remaining {
			d.Remaining = s.Remaining
		}
		d.ResetAfter = max(d.ResetAfter, s.ResetAfter)
		d.RetryAfter = max(d.RetryAfter, s.RetryAfter) // a rule that fit may wait after a penalty
		if !s.Fits && d.Allowed {
			d.Allowed, d.DeniedBy, d.Cause = false, s.Rule, s.Cause
		}
	}
	if d.Allowed {
		for i := range limits {
			limits[i].RetryAfter = 0
		}
	}
	return d
}
