package redisstore_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/resolve"
	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/store"
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
	if _, err := resolve.Request(p, nil, 1); err == nil {
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

// TestInspectLeases checks that Inspect reads a concurrency rule's window as
// the leases alive in it (each lease's token and expiry, on the store's
// clock), not as a log's entries: released leases leave it, expired ones
// are not among them, the log rule beside it reads as before; and that
// InspectKey knows the window by its name and refuses a lease's record. In
// both layouts.
func TestInspectLeases(t *testing.T) {
	for _, layout := range []redisstore.Layout{redisstore.Layout2, redisstore.Layout1} {
		t.Run(fmt.Sprintf("layout %d", layout), func(t *testing.T) {
			ctx := context.Background()
			clock := storetest.NewClock(storetest.T0)
			prefix := newPrefix()
			s := openRueidis(t, redisstore.Config{Prefix: prefix, Clock: clock.Now, Layout: layout})
			lim := sluice.NewLimiter(s, sluice.Config{Timeout: -1})
			p := &sluice.Policy{Name: "llm", Rules: []sluice.Rule{
				{Name: "tokens", By: []string{"user"}, Limit: 1000, Window: time.Minute},
				{Name: "in-flight", By: []string{"user"}, Concurrency: 3, Lease: 30 * time.Second},
			}}
			attrs := map[string]string{"user": "ann"}
			t0 := clock.Now()
			var leases []*sluice.Lease
			for i := range 3 {
				x, d, err := lim.Acquire(ctx, p, attrs, 10*int64(i+1))
				if err != nil || !d.Allowed {
					t.Fatalf("acquire %d: %+v, %v", i, d, err)
				}
				leases = append(leases, x)
				clock.Advance(time.Second)
			}
			token := func(x *sluice.Lease) string {
				sum := sha256.Sum256([]byte(x.ID()))
				return hex.EncodeToString(sum[:16])
			}
			// check inspects ann's windows and wants the leases named alive,
			// expiring 30 s after they were taken (lease i at t0 + i s).
			check := func(what string, alive ...int) {
				t.Helper()
				ws, now, err := s.Inspect(ctx, request(t, p, attrs, 1))
				if err != nil {
					t.Fatal(err)
				}
				if !now.Equal(clock.Now()) {
					t.Errorf("%s: read at %v, want the store's clock %v", what, now, clock.Now())
				}
				if len(ws) != 2 || ws[0].Algorithm != store.Log || len(ws[0].Entries) != 3 || ws[0].Entries[2].Cost != 30 || ws[0].Leases != nil {
					t.Errorf("%s: the tokens rule reads %+v, want its log of 3 entries, the last of cost 30", what, ws[0])
				}
				w := ws[1]
				if w.Rule != "in-flight" || w.Algorithm != store.Concurrency || w.Entries != nil || w.State != nil || w.TTL <= 0 {
					t.Errorf("%s: the in-flight window reads %+v, want a concurrency rule's leases and a TTL", what, w)
				}
				var want []redisstore.Lease
				for _, i := range alive {
					want = append(want, redisstore.Lease{Token: token(leases[i]), Expires: t0.Add(time.Duration(i)*time.Second + 30*time.Second)})
				}
				if !slices.EqualFunc(w.Leases, want, func(a, b redisstore.Lease) bool { return a.Token == b.Token && a.Expires.Equal(b.Expires) }) {
					t.Errorf("%s: leases %+v, want %+v", what, w.Leases, want)
				}
				// InspectKey reads the key alone the same way, by its name.
				k, _, err := s.InspectKey(ctx, w.Key)
				if err != nil || k.Rule != "in-flight" || k.Algorithm != store.Concurrency || len(k.Leases) != len(want) || k.Entries != nil {
					t.Errorf("%s: InspectKey(%s) = %+v, %v; want the in-flight rule's %d leases", what, w.Key, k, err, len(want))
				}
			}
			check("three taken", 0, 1, 2)
			if held, err := leases[1].Release(ctx); err != nil || !held {
				t.Fatalf("release: %v, %v", held, err)
			}
			check("the second released", 0, 2)
			// At t0+30s the first lease's expiry has come: it is no longer
			// alive, though its token stays in the key until the rule is
			// next decided.
			clock.Set(t0.Add(30 * time.Second))
			check("the first expired", 2)
			clock.Set(t0.Add(32 * time.Second))
			check("all gone")

			// The lease's record is not a window: the policy's pattern does
			// not match it, and InspectKey says what it is.
			_, match := s.PolicyPattern("llm", []string{"ann"})
			reply, err := server.Do("KEYS", prefix+":*")
			if err != nil {
				t.Fatal(err)
			}
			var records, windows int
			for _, k := range strings.Split(reply, "\n") {
				switch {
				case k == "":
				case strings.Contains(k, "2e:") || strings.Contains(k, ":@lease:"):
					records++
					if match(k) {
						t.Errorf("the policy's pattern matches the lease record %s", k)
					}
					if _, _, err := s.InspectKey(ctx, k); err == nil || !strings.Contains(err.Error(), "record of a lease") {
						t.Errorf("InspectKey(%s) = %v, want an error naming a lease's record", k, err)
					}
				case match(k):
					windows++
				}
			}
			if records != 2 || windows != 2 { // the first and third leases' records are kept until they expire
				t.Errorf("found %d lease records and %d windows in %q, want 2 and 2", records, windows, reply)
			}
		})
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

// TestInspectSlices: the slices leased from a budgeted log and GCRA
// bucket show in Inspect (units and when each ends, on the store's
// clock), their key matches PolicyPattern, and InspectKey reads it as
// its window, slices and all.
func TestInspectSlices(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(storetest.T0)
	s := openRueidis(t, redisstore.Config{Prefix: newPrefix(), Clock: clock.Now})
	for _, alg := range []sluice.Algorithm{sluice.Log, sluice.GCRA} {
		p := &sluice.Policy{Name: "notify" + alg.String(), Rules: []sluice.Rule{
			{Name: "global", Limit: 100, Window: time.Minute, Algorithm: alg, Budget: 2 * time.Second},
			{Name: "category", Limit: 50, Window: time.Minute, By: []string{"category"}},
		}}
		attrs := map[string]string{"category": "errors"}
		t0 := clock.Now()
		req := request(t, p, attrs, 1)
		b := &store.BudgetRequest{Asks: []store.SliceAsk{{Check: 0, Want: 7, ID: "one"}}}
		if err := s.Budget(ctx, req, b); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Second)
		req = request(t, p, attrs, 1)
		b2 := &store.BudgetRequest{Asks: []store.SliceAsk{{Check: 0, Want: 5, ID: "two"}}}
		if err := s.Budget(ctx, req, b2); err != nil {
			t.Fatal(err)
		}
		windows, now, err := s.Inspect(ctx, request(t, p, attrs, 1))
		if err != nil {
			t.Fatal(err)
		}
		if !now.Equal(clock.Now()) {
			t.Errorf("%v: now %v, want the store's clock %v", alg, now, clock.Now())
		}
		want := []redisstore.Slice{{Units: 7, At: t0.Add(2 * time.Second)}, {Units: 5, At: t0.Add(3 * time.Second)}}
		w := windows[0]
		if !slices.EqualFunc(w.Slices, want, sameSlice) || w.SlicesKey == "" || w.SlicesKey == w.Key {
			t.Errorf("%v: global's slices %+v at %q, want %+v at a key of their own", alg, w.Slices, w.SlicesKey, want)
		}
		if windows[1].Slices != nil || windows[1].SlicesKey != "" {
			t.Errorf("%v: the unbudgeted rule shows slices %+v at %q", alg, windows[1].Slices, windows[1].SlicesKey)
		}

		pattern, match := s.PolicyPattern(p.Name, []string{"errors"})
		if !match(w.SlicesKey) || !strings.HasPrefix(w.SlicesKey, strings.TrimSuffix(strings.ReplaceAll(pattern, `\`, ""), "*")) {
			t.Errorf("%v: the slices key %q is not matched by PolicyPattern %q", alg, w.SlicesKey, pattern)
		}
		got, _, err := s.InspectKey(ctx, w.SlicesKey)
		if err != nil {
			t.Fatal(err)
		}
		if got.Key != w.Key || got.Rule != "global" || !slices.EqualFunc(got.Slices, want, sameSlice) {
			t.Errorf("%v: InspectKey(%q) = key %q rule %q slices %+v, want key %q rule global slices %+v",
				alg, w.SlicesKey, got.Key, got.Rule, got.Slices, w.Key, want)
		}
		// A slice given back counts what was used, stamped when it was
		// given back (the log), or no longer holds (GCRA).
		g := b.Grants[0]
		back := &store.BudgetRequest{Returns: []store.SliceReturn{{Check: req.Checks[0], Shared: req.Shared,
			ID: "one", Start: g.Start, End: g.End, Granted: g.Granted, Used: 3}}}
		if err := s.Budget(ctx, &store.Request{Policy: p.Name}, back); err != nil {
			t.Fatal(err)
		}
		windows, _, err = s.Inspect(ctx, request(t, p, attrs, 1))
		if err != nil {
			t.Fatal(err)
		}
		after := []redisstore.Slice{{Units: 3, At: t0.Add(time.Second)}, want[1]}
		if alg == sluice.GCRA {
			after = want[1:]
		}
		if !slices.EqualFunc(windows[0].Slices, after, sameSlice) {
			t.Errorf("%v: slices after a return of 3 used of 7: %+v, want %+v", alg, windows[0].Slices, after)
		}
	}
}

// sameSlice reports whether a and b are the same units at the same time.
func sameSlice(a, b redisstore.Slice) bool { return a.Units == b.Units && a.At.Equal(b.At) }
