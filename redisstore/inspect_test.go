package redisstore_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/storetest"
)

func TestInspect(t *testing.T) {
	server.Require(t)
	ctx := context.Background()
	s := openRueidis(t, redisstore.Config{Addrs: []string{server.Addr()}, Prefix: newPrefix()})
	p := &sluice.Policy{Name: "notify", Rules: []sluice.Rule{
		{Name: "global", Limit: 10, Window: time.Minute},
		{Name: "category", Limit: 3, Window: time.Minute, By: []string{"category"}},
	}}
	lim := sluice.NewLimiter(s, sluice.Config{Timeout: -1})
	attrs := map[string]string{"category": "errors"}
	before, _, err := s.Inspect(ctx, request(t, p, attrs, 1))
	if err != nil {
		t.Fatal(err)
	}
	if len(before) != 2 || len(before[0].Entries) != 0 || before[0].TTL != 0 {
		t.Fatalf("empty store: %+v", before)
	}
	for _, cost := range []int64{1, 2} {
		if _, err := lim.AllowN(ctx, p, attrs, cost); err != nil {
			t.Fatal(err)
		}
	}
	windows, now, err := s.Inspect(ctx, request(t, p, attrs, 1))
	if err != nil {
		t.Fatal(err)
	}
	keys := s.Keys(request(t, p, attrs, 1))
	for i, w := range windows {
		if w.Rule != p.Rules[i].Name || w.Key != keys[i] {
			t.Errorf("window %d = %s %s, want %s %s", i, w.Rule, w.Key, p.Rules[i].Name, keys[i])
		}
		if len(w.Entries) != 2 || w.Entries[0].Cost != 1 || w.Entries[1].Cost != 2 {
			t.Errorf("window %d entries = %+v, want costs 1 and 2", i, w.Entries)
		}
		// The key expires a window after its last write, rounded up to
		// a whole millisecond of Redis's clock.
		if w.TTL <= 0 || w.TTL > time.Minute+time.Millisecond {
			t.Errorf("window %d TTL = %v, want (0, 1m1ms]", i, w.TTL)
		}
		for _, e := range w.Entries {
			if age := now.Sub(e.Time); age < 0 || age > 10*time.Second {
				t.Errorf("entry age %v", age)
			}
		}
	}
	if _, err := sluice.Resolve(p, nil, 1); err == nil {
		t.Error("resolving without the category attribute succeeded")
	}
}

