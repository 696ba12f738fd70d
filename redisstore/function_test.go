package redisstore_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/redistest"
	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/store"
	"github.com/sluicerate/sluice/storetest"
)

// commandCalls returns the calls of command in srv's INFO commandstats,
// and the failed ones.
func commandCalls(t *testing.T, srv *redistest.Server, command string) (calls, failed string) {
	t.Helper()
	stats, err := srv.Do("INFO", "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(stats, "\n") {
		fields, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+command+":")
		if !ok {
			continue
		}
		for _, f := range strings.Split(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "calls":
				calls = v
			case "failed_calls":
				failed = v
			}
		}
	}
	return calls, failed
}

// scriptCalls returns the script and function calls (EVAL, EVALSHA, FCALL)
// servers have run since they started.
func scriptCalls(t *testing.T, servers ...*redistest.Server) int {
	t.Helper()
	n := 0
	for _, srv := range servers {
		for _, command := range []string{"eval", "evalsha", "fcall"} {
			if calls, _ := commandCalls(t, srv, command); calls != "" {
				v, err := strconv.Atoi(calls)
				if err != nil {
					t.Fatalf("INFO commandstats: %s calls=%q", command, calls)
				}
				n += v
			}
		}
	}
	return n
}

// TestFunctionFlushReloads flushes the server's functions before each
// decision: the store loads its library again and counts each event once.
func TestFunctionFlushReloads(t *testing.T) {
	srv := redistest.Start(t)
	clock := storetest.NewClock(storetest.T0)
	s, err := redisstore.New(redisstore.Config{Addrs: []string{srv.Addr()}, Prefix: newPrefix(), Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := &sluice.Policy{Name: "flush", Rules: []sluice.Rule{{Name: "r", Limit: 3, Window: time.Minute}}}
	for i := range 3 {
		if _, err := srv.Do("FUNCTION", "FLUSH"); err != nil {
			t.Fatal(err)
		}
		d := decide(t, s, p, nil, 1, store.ModeAllow)
		if !d.Allowed || d.Limits()[0].Used != int64(i+1) {
			t.Fatalf("after FUNCTION FLUSH #%d: allowed %v used %d, want allowed with used %d", i+1, d.Allowed, d.Limits()[0].Used, i+1)
		}
	}
	if calls, failed := commandCalls(t, srv, "fcall"); calls != "6" || failed != "3" {
		t.Errorf("FCALL: %s calls, %s failed; want 6 and 3 (each decision's first call finds no function)", calls, failed)
	}
	if calls, _ := commandCalls(t, srv, "evalsha"); calls != "" {
		t.Errorf("EVALSHA: %s calls, want none", calls)
	}
	if d := peek(t, s, p, nil, 1); d.Allowed || d.Limits()[0].Used != 3 {
		t.Errorf("peek after 3 decisions: allowed %v used %d, want denied with used 3", d.Allowed, d.Limits()[0].Used)
	}

	// Leases: lease.lua and finish.lua are functions of the same library,
	// and reload it the same way.
	lim := sluice.NewLimiter(s, sluice.Config{Timeout: -1})
	lp := &sluice.Policy{Name: "flush-lease", Rules: []sluice.Rule{
		{Name: "tokens", Limit: 100, Window: time.Minute},
		{Name: "in-flight", Concurrency: 1, Lease: time.Minute},
	}}
	leaseCalls := func(what string, fcalls, failed int) {
		t.Helper()
		if calls, f := commandCalls(t, srv, "fcall"); calls != strconv.Itoa(fcalls) || f != strconv.Itoa(failed) {
			t.Errorf("%s: FCALL %s calls, %s failed; want %d and %d", what, calls, f, fcalls, failed)
		}
	}
	ctx := context.Background()
	fcalls, failed := 7, 3 // the decisions' and the peek's
	for i := range 2 {
		if _, err := srv.Do("FUNCTION", "FLUSH"); err != nil {
			t.Fatal(err)
		}
		x, d, err := lim.Acquire(ctx, lp, nil, 10)
		if err != nil || !d.Allowed || d.Limits()[0].Used != int64(4*i+10) {
			t.Fatalf("acquire #%d after FUNCTION FLUSH: %+v, %v; want allowed with tokens used %d", i+1, d, err, 4*i+10)
		}
		fcalls, failed = fcalls+2, failed+1
		leaseCalls("acquire after FUNCTION FLUSH", fcalls, failed)
		if _, d, err := lim.Acquire(ctx, lp, nil, 10); err != nil || d.Allowed {
			t.Fatalf("second acquire while #%d is held: %+v, %v; want denied by in-flight", i+1, d, err)
		}
		fcalls++
		if _, err := srv.Do("FUNCTION", "FLUSH"); err != nil {
			t.Fatal(err)
		}
		if ok, err := x.Settle(ctx, 4); err != nil || !ok {
			t.Fatalf("settle #%d after FUNCTION FLUSH: %v, %v; want held", i+1, ok, err)
		}
		fcalls, failed = fcalls+2, failed+1
		leaseCalls("settle after FUNCTION FLUSH", fcalls, failed)
		if ok, err := x.Release(ctx); err != nil || ok {
			t.Errorf("release #%d after settle: %v, %v; want not held", i+1, ok, err)
		}
		fcalls++
	}
	if _, d, err := lim.Acquire(ctx, lp, nil, 10); err != nil || !d.Allowed || d.Limits()[0].Used != 18 || d.Limits()[1].Used != 1 {
		t.Errorf("acquire after 2 leases settled to 4: %+v, %v; want allowed with tokens used 18, this one in flight", d, err)
	}
	fcalls++
	leaseCalls("after the leases", fcalls, failed)
	if calls, _ := commandCalls(t, srv, "evalsha"); calls != "" {
		t.Errorf("EVALSHA: %s calls, want none", calls)
	}
}

// TestFunctionsRefused connects as a user whom the server's ACL forbids
// functions: the store decides by scripts, and the refused calls count
// nothing.
func TestFunctionsRefused(t *testing.T) {
	srv := redistest.Start(t)
	if _, err := srv.Do("ACL", "SETUSER", "nofunctions", "on", ">secret", "~*", "&*", "+@all", "-fcall", "-fcall_ro", "-function"); err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock(storetest.T0)
	s, err := redisstore.New(redisstore.Config{Addrs: []string{srv.Addr()}, Username: "nofunctions", Password: "secret",
		Prefix: newPrefix(), Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	p := &sluice.Policy{Name: "acl", Rules: []sluice.Rule{{Name: "r", Limit: 2, Window: time.Minute}}}
	for i := range 3 {
		d := decide(t, s, p, nil, 1, store.ModeAllow)
		if want := i < 2; d.Allowed != want || d.Limits()[0].Used != int64(min(i+1, 2)) {
			t.Fatalf("decision %d: allowed %v used %d, want allowed %v used %d", i+1, d.Allowed, d.Limits()[0].Used, want, min(i+1, 2))
		}
	}
	if calls, _ := commandCalls(t, srv, "evalsha"); calls != "3" {
		t.Errorf("EVALSHA: %s calls, want 3", calls)
	}

	// Leases go by scripts as well.
	ctx := context.Background()
	lim := sluice.NewLimiter(s, sluice.Config{Timeout: -1})
	lp := &sluice.Policy{Name: "acl-lease", Rules: []sluice.Rule{{Name: "in-flight", Concurrency: 1, Lease: time.Minute}}}
	x, d, err := lim.Acquire(ctx, lp, nil, 1)
	if err != nil || !d.Allowed {
		t.Fatalf("acquire: %+v, %v; want allowed", d, err)
	}
	if _, d, err := lim.Acquire(ctx, lp, nil, 1); err != nil || d.Allowed {
		t.Fatalf("second acquire: %+v, %v; want denied", d, err)
	}
	if ok, err := x.Release(ctx); err != nil || !ok {
		t.Fatalf("release: %v, %v; want held", ok, err)
	}
	if calls, _ := commandCalls(t, srv, "evalsha"); calls != "6" {
		t.Errorf("EVALSHA after the leases: %s calls, want 6", calls)
	}
}
