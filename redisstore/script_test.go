package redisstore_test

import (
	"context"
	"errors"
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

// Focused tests of decide.lua on the package's server, over each client.

func forEachBackend(t *testing.T, f func(t *testing.T, b backend)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f(t, b)
		})
	}
}

// request returns the store request of cost units of p for attrs.
func request(t testing.TB, p *sluice.Policy, attrs map[string]string, cost int64) *store.Request {
	t.Helper()
	req, err := resolve.Request(p, attrs, cost)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// direct returns a Limiter that calls s with no deadline or breaker: the
// store's own answers, combined into decisions.
func direct(s store.Store) *sluice.Limiter {
	return sluice.NewLimiter(s, sluice.Config{Timeout: -1, Breaker: sluice.Breaker{Failures: -1}})
}

// decideOn decides req on s and fails the test on error.
func decideOn(t testing.TB, s store.Store, req *store.Request) sluice.Decision {
	t.Helper()
	d, err := direct(s).Decide(context.Background(), req)
	if err != nil {
		t.Fatalf("Decide(%s, %+v): %v", req.Policy, req.Checks, err)
	}
	return d
}

func decide(t *testing.T, s *redisstore.Store, p *sluice.Policy, attrs map[string]string, cost int64, mode store.Mode) sluice.Decision {
	t.Helper()
	req := request(t, p, attrs, cost)
	req.Mode = mode
	return decideOn(t, s, req)
}

// peek decides a request as a dry run: the decision Allow would give,
// recording nothing.
func peek(t *testing.T, s *redisstore.Store, p *sluice.Policy, attrs map[string]string, cost int64) sluice.Decision {
	t.Helper()
	req := request(t, p, attrs, cost)
	req.DryRun = true
	return decideOn(t, s, req)
}

func keysOf(t *testing.T, s *redisstore.Store, p *sluice.Policy, attrs map[string]string) []string {
	t.Helper()
	return s.Keys(request(t, p, attrs, 1))
}

func TestOneEntryPerMicrosecond(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		clock := storetest.NewClock(storetest.T0)
		s := b.open(t, redisstore.Config{Prefix: newPrefix(), Clock: clock.Now})
		p := &sluice.Policy{Name: "burst", Rules: []sluice.Rule{{Name: "r", Limit: 1000, Window: time.Minute}}}
		for i := range 1000 {
			if d := decide(t, s, p, nil, 1, store.ModeAllow); !d.Allowed || d.Limits()[0].Used != int64(i+1) {
				t.Fatalf("event %d: allowed %v used %d, want allowed with used %d", i+1, d.Allowed, d.Limits()[0].Used, i+1)
			}
		}
		// 1,000 events at one microsecond are one entry of cost 1,000.
		es := entries(t, admin(t), keysOf(t, s, p, nil)[0])
		if len(es) != 1 || es[0].Member != "1000:1000" || es[0].Score != storetest.T0.UnixMicro() {
			t.Fatalf("the window holds %+v, want one entry 1000:1000 at %d µs", es, storetest.T0.UnixMicro())
		}
		if d := decide(t, s, p, nil, 1, store.ModeAllow); d.Allowed || d.RetryAfter != time.Minute {
			t.Fatalf("1001st: allowed %v retry %v, want denied for 1m", d.Allowed, d.RetryAfter)
		}
	})
}