func TestPolicyPatternAndInspectKey(t *testing.T) {
	server.Require(t)
	ctx := context.Background()
	prefix := newPrefix()
	s := openRueidis(t, redisstore.Config{Addrs: []string{server.Addr()}, Prefix: prefix})
	lim := sluice.NewLimiter(s, sluice.Config{Timeout: -1})
	notify := &sluice.Policy{Name: "notify", Rules: []sluice.Rule{
		{Name: "global", Limit: 10, Window: time.Minute},
		{Name: "category", Limit: 3, Window: time.Minute, By: []string{"category"}},
	}}
	perUser := &sluice.Policy{Name: "notify2", Rules: []sluice.Rule{
		{Name: "per user", Limit: 3, Window: time.Minute, By: []string{"user"}},
	}}
	for _, c := range []string{"errors", "errors", "info", "a:b{c}"} {
		if _, err := lim.Allow(ctx, notify, map[string]string{"category": c}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := lim.Allow(ctx, perUser, map[string]string{"user": "errors"}); err != nil {
		t.Fatal(err)
	}
	find := func(p string, values ...string) map[string]redisstore.Window {
		t.Helper()
		pattern, match := s.PolicyPattern(p, values)
		reply, err := server.Do("KEYS", pattern)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]redisstore.Window{}
		for _, k := range strings.Split(reply, "\n") {
			if k == "" || !match(k) {
				continue
			}
			w, _, err := s.InspectKey(ctx, k)
			if err != nil {
				t.Fatal(err)
			}
			out[w.Rule+" "+strconv.Itoa(len(w.Entries))] = w
		}
		return out
	}
	got := find("notify", "errors")
	if len(got) != 2 || got["global 4"].Key == "" || got["category 2"].Key == "" {
		t.Errorf("notify errors: %v, want the global window (4 entries) and the errors window (2)", got)
	}
	got = find("notify", "a:b{c}")
	if len(got) != 2 || got["category 1"].Key == "" {
		t.Errorf("notify a:b{c}: %v", got)
	}
	got = find("notify2", "errors")
	if len(got) != 1 || got["per user 1"].Key == "" || got["per user 1"].TTL <= 0 {
		t.Errorf("notify2 errors: %v, want the per user window", got)
	}
	if got := find("notify2", "nobody"); len(got) != 0 {
		t.Errorf("notify2 nobody: %v, want none", got)
	}
}

// TestInspectAlgorithms checks that Inspect reads a GCRA bucket and a
// sliding counter as their state, beside a log's entries, on the clock of
// a store that takes its time from the caller.
func TestInspectAlgorithms(t *testing.T) {
	server.Require(t)
	ctx := context.Background()
	now := time.UnixMicro(1_800_000_030_000_000) // 30 s into a minute
	s := openRueidis(t, redisstore.Config{Addrs: []string{server.Addr()}, Prefix: newPrefix(), Clock: func() time.Time { return now }})
	p := &sluice.Policy{Name: "mixed", Rules: []sluice.Rule{
		{Name: "log", Limit: 10, Window: time.Minute},
		{Name: "bucket", Limit: 10, Window: time.Second, Algorithm: sluice.GCRA},
		{Name: "counter", Limit: 10, Window: time.Minute, Algorithm: sluice.SlidingCounter},
	}}
	lim := sluice.NewLimiter(s, sluice.Config{Timeout: -1})
	if d, err := lim.AllowN(ctx, p, nil, 3); err != nil || !d.Allowed {
		t.Fatalf("AllowN: %+v, %v", d, err)
	}
	windows, at, err := s.Inspect(ctx, request(t, p, nil, 1))
	if err != nil {
		t.Fatal(err)
	}
	if !at.Equal(now) {
		t.Errorf("Inspect's time %v, want the store's clock, %v", at, now)
	}
	if len(windows[0].Entries) != 1 || windows[0].Entries[0].Cost != 3 || windows[0].State != nil {
		t.Errorf("log: %+v, want one entry of cost 3", windows[0])
	}
	// GCRA: three intervals of 100ms past now.
	if want := now.Add(300 * time.Millisecond).UnixMicro(); len(windows[1].State) != 1 || windows[1].State[0] != want {
		t.Errorf("gcra state %v, want [%d]", windows[1].State, want)
	}
	// The counter: minute 30,000,000 (of the Unix epoch), none before, 3 now.
	if want := []int64{now.Unix() / 60, 0, 3}; len(windows[2].State) != 3 || windows[2].State[0] != want[0] || windows[2].State[2] != 3 {
		t.Errorf("counter state %v, want %v", windows[2].State, want)
	}
}

// TestInspectSettledToZero: log entries that leases settled to 0 stay in
// the window, each its own entry of cost 0 at its time, among the entries
// written after them (the conformance suite's LeaseSettleZero cases check
// the decisions they make).
func TestInspectSettledToZero(t *testing.T) {
	server.Require(t)
	ctx := context.Background()
	clock := storetest.NewClock(storetest.T0)
	s := openRueidis(t, redisstore.Config{Addrs: []string{server.Addr()}, Prefix: newPrefix(), Clock: clock.Now})
	p := &sluice.Policy{Name: "settled", Rules: []sluice.Rule{{Name: "log", Limit: 10, Window: time.Minute}}}
	lim := sluice.NewLimiter(s, sluice.Config{Timeout: -1})
	var leases []*sluice.Lease
	for i, cost := range []int64{3, 2, 1} {
		clock.Set(storetest.T0.Add(time.Duration(i) * 10 * time.Second))
		x, d, err := lim.Acquire(ctx, p, nil, cost)
		if err != nil || !d.Allowed {
			t.Fatalf("Acquire(%d): %+v, %v", cost, d, err)
		}
		leases = append(leases, x)
	}
	for _, x := range leases[:2] {
		if held, err := x.Settle(ctx, 0); err != nil || !held {
			t.Fatalf("Settle(0): %v, %v", held, err)
		}
	}
	windows, _, err := s.Inspect(ctx, request(t, p, nil, 1))
	if err != nil {
		t.Fatal(err)
	}
	want := []redisstore.Entry{{Time: storetest.T0, Cost: 0}, {Time: storetest.T0.Add(10 * time.Second), Cost: 0},
		{Time: storetest.T0.Add(20 * time.Second), Cost: 1}}
	got := windows[0].Entries
	if len(got) != len(want) {
		t.Fatalf("entries %+v, want %+v", got, want)
	}
	for i := range want {
		if !got[i].Time.Equal(want[i].Time) || got[i].Cost != want[i].Cost {
			t.Errorf("entry %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}
