package admin

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sluicerate/sluice/store"
)

// TestDeniedKeysBounded denies 100,000 distinct keys of one rule and
// checks that the table keeps its cap, that a heavy hitter among them is
// kept with a count within the sketch's error, and that the memory held
// stays small.
func TestDeniedKeysBounded(t *testing.T) {
	t.Parallel()
	d := newDeniedKeys()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rule := ruleKey{"api", "per-user"}
	const n = 100_000
	for i := range n {
		now := t0.Add(time.Duration(i) * time.Millisecond)
		d.add(rule, []string{fmt.Sprintf("user-%06d", i)}, false, now, time.Second, false)
		if i%10 == 0 {
			d.add(rule, []string{"heavy"}, false, now, time.Second, false)
		}
		if r, k := d.size(); k > deniedPerRule || r != 1 {
			t.Fatalf("after %d keys: %d rules, %d keys; the cap is %d", i+1, r, k, deniedPerRule)
		}
	}
	if _, k := d.size(); k != deniedPerRule {
		t.Errorf("%d keys held, want the cap %d", k, deniedPerRule)
	}
	rules := d.snapshot(t0.Add(n * time.Millisecond))
	if len(rules) != 1 || len(rules[0].Keys) != deniedPerRule || rules[0].Denials != n+n/10 {
		t.Fatalf("snapshot: %d rules; %+v", len(rules), rules)
	}
	top := rules[0].Keys[0]
	if top.Values[0] != "heavy" || top.Count-top.Error > n/10 || top.Count < n/10 {
		t.Errorf("top key %+v, want heavy with a count of at least %d and at most %d over", top, n/10, top.Error)
	}

	// Many rules: the number of tables is capped too.
	for i := range deniedRules * 2 {
		d.add(ruleKey{"p", fmt.Sprint("r", i)}, []string{strings.Repeat("x", 10_000)}, false, t0, time.Second, false)
	}
	if r, _ := d.size(); r != deniedRules {
		t.Errorf("%d rule tables, want the cap %d", r, deniedRules)
	}
	for _, r := range d.snapshot(t0) {
		if r.Policy != "p" {
			continue
		}
		for _, k := range r.Keys {
			if len(strings.Join(k.Values, "")) > deniedKeyBytes || !k.Truncated {
				t.Errorf("a 10,000-byte value is kept as %d bytes (truncated %v); the cap is %d", len(k.Values[0]), k.Truncated, deniedKeyBytes)
			}
		}
	}
}

// TestDeniedKeysMemory measures the memory the denied-keys table holds
// after 100,000 distinct denied keys in each of 5 rules, against the
// documented bound.
func TestDeniedKeysMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("measures memory over 2,000,000 denials")
	}
	before := heapInUse()
	d := newDeniedKeys()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const rules, n = 5, 100_000
	for r := range rules {
		rk := ruleKey{"api", fmt.Sprint("rule-", r)}
		for i := range n {
			d.add(rk, []string{fmt.Sprintf("203.0.113.%d", i%256), fmt.Sprintf("user-%06d", i)}, false, t0, time.Second, false)
		}
	}
	after := heapInUse()
	_, keys := d.size()
	held := int64(after) - int64(before)
	perKey := held / int64(keys)
	t.Logf("%d rules × %d distinct denied keys: %d keys held, %d bytes of heap (%d per key); bound %d rules × %d keys",
		rules, n, keys, held, perKey, deniedRules, deniedPerRule)
	if keys != rules*deniedPerRule {
		t.Errorf("%d keys held, want %d", keys, rules*deniedPerRule)
	}
	// 600 bytes a key is the documented bound's figure; allow for heap noise.
	if limit := int64(rules*deniedPerRule*600) + 256<<10; held > limit {
		t.Errorf("the table holds %d bytes, more than the %d its bound allows", held, limit)
	}
	_ = d.snapshot(t0)
}

// heapInUse returns the bytes of live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestDeniedKeyLetThrough: a key denied for 29 minutes whose check then
// fits (a runtime override raised its limit) shows no wait, while another
// key denied alike keeps its own; a peek changes nothing.
func TestDeniedKeyLetThrough(t *testing.T) {
	t.Parallel()
	d := newDeniedKeys()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	req := func(user string, fits, dry bool) *store.Request {
		return &store.Request{Policy: "api", DryRun: dry,
			Checks:  []store.Check{{Rule: "per-user", Values: []string{user}}},
			Results: []store.Result{{Fits: fits, RetryAfter: 29 * time.Minute}}}
	}
	d.observe(req("ann", false, false), t0, false)
	d.observe(req("bob", false, false), t0, false)
	d.observe(req("ann", true, true), t0.Add(time.Second), false) // a peek
	waits := func(now time.Time) map[string]int64 {
		out := map[string]int64{}
		for _, r := range d.snapshot(now) {
			for _, k := range r.Keys {
				out[k.Values[0]] = k.WaitMS
			}
		}
		return out
	}
	if got := waits(t0.Add(time.Second)); got["ann"] != (29*time.Minute - time.Second).Milliseconds() {
		t.Errorf("after a peek: waits %v, want ann's unchanged", got)
	}
	d.observe(req("ann", true, false), t0.Add(time.Second), false)
	got := waits(t0.Add(2 * time.Second))
	if got["ann"] != 0 || got["bob"] != (29*time.Minute-2*time.Second).Milliseconds() {
		t.Errorf("after ann was admitted: waits %v, want ann 0 and bob's 29m less 2s", got)
	}
}

// TestDeniedKeysCreditsPaid: a monthly quota past its limit whose credits
// paid for the request admitted it, so neither rule's key is counted as
// denied; the same quota with credits too low to pay is denied by both.
func TestDeniedKeysCreditsPaid(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	req := func(creditsFit bool) *store.Request {
		return &store.Request{Policy: "api",
			Checks: []store.Check{
				{Rule: "monthly", Algorithm: store.Periodic, Values: []string{"ann"}},
				{Rule: "overage", Algorithm: store.Credits, Covers: 1, Values: []string{"ann"}},
			},
			Results: []store.Result{{Fits: false, Cause: store.CauseLimit, RetryAfter: time.Hour}, {Fits: creditsFit, RetryAfter: time.Hour}}}
	}
	denied := func(d *deniedKeys) []string {
		var out []string
		for _, r := range d.snapshot(t0) {
			for range r.Keys {
				out = append(out, r.Rule)
			}
		}
		return out
	}
	d := newDeniedKeys()
	d.observe(req(true), t0, false)
	if got := denied(d); len(got) != 0 {
		t.Errorf("credits paid: denied keys of rules %v, want none", got)
	}
	d.observe(req(false), t0, false)
	if got := denied(d); len(got) != 2 {
		t.Errorf("credits too low: denied keys of rules %v, want monthly and overage", got)
	}
}
