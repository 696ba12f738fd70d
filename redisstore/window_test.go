package redisstore_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/store"
	"github.com/sluicerate/sluice/storetest"
)

// Tests of the window layout (window.lua): what a key holds after the
// scripts ran, beyond the decisions the conformance suite checks.

// checkEntries fails the test unless key holds the entries want, each
// written as "<time since T0> <member>".
func checkEntries(t *testing.T, key string, want ...string) {
	t.Helper()
	var got []string
	for _, e := range entries(t, admin(t), key) {
		got = append(got, fmt.Sprintf("%v %s", time.Duration(e.Score-storetest.T0.UnixMicro())*time.Microsecond, e.Member))
	}
	if !slices.Equal(got, want) {
		t.Errorf("key %s holds %q, want %q", key, got, want)
	}
}

func TestBatchReadsItsOwnWrites(t *testing.T) {
	clock := storetest.NewClock(storetest.T0)
	s := openRueidis(t, redisstore.Config{Prefix: newPrefix(), Clock: clock.Now})
	p := &sluice.Policy{Name: "batch", Rules: []sluice.Rule{{Name: "r", Limit: 5, Window: time.Minute}}}
	old, fresh := keysOf(t, s, p, nil)[0], keysOf(t, s, &sluice.Policy{Name: "fresh", Rules: p.Rules}, nil)[0]
	decide(t, s, p, nil, 1, store.ModeAllow)
	clock.Advance(time.Second)
	decide(t, s, p, nil, 1, store.ModeAllow)

	now := storetest.T0.Add(2 * time.Second).UnixMicro()
	req := func(cost, limit int64) *store.Request {
		return &store.Request{Policy: "batch", Checks: []store.Check{{Rule: "r", Limit: limit, Window: time.Minute, Cost: cost}}}
	}
	reqs := []*store.Request{req(1, 5), req(1, 5), req(3, 5), req(1, 2), req(1, 2), req(1, 2)}
	errs := redisstore.DecideBatch(admin(t), [][]string{{old}, {old}, {old}, {fresh}, {fresh}, {fresh}}, reqs, now)
	// Per request: cause, used, remaining, retry-after and reset-after.
	want := []store.Result{
		result(store.CauseNone, 3, 2, 0, time.Minute), // a new entry at T0+2s
		result(store.CauseNone, 4, 1, 0, time.Minute), // into that entry, in the batch's state
		// Cost 3 needs 2 freed: the entries at T0 and T0+1s, read after
		// the grown entry was written.
		result(store.CauseLimit, 4, 1, time.Minute-time.Second, time.Minute),
		result(store.CauseNone, 1, 1, 0, time.Minute), // a new key
		result(store.CauseNone, 2, 0, 0, time.Minute), // into its one entry, which is the oldest counted too
		result(store.CauseLimit, 2, 0, time.Minute, time.Minute),
	}
	for i := range want {
		if errs[i] != nil || reqs[i].Results[0] != want[i] {
			t.Errorf("request %d: %+v, %v; want %+v", i+1, reqs[i].Results, errs[i], want[i])
		}
	}
	checkEntries(t, old, "0s 1", "1s 2", "2s 4:2")
	checkEntries(t, fresh, "2s 2:2")
}

func TestRebase(t *testing.T) {
	clock := storetest.NewClock(storetest.T0)
	s := openRueidis(t, redisstore.Config{Prefix: newPrefix(), Clock: clock.Now})
	p := &sluice.Policy{Name: "long", Rules: []sluice.Rule{{Name: "r", Limit: 100, Window: time.Minute}}}
	key := keysOf(t, s, p, nil)[0]
	// One event every 20 s for 40 minutes: the key never empties, and its
	// epoch must move twice to keep scores under 2^30 µs (about 18 min).
	for i := range 120 {
		d := decide(t, s, p, nil, 1, store.ModeAllow)
		if want := int64(min(i+1, 3)); !d.Allowed || d.Limits()[0].Used != want {
			t.Fatalf("event %d: allowed %v used %d, want used %d", i+1, d.Allowed, d.Limits()[0].Used, want)
		}
		zs, err := admin(t).Do(context.Background(), admin(t).B().Zrange().Key(key).Min("0").Max("-2").Withscores().Build()).AsZScores()
		if err != nil {
			t.Fatal(err)
		}
		for _, z := range zs {
			if z.Score < 0 || z.Score >= 1<<30 {
				t.Fatalf("event %d: entry %q scored %v µs, not in [0, 2^30)", i+1, z.Member, z.Score)
			}
		}
		clock.Advance(20 * time.Second)
	}
	es := entries(t, admin(t), key)
	last := storetest.T0.Add(119 * 20 * time.Second).UnixMicro()
	if es[len(es)-1].Score != last || es[len(es)-1].End > 120 || units(es) > 12 {
		t.Errorf("after 120 events the key holds %+v: want the newest at %d µs, a small end, trimmed", es, last)
	}
	// The rebased key decides as before: 20 s after the last event, the
	// window holds the last 2 (a peek of a cost that does not fit reports
	// the window as it is).
	if d := peek(t, s, p, nil, 99); d.Limits()[0].Used != 2 || d.ResetAfter != time.Minute-20*time.Second {
		t.Errorf("peek: used %d reset %v, want 2 and 40s", d.Limits()[0].Used, d.ResetAfter)
	}
}

