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
	"github.com/sluicerate/sluice/internal/redistest"
	"github.com/sluicerate/sluice/redisstore"
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
		if withConfig != (w.Used != nil) || withConfig && (*w.Used != 1 || w.Limit != 3 || w.LeaseMS != 60000 || w.WindowMS != 0) {
			t.Errorf("%s: figures used %v, limit %d, lease %d ms, window %d ms; want 1 of 3, lease 60000 ms with the file, none without",
				how, w.Used, w.Limit, w.LeaseMS, w.WindowMS)
		}
	}

	addStale()
	code, out, errOut := runCLI(t, "inspect", "--config", file, "--policy", "llm", "--attr", "user=ann", "--json")
	if code != 0 {
		t.Fatalf("inspect = %d\n%s", code, errOut)
	}
	var in inspectOutput
	(&response{Body: []byte(out)}).JSON(t, &in)
	if len(in.Windows) != 2 || len(in.Windows[0].Entries) != 2 || in.Windows[0].Leases != nil || in.Windows[0].Used == nil || *in.Windows[0].Used != 1000 {
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
