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
// for a second: none may be degraded, five runs in a row. A server that
// said ready before it loaded its scripts on every master and learnt the
// slot map would fail its first decisions closed while it does.
//
// It measures latency under load, so it runs with make soak (-tags soak),
// not with make test's race detector.
func TestServeWarmCluster(t *testing.T) {
	c := redistest.StartCluster(t)
	for run := range 5 {
		for _, n := range c.Nodes() {
			if _, err := n.Do("SCRIPT", "FLUSH"); err != nil {
				t.Fatal(err)
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
		t.Logf("run %d: %d decisions in the first second, %d degraded, slowest %v", run+1, total, degraded, slowest)
		d2, t2, s2 := load(t, servers, 64, time.Second)
		t.Logf("run %d: %d decisions in the next second, %d degraded, slowest %v", run+1, t2, d2, s2)
		if degraded != 0 {
			t.Errorf("run %d: %d of %d decisions in the first second were degraded", run+1, degraded, total)
		}
		for _, p := range servers {
			p.stop()
		}
	}
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
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err, _ := fail.Load().(error); err != nil {
		t.Fatal(err)
	}
	return degraded, total, slowest
}
