package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/inspect"
	"github.com/sluicerate/sluice/internal/redistest"
	"github.com/sluicerate/sluice/redisstore"
)

// What sluice inspect --json prints: package inspect's Report.
type (
	inspectOutput = inspect.Report
	inspectWindow = inspect.Window
)

// TestInspectLeases checks sluice inspect of a policy with a concurrency
// rule on Redis: with --config, the rule's leases alive of its most, each
// by its token with its expiry (the one Acquire gave), and the key's TTL;
// without, SCAN finds the window and shows it as leases, and skips the
// leases' records. A released lease is not shown, nor one expired but not
// yet dropped from the key.
func TestInspectLeases(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	file := writeFile(t, t.TempDir(), "sluice.yaml", redisSection(rs.Addr(), "lz")+`
policies:
  - name: llm
    limits:
      - {name: tokens, by: [user], limit: 100000, window: 1m}
      - {name: in-flight, by: [user], concurrency: 3, lease: 1m}
`)
	ctx := context.Background()
	st, err := redisstore.New(redisstore.Config{Addrs: []string{rs.Addr()}, Prefix: "lz"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	lim := sluice.NewLimiter(st, sluice.Config{Timeout: 5 * time.Second})
	p := &sluice.Policy{Name: "llm", Rules: []sluice.Rule{
		{Name: "tokens", By: []string{"user"}, Limit: 100000, Window: time.Minute},
		{Name: "in-flight", By: []string{"user"}, Concurrency: 3, Lease: time.Minute},
	}}
	var leases []*sluice.Lease
	for _, user := range []string{"ann", "ann", "bob"} {
		x, d, err := lim.Acquire(ctx, p, map[string]string{"user": user}, 500)
		if err != nil || !d.Allowed || x.ID() == "" {
			t.Fatalf("acquire for %s: %+v, %v", user, d, err)
		}
		leases = append(leases, x)
	}
	if held, err := leases[1].Release(ctx); err != nil || !held {
		t.Fatalf("release: %v, %v", held, err)
	}
	token := func(x *sluice.Lease) string {
		sum := sha256.Sum256([]byte(x.ID()))
		return hex.EncodeToString(sum[:16])
	}
	// A lease that expired unreleased stays in the window until the rule
	// is next decided: one that expired a second before the first was
	// taken.
	// (A peek drops it, so it is added before each read.)
	key := "lz:{llm,ann}2n:in-flight"
	addStale := func() {
		t.Helper()
		stale := leases[0].Expires().Add(-time.Minute - time.Second).UnixMicro()
		if _, err := rs.Do("ZADD", key, strconv.FormatInt(stale, 10), strings.Repeat("ab", 16)); err != nil {
			t.Fatal(err)
		}
	}

	check := func(how string, w inspectWindow, withConfig bool) {
		t.Helper()
		if w.Rule != "in-flight" || w.Key != key || w.TTLMS <= 0 || w.TTLMS > 60000 || len(w.Entries) != 0 {
			t.Errorf("%s: window %+v, want ann's in-flight key, its TTL within the lease", how, w)
		}
		if len(w.Leases) != 1 || w.Leases[0].Token != token(leases[0]) || !w.Leases[0].Expires.Equal(leases[0].Expires()) ||
			w.Leases[0].ExpiresInMS <= 0 || w.Leases[0].ExpiresInMS > 60000 {
			t.Errorf("%s: leases %+v, want the first alone (token %s, expiring at %v)", how, w.Leases, token(leases[0]), leases[0].Expires())
		}
		if withConfig != (w.Counted != nil) || withConfig && (*w.Counted != 1 || w.Limit != 3 || w.LeaseMS != 60000 || w.WindowMS != 60000) {
			t.Errorf("%s: figures used %v, limit %d, lease %d ms, window %d ms; want 1 of 3, lease (and window) 60000 ms with the file, none without",
				how, w.Counted, w.Limit, w.LeaseMS, w.WindowMS)
		}
	}

	addStale()
	code, out, errOut := runCLI(t, "inspect", "--config", file, "--policy", "llm", "--attr", "user=ann", "--json")
	if code != 0 {
		t.Fatalf("inspect = %d\n%s", code, errOut)
	}
	var in inspectOutput
	(&response{Body: []byte(out)}).JSON(t, &in)
	if len(in.Windows) != 2 || len(in.Windows[0].Entries) != 2 || in.Windows[0].Leases != nil || in.Windows[0].Counted == nil || *in.Windows[0].Counted != 1000 {
		t.Fatalf("inspect --config = %+v, want the tokens log (2 entries of 500) and the in-flight leases", in.Windows)
	}
	check("--config", in.Windows[1], true)
	if !strings.Contains(out, `"leases":[{"token":"`+token(leases[0])+`"`) {
		t.Errorf("the JSON does not carry the lease: %s", out)
	}

	addStale()
	code, out, _ = runCLI(t, "inspect", "--config", file, "--policy", "llm", "--attr", "user=ann")
	if code != 0 || !strings.Contains(out, "rule in-flight: 1/3 leases alive (lease 1m0s); expires in ") ||
		!strings.Contains(out, "  lease "+token(leases[0])+"  expires in ") || strings.Contains(out, strings.Repeat("ab", 16)) {
		t.Errorf("inspect text = %d\n%s", code, out)
	}

	// Full: the next request's line says why, and until when.
	var more []*sluice.Lease
	for range 2 {
		x, d, err := lim.Acquire(ctx, p, map[string]string{"user": "ann"}, 1)
		if err != nil || !d.Allowed {
			t.Fatalf("acquire: %+v, %v", d, err)
		}
		more = append(more, x)
	}
	code, out, _ = runCLI(t, "inspect", "--config", file, "--policy", "llm", "--attr", "user=ann")
	if code != 0 || !strings.Contains(out, "rule in-flight: 3/3 leases alive") || strings.Count(out, "  lease ") != 3 ||
		!strings.Contains(out, "a request of cost 1 now: denied by rule in-flight, all its leases are alive; retry in ") {
		t.Errorf("inspect text of a full rule = %d\n%s", code, out)
	}
	for _, x := range more {
		if held, err := x.Release(ctx); err != nil || !held {
			t.Fatalf("release: %v, %v", held, err)
		}
	}

	// Without the file: SCAN finds ann's two windows, not the leases'
	// records beside them.
	addStale()
	code, out, errOut = runCLI(t, "inspect", "--redis", "redis://"+rs.Addr(), "--prefix", "lz", "--policy", "llm", "--attr", "user=ann", "--json")
	if code != 0 {
		t.Fatalf("inspect --redis = %d\n%s", code, errOut)
	}
	in = inspectOutput{}
	(&response{Body: []byte(out)}).JSON(t, &in)
	if len(in.Windows) != 2 || in.Windows[0].Rule != "tokens" || len(in.Windows[0].Entries) != 4 || in.Windows[0].Leases != nil {
		t.Fatalf("inspect --redis = %+v, want ann's tokens log and in-flight leases (sorted by key)", in.Windows)
	}
	check("SCAN", in.Windows[1], false)
	addStale()
	code, out, _ = runCLI(t, "inspect", "--redis", "redis://"+rs.Addr(), "--prefix", "lz", "--policy", "llm", "--attr", "user=ann")
	if code != 0 || !strings.Contains(out, "rule in-flight: 1 leases alive; expires in ") || strings.Contains(out, "2e:") {
		t.Errorf("inspect --redis text = %d\n%s", code, out)
	}
}

// TestInspectSlices checks sluice inspect of a budgeted rule on Redis:
// with --config, the slices leased from its window (their units as the
// leasing Limiter holds them, and when each ends) and a used that counts
// them beside the entries; without, SCAN finds the slices' key and shows
// it with its window, once.
func TestInspectSlices(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	file := writeFile(t, t.TempDir(), "sluice.yaml", redisSection(rs.Addr(), "bz")+`
policies:
  - name: notify
    limits:
      - {name: global, limit: 1000, window: 1h, budget: 10m}
      - {name: category, by: [category], limit: 100, window: 1m}
`)
	ctx := context.Background()
	st, err := redisstore.New(redisstore.Config{Addrs: []string{rs.Addr()}, Prefix: "bz"})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	lim := sluice.NewLimiter(st, sluice.Config{Timeout: 5 * time.Second})
	defer lim.Close()
	p := &sluice.Policy{Name: "notify", Rules: []sluice.Rule{
		{Name: "global", Limit: 1000, Window: time.Hour, Budget: 10 * time.Minute},
		{Name: "category", By: []string{"category"}, Limit: 100, Window: time.Minute},
	}}
	attrs := map[string]string{"category": "errors"}
	if d, err := lim.Allow(ctx, p, attrs); err != nil || !d.Allowed {
		t.Fatalf("allow: %+v, %v", d, err)
	}
	held := lim.Slices()
	if len(held) != 1 || held[0].Granted < 1 {
		t.Fatalf("the Limiter holds slices %+v, want one of global", held)
	}
	granted := held[0].Granted

	check := func(how string, w inspectWindow, withConfig bool) {
		t.Helper()
		if w.Rule != "global" || w.Key != "bz:{notify}2l:global" || w.SlicesKey != "bz:{notify}!s2l:global" {
			t.Errorf("%s: window %s key %s slices key %s, want global's", how, w.Rule, w.Key, w.SlicesKey)
		}
		if len(w.Slices) != 1 || w.Slices[0].Units != granted || w.Slices[0].EndsInMS <= 0 || w.Slices[0].EndsInMS > 600000 {
			t.Fatalf("%s: slices %+v, want one of %d units ending within the budget", how, w.Slices, granted)
		}
		var entries int64
		for _, e := range w.Entries {
			entries += e.Cost
		}
		if withConfig != (w.Counted != nil) || withConfig && (*w.Counted != entries+granted || w.Slices[0].Counts == nil || !*w.Slices[0].Counts) {
			t.Errorf("%s: used %v, slice counts %v; want the entries' %d plus the slice's %d with the file, none without",
				how, w.Counted, w.Slices[0].Counts, entries, granted)
		}
	}
	code, out, errOut := runCLI(t, "inspect", "--config", file, "--policy", "notify", "--attr", "category=errors", "--json")
	if code != 0 {
		t.Fatalf("inspect = %d\n%s", code, errOut)
	}
	var in inspectOutput
	(&response{Body: []byte(out)}).JSON(t, &in)
	if len(in.Windows) != 2 || in.Windows[1].Slices != nil {
		t.Fatalf("inspect --config = %+v, want global with its slices and category without", in.Windows)
	}
	check("--config", in.Windows[0], true)

	code, out, _ = runCLI(t, "inspect", "--config", file, "--policy", "notify", "--attr", "category=errors")
	if code != 0 || !strings.Contains(out, "  1 slices leased, "+strconv.FormatInt(granted, 10)+" units; key bz:{notify}!s2l:global") ||
		!strings.Contains(out, "  slice of "+strconv.FormatInt(granted, 10)+" units  ends in ") {
		t.Errorf("inspect text = %d\n%s", code, out)
	}

	code, out, errOut = runCLI(t, "inspect", "--redis", "redis://"+rs.Addr(), "--prefix", "bz", "--policy", "notify", "--attr", "category=errors", "--json")
	if code != 0 {
		t.Fatalf("inspect --redis = %d\n%s", code, errOut)
	}
	in = inspectOutput{}
	(&response{Body: []byte(out)}).JSON(t, &in)
	if len(in.Windows) != 2 || in.Windows[0].Rule != "category" || in.Windows[1].Slices == nil {
		t.Fatalf("inspect --redis = %+v, want category's window and global's with its slices, once each", in.Windows)
	}
	check("SCAN", in.Windows[1], false)
}
