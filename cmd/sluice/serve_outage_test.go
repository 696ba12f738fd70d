package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicerate/sluice/internal/redistest"
)

// TestServeRedisStallLogs freezes Redis (SIGSTOP) for 3 s under 4 clients
// of /v1/decide: every answer meanwhile is degraded and denied, the
// metrics count each one, and the server's whole log, from start to stop,
// is at most 10 lines: the outage's first failure, the circuit breaker's
// changes and the store answering again, not a line per decision.
func TestServeRedisStallLogs(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	p := startServe(t, serveFile(t, redisStore{addrs: []string{rs.Addr()}, prefix: "stall", onError: "deny"}, e2eConfig), "--admin", "")

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	var (
		decisions, degraded atomic.Int64
		resumed             atomic.Bool
		healthy             = make(chan struct{}) // a decision before the stall
		recovered           = make(chan struct{}) // a decision after it
		once                [2]sync.Once
		errs                = make(chan error, 4)
	)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				body := fmt.Sprintf(`{"policy":"api","attributes":{"user":"c%d-%d","path":"/p"}}`, c, i)
				res, err := client.Post(p.HTTP+"/v1/decide", "application/json", strings.NewReader(body))
				if err != nil {
					errs <- err
					return
				}
				var d struct{ Allowed, Degraded bool }
				b, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if err := json.Unmarshal(b, &d); res.StatusCode != 200 || err != nil {
					errs <- fmt.Errorf("decide = %d %s", res.StatusCode, b)
					return
				}
				decisions.Add(1)
				switch {
				case d.Degraded && d.Allowed:
					errs <- fmt.Errorf("a degraded decision allowed the request under on_error: deny")
					return
				case d.Degraded:
					degraded.Add(1)
				case resumed.Load():
					once[1].Do(func() { close(recovered) })
				default:
					once[0].Do(func() { close(healthy) })
				}
			}
		})
	}
	defer func() { stop(); wg.Wait() }()
	wait := func(ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case err := <-errs:
			t.Fatal(err)
		case <-time.After(20 * time.Second):
			t.Fatalf("no %s after 20s:\n%s", what, p.logText())
		}
	}
	wait(healthy, "decision before the stall")

	if err := rs.Pause(); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	stall := time.NewTimer(3 * time.Second) // the fault: Redis frozen for 3 s
	select {
	case <-stall.C:
	case err := <-errs:
		_ = rs.Resume()
		t.Fatal(err)
	}
	resumed.Store(true)
	if err := rs.Resume(); err != nil {
		t.Fatal(err)
	}
	stalled := time.Since(paused)
	wait(recovered, "decision from Redis after SIGCONT")
	stop()
	wg.Wait()
	m := string(p.do("GET", "/metrics", "").Body)
	p.stop()

	if degraded.Load() == 0 {
		t.Fatalf("no degraded decision in %v of SIGSTOP", stalled)
	}
	// The metrics still count every decision.
	if want := fmt.Sprintf(`sluice_degraded_decisions_total{outcome="denied",policy="api"} %d`, degraded.Load()); !strings.Contains(m, want+"\n") {
		t.Errorf("/metrics lacks %q:\n%s", want, regexp.MustCompile(`(?m)^sluice_degraded.*$`).FindAllString(m, -1))
	}

	p.mu.Lock()
	logs := p.logs
	p.mu.Unlock()
	var lines strings.Builder
	count := map[string]int{}
	for _, rec := range logs {
		line, _ := json.Marshal(rec)
		lines.Write(line)
		lines.WriteByte('\n')
		count[rec["msg"].(string)]++
	}
	t.Logf("SIGSTOP for %v under 4 clients: %d decisions, %d degraded; the server logged %d lines:\n%s",
		stalled.Round(time.Millisecond), decisions.Load(), degraded.Load(), len(logs), lines.String())
	if len(logs) > 12 {
		t.Errorf("%d log lines, want at most 12", len(logs))
	}
	known := map[string]int{ // the most of each line
		"sluice serving":                    1,
		"store failed; decided by on_error": 1,
		"store circuit breaker open: the store is not called until a probe succeeds": 1,
		"store circuit breaker half-open: one call probes the store":                 1,
		"store answers again":                                                         3, // a failure before or after the stall (a timeout under load) is an outage of its own
		"shutting down; finishing the requests in flight":                             1,
		"runtime overrides: the store did not answer; the last set read stays in use": 1,
		"runtime overrides: the store answers again":                                  1,
		"sluice stopped": 1,
	}
	for msg, n := range count {
		if n > known[msg] {
			t.Errorf("%q logged %d times, want at most %d", msg, n, known[msg])
		}
	}
	for _, msg := range []string{"store failed; decided by on_error", "store answers again"} {
		if count[msg] == 0 {
			t.Errorf("no %q line", msg)
		}
	}
	var failed int64 // the failures the ends count
	var end map[string]any
	for _, rec := range logs {
		switch rec["msg"] {
		case "store failed; decided by on_error":
			if rec["policy"] != "api" || rec["err"] == nil || rec["err"] == "" {
				t.Errorf("the first failure does not name its policy and error: %v", rec)
			}
		case "store answers again":
			n, _ := rec["failed"].(float64)
			failed += int64(n)
			if outage, _ := time.ParseDuration(fmt.Sprint(rec["outage"])); end == nil || outage > stalled/2 {
				end = rec // the stall's
			}
		}
	}
	// Decisions answered by the open circuit before the probe closed it
	// are not counted after the end: at most one per client.
	if failed > degraded.Load() || failed < degraded.Load()-4 {
		t.Errorf("the ends count %d failed decisions; the clients saw %d", failed, degraded.Load())
	}
	if outage, err := time.ParseDuration(fmt.Sprint(end["outage"])); err != nil || outage < stalled-time.Second || outage > stalled+5*time.Second {
		t.Errorf("the end says the outage lasted %v (%v); Redis was stopped for %v", end["outage"], err, stalled)
	}
	if end["circuit"] != "closed" || end["policies"] == nil {
		t.Errorf("the end lacks the circuit's state or the policies: %v", end)
	}
}
