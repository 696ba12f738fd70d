package redisstore_test

import (
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
		if !d.Allowed || d.Limits[0].Used != int64(i+1) {
			t.Fatalf("after FUNCTION FLUSH #%d: allowed %v used %d, want allowed with used %d", i+1, d.Allowed, d.Limits[0].Used, i+1)
		}
	}
	if calls, failed := commandCalls(t, srv, "fcall"); calls != "6" || failed != "3" {
		t.Errorf("FCALL: %s calls, %s failed; want 6 and 3 (each decision's first call finds no function)", calls, failed)
	}
	if calls, _ := commandCalls(t, srv, "evalsha"); calls != "" {
		t.Errorf("EVALSHA: %s calls, want none", calls)
	}
	if d := peek(t, s, p, nil, 1); d.Allowed || d.Limits[0].Used != 3 {
		t.Errorf("peek after 3 decisions: allowed %v used %d, want denied with used 3", d.Allowed, d.Limits[0].Used)
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
		if want := i < 2; d.Allowed != want || d.Limits[0].Used != int64(min(i+1, 2)) {
			t.Fatalf("decision %d: allowed %v used %d, want allowed %v used %d", i+1, d.Allowed, d.Limits[0].Used, want, min(i+1, 2))
		}
	}
	if calls, _ := commandCalls(t, srv, "evalsha"); calls != "3" {
		t.Errorf("EVALSHA: %s calls, want 3", calls)
	}
}
