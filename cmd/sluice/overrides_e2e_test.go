package main

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicerate/sluice/internal/redistest"
)

// overridesConfig is the file of the runtime overrides' tests: per-user 5
// an hour, decided in memory while Redis fails.
func overridesConfig(addr string) string {
	return fmt.Sprintf(`store:
  redis:
    addrs: [%q]
  prefix: ovr
  timeout: 200ms
  on_error: fallback
policies:
  - name: api
    limits:
      - {name: per-user, by: [user], limit: 5, window: 1h}
`, addr)
}

// admin sends a request to the admin listener of p with token (none when
// empty) and reads the response.
func (p *serveProc) admin(method, path, body, token string) *response {
	p.t.Helper()
	var header []string
	if token != "" {
		header = []string{"Authorization", "Bearer " + token}
	}
	return request(p.t, method, "http://"+p.adminAddr()+path, body, header...)
}

// override runs sluice override SUBCOMMAND ARGS... against p's admin
// listener, with env added to the environment, and returns what it
// printed; it must exit 0.
func (p *serveProc) override(env []string, args ...string) string {
	p.t.Helper()
	args = append([]string{"override", args[0], "--admin", p.adminAddr()}, args[1:]...)
	code, out, errOut := runCLIEnv(p.t, append(os.Environ(), env...), args...)
	if code != exitOK {
		p.t.Fatalf("sluice %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
	}
	return out
}

// userLimit is what a request of user on p says of its per-user limit:
// peeked, or decided when decide is set.
func userLimit(p *serveProc, user string, decide bool) (limit int64, degraded bool) {
	p.t.Helper()
	path := "/v1/peek"
	if decide {
		path = "/v1/decide"
	}
	var d struct {
		Degraded bool
		Limits   []struct{ Limit int64 }
	}
	p.post(path, `{"policy":"api","attributes":{"user":"`+user+`"}}`, &d)
	if len(d.Limits) != 1 {
		p.t.Fatalf("%s for %s: %+v, want one limit", path, user, d)
	}
	return d.Limits[0].Limit, d.Degraded
}

// waitLimit waits until every instance's peek for user says want, within
// bound of from, and checks that a decide on each says so too. It returns
// how long the slowest took.
func waitLimit(t *testing.T, procs []*serveProc, user string, want int64, from time.Time, bound time.Duration) time.Duration {
	t.Helper()
	var slowest time.Duration
	for i, p := range procs {
		for {
			got, _ := userLimit(p, user, false)
			if got == want {
				break
			}
			if time.Since(from) > bound {
				t.Fatalf("instance %d: %s's limit is %d %v after the change, want %d", i+1, user, got, time.Since(from).Round(time.Millisecond), want)
			}
			time.Sleep(10 * time.Millisecond) // the instances poll every 250 ms
		}
		slowest = max(slowest, time.Since(from))
		if got, _ := userLimit(p, user, true); got != want {
			t.Errorf("instance %d: a decide for %s says limit %d, want %d", i+1, user, got, want)
		}
	}
	return slowest
}

// TestServeOverridesEverywhere runs three sluice serve on one Redis: an
// override set through one is applied by all three within a second, a
// wildcard applies to a key never seen, an override with an end ends on
// time, a delete gives the file's limit back, and with Redis stopped the
// decisions (from the in-memory fallback) keep the last overrides read.
// Changes go through the admin API and through sluice override, with the
// admin token.
func TestServeOverridesEverywhere(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	file := writeFile(t, t.TempDir(), "sluice.yaml", overridesConfig(rs.Addr()))
	const token = "ops-secret"
	tokenEnv := []string{adminTokenEnv + "=" + token}
	var procs []*serveProc
	for range 3 {
		procs = append(procs, startServeArgs(t, tokenEnv, "--config", file, "--admin", "127.0.0.1:0"))
	}
	cli := func(p *serveProc, args ...string) string { t.Helper(); return p.override(tokenEnv, args...) }
	for i, p := range procs {
		if got, _ := userLimit(p, "acme", false); got != 5 {
			t.Fatalf("instance %d: acme's limit %d before any override, want the file's 5", i+1, got)
		}
	}
	set := func(via *serveProc, body string) {
		t.Helper()
		if r := via.admin("PUT", "/api/v1/overrides", body, token); r.Status != 200 {
			t.Fatalf("PUT %s = %d %s", body, r.Status, r.Body)
		}
	}

	start := time.Now()
	set(procs[0], `{"policy":"api","rule":"per-user","values":["acme"],"limit":50,"reason":"launch"}`)
	took := waitLimit(t, procs, "acme", 50, start, time.Second)
	t.Logf("an override set through instance 1 applied on all three in %v", took.Round(time.Millisecond))

	start = time.Now()
	out := cli(procs[1], "set", "--policy", "api", "--rule", "per-user", "--value", "premium_*", "--limit", "100", "--reason", "premium tier")
	if !strings.HasPrefix(out, "set api:per-user:premium_*: limit 100; set by admin at ") {
		t.Errorf("sluice override set says %q", out)
	}
	took = waitLimit(t, procs, "premium_new", 100, start, time.Second)
	t.Logf("a wildcard set through instance 2 applied to a new key on all three in %v", took.Round(time.Millisecond))

	// An override that ends: seen while it lasts, never after, and the
	// file's limit from its end on, within the bound.
	end := time.Now().Add(2 * time.Second).UTC().Truncate(time.Millisecond)
	set(procs[2], `{"policy":"api","rule":"per-user","values":["temp"],"limit":77,"until":"`+end.Format(time.RFC3339Nano)+`"}`)
	waitLimit(t, procs, "temp", 77, time.Now(), time.Second)
	var wg sync.WaitGroup
	lateness := make([]time.Duration, len(procs))
	for i, p := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				before := time.Now()
				got, _ := userLimit(p, "temp", false)
				after := time.Now()
				switch {
				case got == 77 && before.After(end):
					if after.Sub(end) > time.Second {
						t.Errorf("instance %d: temp still has 77 %v after its end", i+1, after.Sub(end))
						return
					}
				case got == 77:
				case got == 5 && after.Before(end):
					t.Errorf("instance %d: temp lost its override %v before its end", i+1, end.Sub(after))
					return
				case got == 5:
					lateness[i] = before.Sub(end)
					return
				default:
					t.Errorf("instance %d: temp's limit %d, want 77 then 5", i+1, got)
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	t.Logf("the override that ended: the file's limit again on each instance at most %v after its end", slices.Max(lateness).Round(time.Millisecond))

	start = time.Now()
	if out := cli(procs[1], "delete", "--policy", "api", "--rule", "per-user", "--value", "acme"); out != "deleted api:per-user:acme\n" {
		t.Errorf("sluice override delete says %q", out)
	}
	took = waitLimit(t, procs, "acme", 5, start, time.Second)
	t.Logf("a delete through instance 2 gave the file's limit back on all three in %v", took.Round(time.Millisecond))

	out = cli(procs[2], "list")
	if !regexp.MustCompile(`(?m)^api:per-user:premium_\*\s+active\s+limit 100; set by admin at \S+ \(premium tier\)$`).MatchString(out) ||
		strings.Contains(out, "acme") {
		t.Errorf("sluice override list through instance 3:\n%s", out)
	}
	// Each change is logged where it was made, with the token that made it.
	for _, msg := range []string{"runtime override set", "runtime override deleted"} {
		if rec := procs[1].waitLog(msg, time.Second); rec["who"] != "admin" {
			t.Errorf("%q logged as %v, want who=admin", msg, rec)
		}
	}

	// Redis stopped: the last overrides read stay in use, here in the
	// decisions of the memory fallback.
	if err := rs.Pause(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rs.Resume() })
	for i, p := range procs {
		got, degraded := userLimit(p, "premium_x", true)
		if !degraded || got != 100 {
			t.Errorf("instance %d with Redis stopped: premium_x's limit %d (degraded %v), want the wildcard's 100 from the fallback", i+1, got, degraded)
		}
		if got, _ := userLimit(p, "zed", true); got != 5 {
			t.Errorf("instance %d with Redis stopped: zed's limit %d, want the file's 5", i+1, got)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for i, p := range procs {
		for {
			var l struct {
				Stale     bool
				Overrides []struct{ ID string }
			}
			if err := json.Unmarshal(p.admin("GET", "/api/v1/overrides", "", token).Body, &l); err != nil {
				t.Fatal(err)
			}
			if l.Stale {
				if len(l.Overrides) != 1 || l.Overrides[0].ID != "api:per-user:premium_*" {
					t.Errorf("instance %d with Redis stopped lists %+v, want the wildcard it read last", i+1, l.Overrides)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("instance %d does not say its overrides are stale with Redis stopped", i+1)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	if out := cli(procs[0], "list"); !strings.HasPrefix(out, "the store does not answer") || !strings.Contains(out, "api:per-user:premium_*") {
		t.Errorf("sluice override list with Redis stopped:\n%s", out)
	}
}

// TestServeEnvoyOverride: a runtime override on an Envoy domain, set and
// deleted with sluice override, changes what /json answers for the
// descriptors it matches, and only for them.
func TestServeEnvoyOverride(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "rl.yaml", "domain: rl\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 10}\n")
	p := startServeArgs(t, nil, "--envoy-config", dir, "--admin", "127.0.0.1:0")
	// check asks /json for user and returns the status code and the limit.
	check := func(user string) (int, string, float64) {
		t.Helper()
		r := p.do("POST", "/json", `{"domain":"rl","descriptors":[{"entries":[{"key":"user","value":"`+user+`"}]}]}`)
		var res struct {
			Statuses []struct {
				Code         string
				CurrentLimit struct{ RequestsPerUnit float64 }
			}
		}
		r.JSON(t, &res)
		if len(res.Statuses) != 1 {
			t.Fatalf("/json for %s: %d %s", user, r.Status, r.Body)
		}
		return r.Status, res.Statuses[0].Code, res.Statuses[0].CurrentLimit.RequestsPerUnit
	}
	if status, code, limit := check("bot_7"); status != 200 || code != "OK" || limit != 10 {
		t.Fatalf("bot_7 before any override: %d %s, limit %v; want OK at the file's 10", status, code, limit)
	}
	out := p.override(nil, "set", "--domain", "rl", "--rule", "user", "--value", "bot_*", "--blocked", "--for", "1h", "--reason", "scraping")
	if !strings.HasPrefix(out, "set envoy%2Frl:user:bot_*: blocked, until ") { // the ID escapes the '/' of the Limiter's policy name
		t.Errorf("sluice override set says %q", out)
	}
	if status, code, limit := check("bot_7"); status != 429 || code != "OVER_LIMIT" || limit != 0 {
		t.Errorf("bot_7 blocked: %d %s, limit %v; want 429 OVER_LIMIT at 0", status, code, limit)
	}
	if status, code, limit := check("ann"); status != 200 || code != "OK" || limit != 10 {
		t.Errorf("ann: %d %s, limit %v; want OK at the file's 10", status, code, limit)
	}
	if out := p.override(nil, "delete", "envoy%2Frl:user:bot_*"); out != "deleted envoy%2Frl:user:bot_*\n" {
		t.Errorf("sluice override delete says %q", out)
	}
	if status, code, limit := check("bot_7"); status != 200 || code != "OK" || limit != 10 {
		t.Errorf("bot_7 after the delete: %d %s, limit %v; want OK at the file's 10", status, code, limit)
	}
}
