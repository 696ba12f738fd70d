package redisstore_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/redistest"
	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/store"
)

// TestScriptsDeclareKeys watches a server of the test's own with MONITOR
// while Limiters lease, renew and return slices of budgeted rules (the
// log, GCRA, the sliding counter), decide, peek and record per request,
// take and settle leases beside a budgeted rule, and decide across slot
// groups: every key a script touches must be one its call declared in
// KEYS, as Redis Cluster, ACL key patterns and function flags assume. The
// slices' keys ('!s') are among those touched, so the check has something
// to catch.
func TestScriptsDeclareKeys(t *testing.T) {
	srv := redistest.Start(t)
	conn, err := net.Dial("tcp", srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	rd := bufio.NewReader(conn)
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := rd.ReadString('\n'); err != nil || line != "+OK\r\n" {
		t.Fatalf("MONITOR: %q, %v", line, err)
	}

	ctx := context.Background()
	prefix := newPrefix()
	open := func(slots redisstore.Slots) *redisstore.Store {
		s, err := redisstore.New(redisstore.Config{Addrs: []string{srv.Addr()}, Prefix: prefix, Slots: slots})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	for _, slots := range []redisstore.Slots{redisstore.SlotsShared, redisstore.SlotsPerRule} {
		s := open(slots)
		for _, alg := range []sluice.Algorithm{sluice.Log, sluice.GCRA, sluice.SlidingCounter} {
			p := &sluice.Policy{Name: fmt.Sprintf("p%d%d", slots, alg), Rules: []sluice.Rule{
				{Name: "global", Limit: 1000, Window: time.Minute, Algorithm: alg, Budget: time.Second},
				{Name: "user", By: []string{"user"}, Limit: 100, Window: time.Minute},
			}}
			lim := direct(s)
			attrs := map[string]string{"user": "ann"}
			for range 3 {
				if _, err := lim.Allow(ctx, p, attrs); err != nil {
					t.Fatal(err)
				}
			}
			for _, f := range []func(context.Context, *sluice.Policy, map[string]string, int64) (sluice.Decision, error){lim.Peek, lim.Record} {
				if _, err := f(ctx, p, attrs, 1); err != nil {
					t.Fatal(err)
				}
			}
			// A renewal: the slice given back with the ask of the next.
			req := request(t, p, attrs, 1)
			b := &store.BudgetRequest{Asks: []store.SliceAsk{{Check: 0, Want: 5, ID: "a"}}}
			if err := s.Budget(ctx, req, b); err != nil {
				t.Fatal(err)
			}
			g := b.Grants[0]
			req = request(t, p, attrs, 1)
			b = &store.BudgetRequest{Asks: []store.SliceAsk{{Check: 0, Want: 5, ID: "b"}},
				Returns: []store.SliceReturn{{Check: req.Checks[0], Shared: req.Shared, ID: "a", Start: g.Start, End: g.End, Granted: g.Granted, Used: 1}}}
			if err := s.Budget(ctx, req, b); err != nil {
				t.Fatal(err)
			}
			if err := lim.Close(); err != nil {
				t.Fatal(err)
			}
		}
		// A lease beside a budgeted rule: acquired, settled.
		p := &sluice.Policy{Name: fmt.Sprintf("llm%d", slots), Rules: []sluice.Rule{
			{Name: "global", Limit: 1000, Window: time.Minute, Budget: time.Second},
			{Name: "in-flight", Concurrency: 4, Lease: time.Minute},
		}}
		x, d, err := direct(s).Acquire(ctx, p, nil, 2)
		if err != nil || !d.Allowed {
			t.Fatalf("Acquire beside a budgeted rule: %+v, %v", d, err)
		}
		if ok, err := x.Settle(ctx, 1); err != nil || !ok {
			t.Fatalf("Settle beside a budgeted rule: %v, %v", ok, err)
		}
	}
	const done = "declared-keys-done"
	if _, err := srv.Do("ECHO", done); err != nil {
		t.Fatal(err)
	}

	var declared map[string]bool
	var calls, touched, sliceKeys int
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			t.Fatalf("reading MONITOR: %v", err)
		}
		args, from := monitorLine(t, line)
		if len(args) == 0 {
			continue
		}
		cmd := strings.ToUpper(args[0])
		if from != "lua" {
			if cmd == "ECHO" && len(args) == 2 && args[1] == done {
				break
			}
			declared = nil
			if cmd == "EVALSHA" || cmd == "EVAL" || cmd == "FCALL" || cmd == "FCALL_RO" {
				n, err := strconv.Atoi(args[2])
				if err != nil || 3+n > len(args) {
					t.Fatalf("MONITOR: %s with numkeys %q", cmd, args[2])
				}
				declared = map[string]bool{}
				for _, k := range args[3 : 3+n] {
					declared[k] = true
				}
				calls++
			}
			continue
		}
		var keys []string
		switch cmd {
		case "TIME", "PING":
		case "DEL", "UNLINK", "EXISTS", "MGET":
			keys = args[1:]
		default:
			keys = args[1:2]
		}
		for _, k := range keys {
			if !strings.HasPrefix(k, prefix+":") {
				continue
			}
			touched++
			if strings.Contains(k, "}!s") {
				sliceKeys++
			}
			if !declared[k] {
				t.Errorf("a script ran %s on %q, which its call did not declare (KEYS %v)", cmd, k, declared)
			}
		}
	}
	if calls == 0 || touched == 0 || sliceKeys == 0 {
		t.Fatalf("MONITOR saw %d script calls touching %d keys, %d of them slices': the check checked nothing", calls, touched, sliceKeys)
	}
}

// monitorLine parses one line of MONITOR's output, `+<time> [<db> <from>]
// "arg" "arg" ...`, into its arguments and who sent it ("lua" for a
// script's command).
func monitorLine(t *testing.T, line string) (args []string, from string) {
	t.Helper()
	line = strings.TrimSuffix(strings.TrimPrefix(line, "+"), "\r\n")
	open, end := strings.IndexByte(line, '['), strings.IndexByte(line, ']')
	if open < 0 || end < open {
		return nil, ""
	}
	if f := strings.Fields(line[open+1 : end]); len(f) == 2 {
		from = f[1]
	}
	rest := strings.TrimSpace(line[end+1:])
	for rest != "" {
		if rest[0] != '"' {
			t.Fatalf("MONITOR line %q: not a quoted argument at %q", line, rest)
		}
		i := 1
		for ; i < len(rest) && rest[i] != '"'; i++ {
			if rest[i] == '\\' {
				i++
			}
		}
		s, err := strconv.Unquote(rest[:i+1])
		if err != nil {
			s = rest[1:i] // a \xNN escape Go reads too; anything else is compared as written
		}
		args = append(args, s)
		rest = strings.TrimSpace(rest[i+1:])
	}
	return args, from
}
