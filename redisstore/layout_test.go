package redisstore_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/store"
	"github.com/sluicerate/sluice/storetest"
)

// TestLayoutsSideBySide runs the two key layouts against one Redis, as a
// rolling upgrade does: an instance of each, one prefix, one policy of every
// algorithm and a schedule. Neither reads nor overwrites the other's keys:
// each admits its own limit, the other's keys stay as they were, and the
// operator's tools (PolicyPattern, InspectKey) tell the layouts apart.
func TestLayoutsSideBySide(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(storetest.T0)
	prefix := newPrefix()
	old := openRueidis(t, redisstore.Config{Prefix: prefix, Clock: clock.Now, Layout: redisstore.Layout1})
	cur := openRueidis(t, redisstore.Config{Prefix: prefix, Clock: clock.Now})
	p := &sluice.Policy{Name: "api", Rules: []sluice.Rule{
		{Name: "log", Limit: 3, Window: time.Minute, By: []string{"user"}},
		{Name: "gcra", Limit: 3, Window: time.Minute, By: []string{"user"}, Algorithm: sluice.GCRA},
		{Name: "counter", Limit: 3, Window: time.Minute, By: []string{"user"}, Algorithm: sluice.SlidingCounter},
	}}
	attrs := map[string]string{"user": "ann"}

	oldKeys, curKeys := keysOf(t, old, p, attrs), keysOf(t, cur, p, attrs)
	wantOld := []string{prefix + ":{api,ann}:api:log:ann", prefix + ":{api,ann}:api:gcra!gcra:ann", prefix + ":{api,ann}:api:counter!counter:ann"}
	wantCur := []string{prefix + ":{api,ann}2l:log", prefix + ":{api,ann}2g:gcra", prefix + ":{api,ann}2c:counter"}
	if !slices.Equal(oldKeys, wantOld) || !slices.Equal(curKeys, wantCur) {
		t.Fatalf("keys: layout 1 %q, want %q; layout 2 %q, want %q", oldKeys, wantOld, curKeys, wantCur)
	}

	// The old instance fills its windows; the new one still admits its
	// whole limit: it does not read the old keys.
	for i := range 3 {
		if d := decide(t, old, p, attrs, 1, store.ModeAllow); !d.Allowed {
			t.Fatalf("layout 1, request %d denied: %+v", i, d)
		}
		clock.Advance(time.Millisecond)
	}
	if d := decide(t, old, p, attrs, 1, store.ModeAllow); d.Allowed {
		t.Fatalf("layout 1 admitted a 4th request of 3: %+v", d)
	}
	c := admin(t)
	before := dump(t, c, oldKeys)
	for i := range 3 {
		if d := decide(t, cur, p, attrs, 1, store.ModeAllow); !d.Allowed {
			t.Fatalf("layout 2, request %d denied beside a full layout 1: %+v", i, d)
		}
		clock.Advance(time.Millisecond)
	}
	if d := decide(t, cur, p, attrs, 1, store.ModeAllow); d.Allowed {
		t.Fatalf("layout 2 admitted a 4th request of 3: %+v", d)
	}
	// ... nor write them.
	if after := dump(t, c, oldKeys); !slices.Equal(before, after) {
		t.Errorf("layout 1's keys changed under layout 2's decisions:\nbefore %q\nafter  %q", before, after)
	}

	// Schedules: each layout has its own queue.
	sched := carrierSchedule(4, 10*time.Second)
	q := queueOf(sched, map[string]string{"carrier": "45"})
	if k1, k2 := old.QueueKey(q), cur.QueueKey(q); k1 != prefix+":{carrier,45}:carrier:@queue:45" || k2 != prefix+":{carrier,45}2q" {
		t.Errorf("queue keys %q and %q", k1, k2)
	}

	// The operator's tools: each store's pattern matches its own keys
	// only, and InspectKey names the layout of a key it does not read.
	all, err := ttls(ctx, c, prefix)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		store *redisstore.Store
		own   []string
	}{{old, oldKeys}, {cur, curKeys}} {
		_, match := s.store.PolicyPattern("api", []string{"ann"})
		var matched []string
		for k := range all {
			if match(k) {
				matched = append(matched, k)
			}
		}
		slices.Sort(matched)
		if want := slices.Sorted(slices.Values(s.own)); !slices.Equal(matched, want) {
			t.Errorf("PolicyPattern matched %q, want %q", matched, want)
		}
	}
	w, _, err := cur.InspectKey(ctx, curKeys[1])
	if err != nil || w.Rule != "gcra" || len(w.State) != 1 {
		t.Errorf("InspectKey(%s) = %+v, %v; want rule gcra and its state", curKeys[1], w, err)
	}
	if _, _, err := cur.InspectKey(ctx, oldKeys[0]); err == nil || !strings.Contains(err.Error(), "layout 1") {
		t.Errorf("InspectKey of a layout 1 key by a layout 2 store: %v, want an error naming layout 1", err)
	}
	if w, _, err := old.InspectKey(ctx, oldKeys[2]); err != nil || w.Rule != "counter" {
		t.Errorf("InspectKey(%s) by a layout 1 store = %+v, %v; want rule counter", oldKeys[2], w, err)
	}
}

// dump returns each key's type and serialized value.
func dump(t *testing.T, c rueidis.Client, keys []string) []string {
	t.Helper()
	var out []string
	for _, k := range keys {
		v, err := c.Do(context.Background(), c.B().Dump().Key(k).Build()).ToString()
		if err != nil {
			t.Fatalf("DUMP %s: %v", k, err)
		}
		out = append(out, k+"="+v)
	}
	return out
}

func TestUnknownLayout(t *testing.T) {
	server.Require(t)
	s, err := redisstore.New(redisstore.Config{Addrs: []string{server.Addr()}, Layout: redisstore.Layout2 + 1})
	if err == nil {
		s.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "layout 1 or 2") {
		t.Errorf("a store of layout 3: %v, want an error naming the layouts it writes", err)
	}
}
