package redisinspect_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/admin/redisinspect"
	"github.com/sluicerate/sluice/internal/inspect"
	"github.com/sluicerate/sluice/internal/redistest"
	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/store"
)

// newInspector returns an Inspector of a store with prefix on a Redis the
// test starts, and a Limiter over that store.
func newInspector(t *testing.T, prefix string) (redisinspect.Inspector, *sluice.Limiter) {
	t.Helper()
	rs := redistest.Start(t)
	cfg := redisstore.Config{Addrs: []string{rs.Addr()}, Prefix: prefix}
	opt, err := redisstore.ClientOption(cfg)
	if err != nil {
		t.Fatal(err)
	}
	client, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	st, err := redisstore.NewFromClient(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close(); client.Close() })
	lim := sluice.NewLimiter(st, sluice.Config{Timeout: 5 * time.Second})
	t.Cleanup(func() { lim.Close() })
	return redisinspect.Inspector{Store: st, Client: client}, lim
}

// TestScanLeases: SCAN finds a policy's windows for the attribute values
// given, by key, each as the algorithm its key names (a concurrency rule's
// as its leases alive), and skips the leases' records beside them and the
// windows of other values.
func TestScanLeases(t *testing.T) {
	t.Parallel()
	insp, lim := newInspector(t, "lz")
	ctx := context.Background()
	p := &sluice.Policy{Name: "llm", Rules: []sluice.Rule{
		{Name: "tokens", By: []string{"user"}, Limit: 100000, Window: time.Minute},
		{Name: "in-flight", By: []string{"user"}, Concurrency: 3, Lease: time.Minute},
	}}
	for _, user := range []string{"ann", "ann", "bob"} {
		if _, d, err := lim.Acquire(ctx, p, map[string]string{"user": user}, 500); err != nil || !d.Allowed {
			t.Fatalf("acquire for %s: %+v, %v", user, d, err)
		}
	}
	start := time.Now()
	windows, now, err := insp.Scan(ctx, "llm", map[string]string{"user": "ann"}, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if now.Before(start.Add(-time.Minute)) {
		t.Errorf("now = %v, want Redis's time", now)
	}
	var keys []string
	for _, w := range windows {
		keys = append(keys, w.Key)
	}
	if want := []string{"lz:{llm,ann}2l:tokens", "lz:{llm,ann}2n:in-flight"}; !slices.Equal(keys, want) {
		t.Fatalf("windows %q, want %q (sorted, no lease records, not bob's)", keys, want)
	}
	if w := windows[0]; w.Rule != "tokens" || w.Algorithm != store.Log || len(w.Entries) != 2 || w.Entries[0].Cost != 500 || w.Leases != nil {
		t.Errorf("tokens = %+v, want its two entries of 500", w)
	}
	if w := windows[1]; w.Rule != "in-flight" || w.Algorithm != store.Concurrency || len(w.Leases) != 2 || len(w.Entries) != 0 || w.TTL <= 0 {
		t.Errorf("in-flight = %+v, want ann's two leases alive", w)
	}
}

// TestScanSlices: SCAN finds a budgeted window's slices key beside the
// window and reads the window once, with its slices; Windows reads the
// same slices for the policy's checks.
func TestScanSlices(t *testing.T) {
	t.Parallel()
	insp, lim := newInspector(t, "bz")
	// A budgeted global log over a log per category; one decision leases
	// a slice of global.
	global := sluice.Rule{Name: "global", Limit: 1000, Window: time.Hour, Budget: 10 * time.Minute}
	category := sluice.Rule{Name: "category", By: []string{"category"}, Limit: 100, Window: time.Minute}
	p, attrs := &sluice.Policy{Name: "notify", Rules: []sluice.Rule{global, category}}, map[string]string{"category": "errors"}
	ctx := context.Background()
	d, err := lim.AllowN(ctx, p, attrs, 2)
	held := lim.Slices()
	if err != nil || !d.Allowed || len(held) != 1 {
		t.Fatalf("allow: %+v, %v; the Limiter holds slices %+v, want one of global", d, err, held)
	}
	windows, _, err := insp.Scan(ctx, "notify", attrs, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(windows) != 2 || windows[0].Rule != "category" || windows[1].Rule != "global" {
		t.Fatalf("windows %+v, want category's and global's, once each", windows)
	}
	check := func(how string, w inspect.StoredWindow) {
		t.Helper()
		if w.Key != "bz:{notify}2l:global" || w.SlicesKey != "bz:{notify}!s2l:global" || len(w.Slices) != 1 || w.Slices[0].Units != held[0].Granted {
			t.Errorf("%s: global = key %s, slices key %s, slices %+v; want one of %d units", how, w.Key, w.SlicesKey, w.Slices, held[0].Granted)
		}
	}
	check("Scan", windows[1])
	req, err := lim.Resolve(p, attrs, 1)
	if err != nil {
		t.Fatal(err)
	}
	byRule, _, err := insp.Windows(ctx, req)
	if err != nil || len(byRule) != 2 {
		t.Fatalf("Windows = %+v, %v", byRule, err)
	}
	check("Windows", byRule[0])
	if byRule[1].Slices != nil || byRule[1].SlicesKey != "" {
		t.Errorf("category = %+v, want no slices: it has no budget", byRule[1])
	}
}
