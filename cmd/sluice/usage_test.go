package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/internal/redistest"
	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/storetest"
)

// usageConfig is a monthly quota in Berlin that keeps a year of history,
// with credits beside it.
const usageConfig = `
policies:
  - name: api
    limits:
      - {name: monthly, by: [key], period: month, timezone: Europe/Berlin, limit: 350, history: 12}
      - {name: balance, by: [key], credits: 1000000}
`

// TestUsageScriptedYear: a year of decisions on Redis on the store's own
// manual clock, through the Go API; then sluice usage --at the first
// instant of the next year --csv prints, on the store directly and
// through a running server, the 12 monthly totals that the script counts
// on its own (by the local month of each admitted request), and 0 for the
// new year's January.
func TestUsageScriptedYear(t *testing.T) {
	t.Parallel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	rs := redistest.Start(t)
	clock := storetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, berlin))
	st, err := redisstore.New(redisstore.Config{Addrs: []string{rs.Addr()}, Prefix: "sluice", Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	file := writeFile(t, t.TempDir(), "sluice.yaml", usageConfig)
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatal(err)
	}
	p := cfg.Policy("api")
	lim := sluice.NewLimiter(st, sluice.Config{Timeout: 10 * time.Second})
	defer lim.Close()

	// The script: every 7h13m through 2026, 0 to 3 requests (by the
	// month: none in April, August and December) of cost 1 to 3 (from a
	// fixed sequence) for key acme, and now and then one for key other.
	// Some months pass the limit of 350, which denies some; the count is
	// of the admitted ones, by their local month.
	ctx := context.Background()
	var want [12]int64
	denied, n := 0, 0
	end := time.Date(2027, 1, 1, 0, 0, 0, 0, berlin)
	for i := 0; clock.Now().Before(end); i++ {
		for range int(clock.Now().In(berlin).Month()) % 4 {
			n++
			cost := int64(1 + (n*7)%3)
			d, err := lim.AllowN(ctx, p, map[string]string{"key": "acme"}, cost)
			if err != nil {
				t.Fatal(err)
			}
			if d.Allowed {
				want[clock.Now().In(berlin).Month()-1] += cost
			} else {
				denied++
			}
		}
		if i%5 == 0 {
			if _, err := lim.AllowN(ctx, p, map[string]string{"key": "other"}, 2); err != nil {
				t.Fatal(err)
			}
		}
		clock.Advance(7*time.Hour + 13*time.Minute)
	}
	if denied == 0 {
		t.Fatal("the script was never denied; some of its months should pass the limit of 350")
	}
	wantCSV := "period_start,period_end,used,limit\n2027-01-01T00:00:00+01:00,2027-02-01T00:00:00+01:00,0,350\n"
	for m := 12; m >= 1; m-- {
		start := time.Date(2026, time.Month(m), 1, 0, 0, 0, 0, berlin)
		wantCSV += fmt.Sprintf("%s,%s,%d,350\n", start.Format(time.RFC3339), start.AddDate(0, 1, 0).Format(time.RFC3339), want[m-1])
	}
	t.Logf("admitted by month: %v (%d denied)", want, denied)

	args := []string{"usage", "--policy", "api", "--attr", "key=acme", "--at", "2027-01-01T00:00:00+01:00", "--csv"}
	code, out, errOut := runCLI(t, append(args, "--config", file, "--redis", "redis://"+rs.Addr())...)
	if code != 0 || out != wantCSV {
		t.Fatalf("sluice usage on the store: exit %d\n%s\n%s\nwant:\n%s", code, out, errOut, wantCSV)
	}

	// Through a running server's admin listener, and its public listener
	// with the admin token; a credit topped up twice with one id is added
	// once.
	srv := startServeArgs(t, []string{adminTokenEnv + "=tok"}, "--config", file, "--redis", "redis://"+rs.Addr(), "--admin", "127.0.0.1:0")
	for _, server := range []string{"http://" + srv.adminAddr(), srv.HTTP} {
		code, out, errOut = runCLIEnv(t, []string{adminTokenEnv + "=tok"}, append(args, "--server", server)...)
		if code != 0 || out != wantCSV {
			t.Fatalf("sluice usage --server %s: exit %d\n%s\n%s\nwant:\n%s", server, code, out, errOut, wantCSV)
		}
	}
	credit := func(args ...string) string {
		t.Helper()
		code, out, errOut := runCLIEnv(t, []string{adminTokenEnv + "=tok"}, append(append([]string{"credits"}, args...),
			"--server", srv.HTTP, "--policy", "api", "--attr", "key=acme")...)
		if code != 0 {
			t.Fatalf("sluice credits %s: exit %d %s %s", strings.Join(args, " "), code, out, errOut)
		}
		return strings.TrimSpace(out)
	}
	start := credit("get")
	var balance int64
	if _, err := fmt.Sscanf(start, "balance %d", &balance); err != nil {
		t.Fatalf("sluice credits get printed %q: %v", start, err)
	}
	if got, want := credit("add", "--amount", "500", "--id", "inv-7"), fmt.Sprintf("balance %d (add 500 applied)", balance+500); got != want {
		t.Errorf("first add: %q, want %q", got, want)
	}
	if got, want := credit("add", "--amount", "500", "--id", "inv-7"), fmt.Sprintf(`balance %d (not applied: id "inv-7" was applied to this balance before)`, balance+500); got != want {
		t.Errorf("the add repeated: %q, want %q", got, want)
	}
}