func TestForeignKey(t *testing.T) {
	ctx := context.Background()
	s := openRueidis(t, redisstore.Config{Prefix: newPrefix()})
	p := &sluice.Policy{Name: "foreign", Rules: []sluice.Rule{{Name: "r", Limit: 5, Window: time.Minute}}}
	c := admin(t)
	key := keysOf(t, s, p, nil)[0]
	if err := c.Do(ctx, c.B().Zadd().Key(key).ScoreMember().ScoreMember(1, "someone else's").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	defer c.Do(ctx, c.B().Del().Key(key).Build())
	_, err := direct(s).Decide(ctx, request(t, p, nil, 1))
	if err == nil || !strings.Contains(err.Error(), "is not a sluice window") {
		t.Errorf("Decide on a foreign sorted set: %v, want an error saying it is not a sluice window", err)
	}
	if got := members(t, c, key); len(got) != 1 || got[0].Member != "someone else's" {
		t.Errorf("the foreign key now holds %v", got)
	}
}

func TestRollbackOfGrownEntry(t *testing.T) {
	clock := storetest.NewClock(storetest.T0)
	s := openRueidis(t, redisstore.Config{Prefix: newPrefix(), Clock: clock.Now, Slots: redisstore.SlotsPerRule})
	p := &sluice.Policy{Name: "grown", Rules: []sluice.Rule{
		{Name: "global", Limit: 2, Window: time.Minute},
		{Name: "user", Limit: 5, Window: time.Minute, By: []string{"user"}},
	}}
	a, b := map[string]string{"user": "a"}, map[string]string{"user": "b"}
	if d := decide(t, s, p, b, 1, store.ModeRecord); !d.Allowed {
		t.Fatalf("b: %+v", d)
	}
	// User a's first request fills the global cap, then a second one at
	// the same instant is recorded for a, into a's entry, then denied by
	// the global cap and undone: a's entry is left as the first made it.
	if d := decide(t, s, p, a, 1, store.ModeAllow); !d.Allowed {
		t.Fatalf("a, first: %+v", d)
	}
	if d := decide(t, s, p, a, 1, store.ModeAllow); d.Allowed || d.DeniedBy != "global" || d.Limits()[1].Used != 1 {
		t.Fatalf("a, second: %+v, want denied by global with user a's used 1", d)
	}
	checkEntries(t, keysOf(t, s, p, a)[1], "0s 1")
	checkEntries(t, keysOf(t, s, p, a)[0], "0s 2:2")
}

func TestBatchErrorIsOwn(t *testing.T) {
	ctx := context.Background()
	c := admin(t)
	prefix := newPrefix()
	str, foreign := prefix+":{e}:string", prefix+":{e}:zset"
	if err := c.Do(ctx, c.B().Set().Key(str).Value("x").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, c.B().Zadd().Key(foreign).ScoreMember().ScoreMember(1, "x").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	defer c.Do(ctx, c.B().Del().Key(str, foreign).Build())
	reqs := make([]*store.Request, 4)
	for i := range reqs {
		reqs[i] = &store.Request{Policy: "e", Checks: []store.Check{{Rule: "r", Limit: 5, Window: time.Minute, Cost: 1}}}
	}
	errs := redisstore.DecideBatch(c, [][]string{{prefix + ":{e}:a"}, {str}, {foreign}, {prefix + ":{e}:b"}}, reqs, storetest.T0.UnixMicro())
	want := result(store.CauseNone, 1, 4, 0, time.Minute)
	for _, i := range []int{0, 3} {
		if errs[i] != nil || reqs[i].Results[0] != want {
			t.Errorf("request %d: %+v, %v; want %+v", i+1, reqs[i].Results, errs[i], want)
		}
	}
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "WRONGTYPE") {
		t.Errorf("request on a string key: %v; want a WRONGTYPE error", errs[1])
	}
	if errs[2] == nil || !strings.Contains(errs[2].Error(), "is not a sluice window") {
		t.Errorf("request on a foreign sorted set: %v; want an error saying so", errs[2])
	}
}

// result is the store.Result of a rule of the given cause and figures.
func result(cause store.Cause, used, remaining int64, retry, reset time.Duration) store.Result {
	return store.Result{Fits: cause == store.CauseNone, Cause: cause, Used: used, Remaining: remaining, RetryAfter: retry, ResetAfter: reset}
}