func TestCostIsOneEntry(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		clock := storetest.NewClock(storetest.T0)
		s := b.open(t, redisstore.Config{Prefix: newPrefix(), Clock: clock.Now})
		p := &sluice.Policy{Name: "bytes", Rules: []sluice.Rule{{Name: "r", Limit: 1 << 40, Window: time.Minute}}}
		for _, cost := range []int64{1 << 30, 1 << 39, 1} {
			decide(t, s, p, nil, cost, store.ModeAllow)
			clock.Advance(time.Second)
		}
		d := peek(t, s, p, nil, 1<<39)
		if want := int64(1<<30 + 1<<39 + 1); d.Limits()[0].Used != want || d.Allowed {
			t.Errorf("peek: used %d allowed %v, want used %d and denied", d.Limits()[0].Used, d.Allowed, want)
		}
		es := entries(t, admin(t), keysOf(t, s, p, nil)[0])
		want := []string{"1073741824:1073741824", "550829555712:549755813888", "550829555713"}
		var got []string
		for _, e := range es {
			got = append(got, e.Member)
		}
		if !slices.Equal(got, want) {
			t.Errorf("members %q, want %q: one entry per request", got, want)
		}
	})
}

// snapshot is the state of some keys: entries and remaining lifetimes.
type snapshot map[string][]entry

func take(t *testing.T, ks []string) snapshot {
	t.Helper()
	c := admin(t)
	out := snapshot{}
	for _, k := range ks {
		out[k] = entries(t, c, k)
	}
	return out
}

func TestDeniedChangesNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		clock := storetest.NewClock(storetest.T0)
		s := b.open(t, redisstore.Config{Prefix: newPrefix(), Clock: clock.Now})
		p := &sluice.Policy{Name: "notify", Rules: []sluice.Rule{
			{Name: "global", Limit: 10, Window: time.Minute},
			{Name: "category", Limit: 2, Window: 10 * time.Second, By: []string{"category"}},
			{Name: "gap", Limit: 100, Window: time.Second, MinGap: 500 * time.Millisecond, By: []string{"category"}},
		}}
		errs := map[string]string{"category": "errors"}
		decide(t, s, p, errs, 1, store.ModeAllow)
		clock.Advance(time.Second)
		decide(t, s, p, errs, 1, store.ModeAllow)
		clock.Advance(9500 * time.Millisecond) // the first entry left "category" and "gap"
		info := map[string]string{"category": "info"}
		decide(t, s, p, info, 1, store.ModeAllow)
		clock.Advance(100 * time.Millisecond)

		ks := append(keysOf(t, s, p, errs), keysOf(t, s, p, info)[1:]...)
		c := admin(t)
		// Stretch every key's lifetime far beyond what the store would set,
		// so that a refresh would show.
		for _, k := range ks {
			if err := c.Do(ctx, c.B().Pexpire().Key(k).Milliseconds(int64(24*time.Hour/time.Millisecond)).Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}
		before := take(t, ks)

		// "global" fits, "category" is full after one more, and "gap" denies
		// a second one for 400ms: denials in each way.
		if d := decide(t, s, p, errs, 2, store.ModeAllow); d.Allowed || d.DeniedBy != "category" {
			t.Fatalf("cost 2: %+v, want denied by category", d)
		}
		if d := decide(t, s, p, info, 1, store.ModeAllow); d.Allowed || d.DeniedBy != "gap" || d.RetryAfter != 400*time.Millisecond {
			t.Fatalf("info again: %+v, want denied by gap for 400ms", d)
		}
		peek(t, s, p, errs, 1)
		peek(t, s, p, errs, 2)

		if after := take(t, ks); !equalSnapshots(before, after) {
			t.Errorf("denials changed the windows:\nbefore %v\nafter  %v", before, after)
		}
		got, err := ttls(ctx, c, s2prefix(ks[0]))
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range ks {
			if got[k] < 23*time.Hour {
				t.Errorf("key %s has TTL %v after denials; its expiry was refreshed", k, got[k])
			}
		}
	})
}

func equalSnapshots(a, b snapshot) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// s2prefix returns the prefix of a key.
func s2prefix(key string) string { return key[:strings.IndexByte(key, ':')] }

