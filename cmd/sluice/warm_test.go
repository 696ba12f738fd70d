//go:build soak

package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicerate/sluice/internal/redistest"
)

// warmConfig is the notifier's hierarchy: a global cap over per-category
// caps, on a Redis Cluster, with the default decision deadline.
const warmConfig = `
policies:
  - name: notify
    limits:
      - {name: global, limit: 1000000, window: 1m}
      - {name: category, by: [category], limit: 100, window: 1m}
`

// TestServeWarmCluster starts a fresh deployment of three sluice servers on
// a 3-master Redis Cluster whose script caches are empty, waits until each
// answers /readyz, and then sends the notifier's decisions from 64 clients
// for a second: none may be degraded and none may find its script missing
// (no NOSCRIPT, no script sent by its source), five runs in a row. A server
// that said ready before it loaded its scripts on every master would load
// them with its first decisions, which under load miss their deadline and
// are failed closed.
//
// It measures latency under load, so it runs with make soak (-tags soak),
// not with make test's race detector.
func TestServeWarmCluster(t *testing.T) {
	c := redistest.StartCluster(t)
	for run := range 5 {
		for _, n := range c.Nodes() {
			for _, cmd := range [][]string{{"SCRIPT", "FLUSH"}, {"CONFIG", "RESETSTAT"}} {
				if _, err := n.Do(cmd...); err != nil {
					t.Fatal(err)
				}
			}
		}
		prefix := fmt.Sprintf("warm%d", run)
		section := fmt.Sprintf("store:\n  redis:\n    addrs: [\"%s\"]\n    mode: cluster\n  prefix: %s\n", strings.Join(c.Addrs(), `", "`), prefix)
		file := writeFile(t, t.TempDir(), "sluice.yaml", section+warmConfig)
		var servers []*serveProc
		for range 3 {
			servers = append(servers, startServe(t, file))
		}
		for _, p := range servers {
			waitReady(t, p)
		}
		degraded, total, slowest := load(t, servers, 64, time.Second)
		evals, noscript := scriptStats(t, c)
		t.Logf("run %d: %d decisions in the first second, %d degraded, slowest %v; %d EVAL and %d NOSCRIPT on the masters", run+1, total, degraded, slowest, evals, noscript)
		if evals+noscript != 0 {
			t.Errorf("run %d: decisions after /readyz sent %d scripts by source and met %d NOSCRIPT: the servers were not warm", run+1, evals, noscript)
		}
		d2, t2, s2 := load(t, servers, 64, time.Second)
		t.Logf("run %d: %d decisions in the next second, %d degraded, slowest %v", run+1, t2, d2, s2)
		if degraded != 0 {
			t.Errorf("run %d: %d of %d decisions in the first second were degraded", run+1, degraded, total)
			for _, p := range servers {
				t.Logf("%s logged:\n%s", p.HTTP, p.logText())
			}
		}
		for _, p := range servers {
			p.stop()
		}
	}
}

// scriptStats returns how many EVAL calls (a script sent by its source,
// after a NOSCRIPT) and NOSCRIPT errors c's masters counted since their
// statistics were reset.
func scriptStats(t *testing.T, c *redistest.Cluster) (evals, noscript int) {
	t.Helper()
	for _, m := range c.Masters() {
		for _, section := range []string{"commandstats", "errorstats"} {
			info, err := m.Do("INFO", section)
			if err != nil {
				t.Fatal(err)
			}
			for line := range strings.SplitSeq(info, "\n") {
				var n int
				if _, err := fmt.Sscanf(line, "cmdstat_eval:calls=%d", &n); err == nil {
					evals += n
				}
				if _, err := fmt.Sscanf(line, "errorstat_NOSCRIPT:count=%d", &n); err == nil {
					noscript += n
				}
			}
		}
	}
	return evals, noscript
}

// waitReady polls p's /readyz until it answers 200.
func waitReady(t *testing.T, p *serveProc) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := http.Get(p.HTTP + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/readyz did not answer 200 in 30s (last: %v)", p.HTTP, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// load sends decisions of the notify policy from clients goroutines, over
// servers in turn, for d, and counts the degraded ones.
func load(t *testing.T, servers []*serveProc, clients int, d time.Duration) (degraded, total int64, slowest time.Duration) {
	t.Helper()
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		fail atomic.Value
	)
	end := time.Now().Add(d)
	slow := make([]int, d/(100*time.Millisecond)+1) // per 100 ms
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; time.Now().Before(end); n++ {
				p := servers[(i+n)%len(servers)]
				body := fmt.Sprintf(`{"policy":"notify","attributes":{"category":"c%d"}}`, (i*7919+n)%1000)
				start := time.Now()
				res, err := hc.Post(p.HTTP+"/v1/decide", "application/json", strings.NewReader(body))
				if err != nil {
					fail.Store(err)
					return
				}
				var out struct{ Degraded bool }
				var buf bytes.Buffer
				_, _ = buf.ReadFrom(res.Body)
				res.Body.Close()
				if err := json.Unmarshal(buf.Bytes(), &out); err != nil || res.StatusCode != http.StatusOK && res.StatusCode != http.StatusTooManyRequests {
					fail.Store(fmt.Errorf("POST /v1/decide = %d %s", res.StatusCode, buf.String()))
					return
				}
				took := time.Since(start)
				mu.Lock()
				total++
				if out.Degraded {
					degraded++
				}
				slowest = max(slowest, took)
				if took > 30*time.Millisecond || out.Degraded {
					slow[min(len(slow)-1, int(start.Sub(end.Add(-d))/(100*time.Millisecond)))]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	t.Logf("decisions slower than 30 ms or degraded, by the 100 ms they started in: %v", slow)
	if err, _ := fail.Load().(error); err != nil {
		t.Fatal(err)
	}
	return degraded, total, slowest
}
