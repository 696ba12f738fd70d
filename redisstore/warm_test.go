package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/redistest"
	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/store"
	"github.com/sluicerate/sluice/storetest"
)

// held returns, per script Warm loads, whether srv's script cache holds it.
func held(t *testing.T, srv *redistest.Server) []string {
	t.Helper()
	out, err := srv.Do(append([]string{"SCRIPT", "EXISTS"}, redisstore.ScriptSHAs()...)...)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(out, "\n")
}

func allHeld(flags []string) bool {
	for _, f := range flags {
		if f != "1" {
			return false
		}
	}
	return len(flags) == len(redisstore.ScriptSHAs())
}

// TestWarm: after Warm, every node holds every script, and the first
// decision runs by EVALSHA alone (no NOSCRIPT, no EVAL of the source).
func TestWarm(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	s, err := redisstore.New(redisstore.Config{Addrs: []string{srv.Addr()}, Clock: storetest.NewClock(storetest.T0).Now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := srv.Do("SCRIPT", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Do("CONFIG", "RESETSTAT"); err != nil {
		t.Fatal(err)
	}
	if flags := held(t, srv); allHeld(flags) {
		t.Fatalf("scripts held after SCRIPT FLUSH: %v", flags)
	}
	if err := s.Warm(ctx); err != nil {
		t.Fatal(err)
	}
	if flags := held(t, srv); !allHeld(flags) {
		t.Fatalf("after Warm, SCRIPT EXISTS = %v, want every script", flags)
	}
	p := &sluice.Policy{Name: "p", Rules: []sluice.Rule{{Name: "r", Limit: 1, Window: time.Minute}}}
	if d := decide(t, s, p, nil, 1, store.ModeAllow); !d.Allowed {
		t.Fatalf("first decision denied: %+v", d)
	}
	stats, err := srv.Do("INFO", "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stats, "cmdstat_fcall:calls=1,") || !strings.Contains(stats, "cmdstat_function|load:calls=1,") ||
		strings.Contains(stats, "cmdstat_evalsha:") || strings.Contains(stats, "cmdstat_eval:") {
		t.Errorf("the first decision after Warm, INFO commandstats:\n%s\nwant Warm's FUNCTION LOAD, then one FCALL and no script call", stats)
	}
	// The runtime overrides, which a server polls from its start, are
	// read by EVALSHA alone too.
	if _, err := s.ReadOverrides(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if stats, _ := srv.Do("INFO", "commandstats"); !strings.Contains(stats, "cmdstat_evalsha:calls=1,") ||
		strings.Contains(stats, "cmdstat_eval:") {
		t.Errorf("reading the overrides after Warm, INFO commandstats:\n%s\nwant one EVALSHA and no EVAL (its source, after a NOSCRIPT)", stats)
	}
	// Leases go by FCALL too: an acquire and its release are two calls
	// of the library Warm loaded, and no script.
	lim := sluice.NewLimiter(s, sluice.Config{Timeout: -1})
	lp := &sluice.Policy{Name: "lp", Rules: []sluice.Rule{{Name: "in-flight", Concurrency: 1, Lease: time.Minute}}}
	x, d, err := lim.Acquire(ctx, lp, nil, 1)
	if err != nil || !d.Allowed {
		t.Fatalf("first acquire after Warm: %+v, %v", d, err)
	}
	if ok, err := x.Release(ctx); err != nil || !ok {
		t.Fatalf("release: %v, %v; want held", ok, err)
	}
	fcalls, failed := commandCalls(t, srv, "fcall")
	evalshas, _ := commandCalls(t, srv, "evalsha")
	evals, _ := commandCalls(t, srv, "eval")
	if fcalls != "3" || failed != "0" || evalshas != "1" || evals != "" {
		t.Errorf("a lease after Warm: FCALL %s calls (%s failed), EVALSHA %s, EVAL %q; want 3 FCALLs, none failed, and only the overrides' EVALSHA", fcalls, failed, evalshas, evals)
	}
	// A second Warm finds every script in place: it only asks, and its
	// FUNCTION LOAD is refused as a duplicate.
	if err := s.Warm(ctx); err != nil {
		t.Fatal(err)
	}
	if stats, _ := srv.Do("INFO", "commandstats"); strings.Count(stats, "cmdstat_script|load:calls=") != 1 || !strings.Contains(stats, "cmdstat_script|exists:calls=4,") ||
		!strings.Contains(stats, "cmdstat_function|load:calls=2,") {
		t.Errorf("after a second Warm, INFO commandstats:\n%s\nwant SCRIPT LOAD from the first only", stats)
	}
	s.Close()
	if err := s.Warm(ctx); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Warm after Close = %v, want ErrClosed", err)
	}
}

// TestWarmCluster: Warm loads the scripts on every master of a Cluster.
func TestWarmCluster(t *testing.T) {
	c := sharedCluster(t)
	s := openCluster(t, redisstore.Config{Prefix: newPrefix()})
	for _, n := range c.Nodes() {
		if _, err := n.Do("SCRIPT", "FLUSH"); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Warm(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Masters() {
		if flags := held(t, n); !allHeld(flags) {
			t.Errorf("node %s after Warm: SCRIPT EXISTS = %v, want every script", n.Addr(), flags)
		}
		if list, err := n.Do("FUNCTION", "LIST", "LIBRARYNAME", redisstore.Library()); err != nil || !strings.Contains(list, redisstore.Library()) {
			t.Errorf("node %s after Warm: FUNCTION LIST = %q, %v; want the store's library", n.Addr(), list, err)
		}
	}
}

// TestWarmUnreachable: Warm fails, naming the node, while Redis does not
// answer.
func TestWarmUnreachable(t *testing.T) {
	srv := redistest.Start(t)
	s, err := redisstore.New(redisstore.Config{Addrs: []string{srv.Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := srv.Pause(); err != nil {
		t.Fatal(err)
	}
	defer srv.Resume()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := s.Warm(ctx); err == nil || !strings.Contains(err.Error(), srv.Addr()) {
		t.Errorf("Warm of a stopped Redis = %v, want an error naming %s", err, srv.Addr())
	}
}