func TestEveryWrittenKeyExpires(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		clock := storetest.NewClock(storetest.T0)
		prefix := newPrefix()
		s := b.open(t, redisstore.Config{Prefix: prefix, Clock: clock.Now})
		p := &sluice.Policy{Name: "ttl", Rules: []sluice.Rule{
			{Name: "a", Limit: 5, Window: 90 * time.Second},
			{Name: "b", Limit: 5, Window: 40 * time.Second, MinGap: 20 * time.Second, By: []string{"u"}},
			{Name: "c", Limit: 5, Window: 1500 * time.Microsecond, By: []string{"u", "v"}},
		}}
		want := map[string]time.Duration{}
		for i, k := range keysOf(t, s, p, map[string]string{"u": "1", "v": "2"}) {
			want[k] = p.Rules[i].Window + p.Rules[i].MinGap
		}
		want[keysOf(t, s, p, map[string]string{"u": "1", "v": "2"})[2]] = 2 * time.Millisecond // 1.5ms rounded up
		decide(t, s, p, map[string]string{"u": "1", "v": "2"}, 1, store.ModeRecord)
		got, err := ttls(ctx, admin(t), prefix)
		if err != nil {
			t.Fatal(err)
		}
		for k, ttl := range got {
			w, ok := want[k]
			if !ok {
				t.Errorf("unexpected key %s", k)
				continue
			}
			// Allow for the time between the write and PTTL, and for
			// the short key having expired already.
			if ttl > w || ttl < w-5*time.Second && w > 5*time.Second {
				t.Errorf("key %s: TTL %v, want at most %v and close to it", k, ttl, w)
			}
		}
		for k := range want {
			if _, ok := got[k]; !ok && want[k] > time.Second {
				t.Errorf("key %s missing; have %s", k, keyNames(got))
			}
		}
	})
}

func TestNoScriptReloads(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		clock := storetest.NewClock(storetest.T0)
		s := b.open(t, redisstore.Config{Prefix: newPrefix(), Clock: clock.Now})
		c := admin(t)
		p := &sluice.Policy{Name: "flush", Rules: []sluice.Rule{{Name: "r", Limit: 3, Window: time.Minute}}}
		for i := range 3 {
			// SCRIPT FLUSH before each decision: the store must load the
			// script again and count each event once.
			if err := c.Do(ctx, c.B().ScriptFlush().Build()).Error(); err != nil {
				t.Fatal(err)
			}
			d := decide(t, s, p, nil, 1, store.ModeAllow)
			if !d.Allowed || d.Limits()[0].Used != int64(i+1) {
				t.Fatalf("after SCRIPT FLUSH #%d: allowed %v used %d, want allowed with used %d", i+1, d.Allowed, d.Limits()[0].Used, i+1)
			}
		}
		if n := units(entries(t, c, keysOf(t, s, p, nil)[0])); n != 3 {
			t.Errorf("window holds %d units, want 3", n)
		}
	})
}

func TestRedisClock(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t, redisstore.Config{Prefix: newPrefix()})
		p := &sluice.Policy{Name: "time", Rules: []sluice.Rule{{Name: "r", Limit: 2, Window: time.Hour}}}
		before := time.Now().UnixMicro()
		d := decide(t, s, p, nil, 1, store.ModeAllow)
		after := time.Now().UnixMicro()
		if !d.Allowed || d.ResetAfter != time.Hour {
			t.Fatalf("first: %+v, want allowed with ResetAfter 1h", d)
		}
		es := entries(t, admin(t), keysOf(t, s, p, nil)[0])
		if len(es) != 1 || es[0].Score < before || es[0].Score > after {
			t.Errorf("entries %v, want one between %d and %d (Redis's TIME)", es, before, after)
		}
	})
}

func TestClosed(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t, redisstore.Config{Prefix: newPrefix()})
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		p := &sluice.Policy{Name: "closed", Rules: []sluice.Rule{{Name: "r", Limit: 1, Window: time.Minute}}}
		_, err := direct(s).Decide(context.Background(), request(t, p, nil, 1))
		if !errors.Is(err, sluice.ErrStoreClosed) {
			t.Errorf("Decide after Close: %v, want ErrStoreClosed", err)
		}
	})
}

func TestKeysOnServer(t *testing.T) {
	clock := storetest.NewClock(storetest.T0)
	s := openRueidis(t, redisstore.Config{Prefix: "keys-" + newPrefix(), Clock: clock.Now})
	p := &sluice.Policy{Name: "notify", Rules: []sluice.Rule{
		{Name: "global", Limit: 10, Window: time.Minute},
		{Name: "category", Limit: 3, Window: time.Minute, By: []string{"category"}},
	}}
	attrs := map[string]string{"category": "a:b{c}"}
	ks := keysOf(t, s, p, attrs)
	prefix := s2prefix(ks[0])
	want := []string{prefix + ":{notify}2l:global", prefix + ":{notify}2l:category:a%3Ab%7Bc%7D"}
	if !slices.Equal(ks, want) {
		t.Fatalf("Keys = %q, want %q", ks, want)
	}
	decide(t, s, p, attrs, 1, store.ModeAllow)
	got, err := ttls(context.Background(), admin(t), prefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[want[0]] <= 0 || got[want[1]] <= 0 {
		t.Errorf("keys on the server: %v, want %q", got, want)
	}
}

func TestBadConfig(t *testing.T) {
	server.Require(t)
	for _, prefix := range []string{"a{b", "}", "{x}"} {
		if _, err := redisstore.New(redisstore.Config{Addrs: []string{server.Addr()}, Prefix: prefix}); err == nil {
			t.Errorf("New with prefix %q: no error", prefix)
		}
	}
	if _, err := redisstore.NewFromClient(nil, redisstore.Config{}); err == nil {
		t.Error("NewFromClient(nil): no error")
	}
}

// TestGCRAKeyHoldsTAT checks what a GCRA bucket's key holds after each
// kind of write (the key absent, holding a TAT ahead of now, holding one
// now has passed): the exact TAT, as an integer, expiring when it does.
func TestGCRAKeyHoldsTAT(t *testing.T) {
	ctx := context.Background()
	c := admin(t)
	clock := storetest.NewClock(storetest.T0)
	s := openRueidis(t, redisstore.Config{Prefix: newPrefix(), Clock: clock.Now})
	p := &sluice.Policy{Name: "tat", Rules: []sluice.Rule{
		{Name: "bucket", Limit: 10, Window: 10 * time.Second, Algorithm: sluice.GCRA, Burst: 3, By: []string{"u"}},
	}}
	attrs := map[string]string{"u": "1"}
	key := keysOf(t, s, p, attrs)[0]
	check := func(step string, tat time.Time) {
		t.Helper()
		got, err := c.Do(ctx, c.B().Get().Key(key).Build()).ToString()
		if err != nil {
			t.Fatalf("%s: GET %s: %v", step, key, err)
		}
		if want := strconv.FormatInt(tat.UnixMicro(), 10); got != want {
			t.Errorf("%s: the key holds %s, want the TAT %s", step, got, want)
		}
		ms, err := c.Do(ctx, c.B().Pttl().Key(key).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		// The store's own clock: the key expires the TAT's distance from
		// now after the write, in whole ms rounded up.
		if want := tat.Sub(clock.Now()).Milliseconds(); ms > want || ms < want-2000 {
			t.Errorf("%s: PTTL %d ms, want at most %d and close to it", step, ms, want)
		}
	}
	for i, step := range []string{"absent", "ahead of now"} {
		if d := decide(t, s, p, attrs, 1, store.ModeAllow); !d.Allowed {
			t.Fatalf("%s: %+v", step, d)
		}
		check(step, storetest.T0.Add(time.Duration(i+1)*time.Second))
	}
	clock.Advance(90 * time.Second) // the TAT is behind now; the key is still there
	if d := decide(t, s, p, attrs, 2, store.ModeAllow); !d.Allowed {
		t.Fatalf("behind now: %+v", d)
	}
	check("behind now", clock.Now().Add(2*time.Second))
}
