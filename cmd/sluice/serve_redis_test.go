package main

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicerate/sluice/internal/redistest"
)

// TestServeRedisCluster serves from a Redis Cluster (store.redis.mode:
// cluster): the notifier's policy lands in one slot, per-user policies spread.
func TestServeRedisCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t)
	file := serveFile(t, redisStore{addrs: c.Addrs(), mode: "cluster", prefix: "cl", timeout: "2s"}, e2eConfig)
	p := startServe(t, file)
	type decision struct {
		Allowed  bool
		DeniedBy string `json:"denied_by"`
		Degraded bool
	}
	for i := range 11 {
		var d decision
		p.post("/v1/decide", `{"policy":"notify","attributes":{"category":"c"}}`, &d)
		if d.Degraded || d.Allowed != (i < 10) {
			t.Fatalf("decision %d = %+v", i, d)
		}
	}
	for u := range 20 {
		var d decision
		p.post("/v1/decide", fmt.Sprintf(`{"policy":"api","attributes":{"user":"u%d","path":"/p%d"}}`, u, u), &d)
		if !d.Allowed || d.Degraded {
			t.Fatalf("user %d = %+v", u, d)
		}
	}
	// inspect finds the windows with SCAN over the cluster's nodes.
	code, out, errOut := runCLI(t, "inspect", "--redis", "redis://"+c.Addrs()[0], "--prefix", "cl", "--policy", "notify", "--attr", "category=c", "--json")
	var in inspectOutput
	if code != 0 {
		t.Fatalf("inspect = %d %s", code, errOut)
	}
	(&response{Body: []byte(out)}).JSON(t, &in)
	if len(in.Windows) != 2 || len(in.Windows[0].Entries) != 10 || len(in.Windows[1].Entries) != 10 {
		t.Errorf("inspect on the cluster = %+v, want two windows of 10 entries", in.Windows)
	}
	// With the file, inspect names the keys, which lie in several slots.
	code, out, errOut = runCLI(t, "inspect", "--config", file, "--policy", "notify", "--attr", "category=c", "--json")
	if code != 0 {
		t.Fatalf("inspect --config = %d %s", code, errOut)
	}
	in = inspectOutput{}
	(&response{Body: []byte(out)}).JSON(t, &in)
	if len(in.Windows) != 2 || in.Windows[1].Counted == nil || *in.Windows[1].Counted != 10 {
		t.Errorf("inspect --config on the cluster = %+v", in.Windows)
	}
	var r struct{ OK bool }
	p.post("/v1/reserve", `{"schedule":"carrier","attributes":{"carrier":"1"}}`, &r)
	if !r.OK {
		t.Error("reserve on the cluster failed")
	}
	if res := p.do("GET", "/readyz", ""); res.Status != 200 {
		t.Errorf("/readyz = %d", res.Status)
	}
}

// TestServeRedisDown pauses Redis under a running server: decisions are
// degraded and denied (on_error: deny), /readyz answers 503, and both
// recover when Redis does.
func TestServeRedisDown(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	file := serveFile(t, redisStore{addrs: []string{rs.Addr()}, prefix: "down", timeout: "200ms", onError: "deny"}, e2eConfig)
	p := startServe(t, file)
	body := `{"policy":"notify","attributes":{"category":"c"}}`
	type decision struct{ Allowed, Degraded bool }
	var d decision
	p.post("/v1/decide", body, &d)
	if !d.Allowed || d.Degraded {
		t.Fatalf("before the pause: %+v", d)
	}
	if err := rs.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			_ = rs.Resume()
		}
	}()
	start := time.Now()
	p.post("/v1/decide", body, &d)
	if d.Allowed || !d.Degraded {
		t.Errorf("while Redis is paused: %+v, want degraded and denied", d)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("a degraded decision took %v; the store timeout is 200ms", took)
	}
	if res := p.do("GET", "/readyz", ""); res.Status != 503 {
		t.Errorf("/readyz while Redis is paused = %d, want 503", res.Status)
	}
	if err := rs.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	deadline := time.Now().Add(10 * time.Second)
	for {
		p.post("/v1/decide", body, &d)
		if d.Allowed && !d.Degraded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("decisions did not recover after Redis resumed: %+v", d)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if res := p.do("GET", "/readyz", ""); res.Status != 200 {
		t.Errorf("/readyz after the resume = %d", res.Status)
	}
	m := string(p.do("GET", "/metrics", "").Body)
	if !strings.Contains(m, `sluice_degraded_decisions_total{outcome="denied",policy="notify"}`) || !strings.Contains(m, `sluice_store_errors_total{op="decide"}`) {
		t.Errorf("/metrics lacks the degraded decision or the store error")
	}
}

// TestServeRedisSentinel serves through Sentinel (store.redis.mode:
// sentinel): the sentinels' addresses and the master's name find the
// master. With wait_for_replicas, a decision the replica does not
// acknowledge is decided by the failure policy.
func TestServeRedisSentinel(t *testing.T) {
	t.Parallel()
	st := redistest.StartSentinel(t)
	file := serveFile(t, redisStore{addrs: st.Addrs(), mode: "sentinel", master: redistest.SentinelMaster, waitForReplicas: true,
		prefix: "st", timeout: "2s"}, e2eConfig)
	p := startServe(t, file)
	for i := range 11 {
		var d struct{ Allowed, Degraded bool }
		p.post("/v1/decide", `{"policy":"notify","attributes":{"category":"c"}}`, &d)
		if d.Degraded || d.Allowed != (i < 10) {
			t.Fatalf("decision %d = %+v", i, d)
		}
	}
	keys, err := st.Master().Do("KEYS", "st:*")
	if err != nil || !strings.Contains(keys, "st:{notify}2l:category:c") {
		t.Errorf("the master holds %q, %v; want the notify keys", keys, err)
	}
	replica := st.Replica()
	if err := replica.Pause(); err != nil {
		t.Fatal(err)
	}
	var d struct{ Allowed, Degraded bool }
	p.post("/v1/decide", `{"policy":"notify","attributes":{"category":"d"}}`, &d)
	if err := replica.Resume(); err != nil {
		t.Fatal(err)
	}
	if d.Allowed || !d.Degraded {
		t.Errorf("with the replica frozen: %+v, want denied by the failure policy", d)
	}
}

// TestServeRedisLayout1: with store.layout 1, the server reads and writes
// the key names of the versions before layout 2, for the first step of a
// rolling upgrade (docs/design.md, Upgrades); inspect reads them with the
// same file.
func TestServeRedisLayout1(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	file := serveFile(t, redisStore{addrs: []string{srv.Addr()}, prefix: "l1", layout: 1, timeout: "2s"}, e2eConfig)
	p := startServe(t, file)
	var d struct{ Allowed, Degraded bool }
	p.post("/v1/decide", `{"policy":"notify","attributes":{"category":"c"}}`, &d)
	if !d.Allowed || d.Degraded {
		t.Fatalf("decision = %+v", d)
	}
	keys, err := srv.Do("KEYS", "l1:*")
	if err != nil || keys != "l1:{notify}:notify:category:c\nl1:{notify}:notify:global" && keys != "l1:{notify}:notify:global\nl1:{notify}:notify:category:c" {
		t.Errorf("Redis holds %q, %v; want layout 1's two notify keys", keys, err)
	}
	code, out, errOut := runCLI(t, "inspect", "--config", file, "--policy", "notify", "--attr", "category=c", "--json")
	var in inspectOutput
	if code != 0 {
		t.Fatalf("inspect = %d %s", code, errOut)
	}
	(&response{Body: []byte(out)}).JSON(t, &in)
	if len(in.Windows) != 2 || len(in.Windows[1].Entries) != 1 {
		t.Errorf("inspect of layout 1 = %+v, want two windows of one entry", in.Windows)
	}
}

// TestServeStartsWarm starts sluice serve on a Redis that holds no script:
// the server loads them before anything it does at its start (the runtime
// overrides' first read), and its first decisions find them, so Redis
// never runs a script sent by its source nor answers NOSCRIPT.
// (TestServeWarmCluster, under make soak, checks the same of three servers
// on a Cluster under load.)
func TestServeStartsWarm(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	if _, err := srv.Do("CONFIG", "RESETSTAT"); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, serveFile(t, redisStore{addrs: []string{srv.Addr()}, prefix: "warm", timeout: "2s"}, e2eConfig))
	for range 3 {
		var d struct{ Allowed, Degraded bool }
		p.post("/v1/decide", `{"policy":"notify","attributes":{"category":"c"}}`, &d)
		if !d.Allowed || d.Degraded {
			t.Fatalf("decision = %+v, want allowed", d)
		}
	}
	for _, section := range []string{"commandstats", "errorstats"} {
		info, err := srv.Do("INFO", section)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(info, "cmdstat_eval:") || strings.Contains(info, "errorstat_NOSCRIPT") {
			t.Errorf("after the server's start and its first decisions, INFO %s:\n%s\nwant no EVAL and no NOSCRIPT", section, info)
		}
	}
}

// TestServeRedisLater starts sluice serve on a standalone Redis that is
// down and starts it 5 s later: /readyz answers 503 until Redis answers,
// then 200, and the first decision after that comes from Redis (not
// degraded). The start unready and the end of it are logged once each.
// With --require-store, serve exits at once instead.
func TestServeRedisLater(t *testing.T) {
	t.Parallel()
	t0 := time.Now()
	rs := redistest.Start(t)
	if err := rs.Shut(); err != nil {
		t.Fatal(err)
	}
	if pong, err := rs.Do("PING"); err == nil {
		t.Fatalf("Redis answers %q after Shut", pong)
	}
	file := serveFile(t, redisStore{addrs: []string{rs.Addr()}, prefix: "later", timeout: "200ms", onError: "deny"}, e2eConfig)

	code, _, errOut := runCLI(t, "serve", "--config", file, "--http", "127.0.0.1:0", "--admin", "", "--require-store")
	if code != exitUsage || !strings.Contains(errOut, "connecting to Redis") {
		t.Errorf("serve --require-store on a Redis that is down: exit %d, %q; want 2 and connecting to Redis", code, errOut)
	}

	p := startServe(t, file, "--admin", "")
	p.waitLog("sluice serving", 30*time.Second)
	t.Logf("serving at %v", time.Since(t0))
	body := `{"policy":"notify","attributes":{"category":"c"}}`
	var d struct{ Allowed, Degraded bool }
	p.post("/v1/decide", body, &d)
	if d.Allowed || !d.Degraded {
		t.Errorf("a decision before Redis starts: %+v, want degraded and denied (on_error: deny)", d)
	}
	var starting atomic.Bool // set before Redis starts: /readyz may answer 200 from then on
	started := make(chan error, 1)
	begin := time.Now()
	time.AfterFunc(5*time.Second, func() { starting.Store(true); started <- rs.Restart() })
	t.Cleanup(func() { <-started })
	deadline := time.Now().Add(60 * time.Second)
	for status := 0; status != 200; {
		res, err := http.Get(p.HTTP + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if status = res.StatusCode; status != 503 && status != 200 || status == 200 && !starting.Load() {
			t.Fatalf("/readyz = %d before Redis started, want 503", status)
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz did not answer 200 within 60s:\n%s", p.logText())
		}
		time.Sleep(20 * time.Millisecond) // the pace of a readiness probe
	}
	t.Logf("/readyz answers 200 %v after serve started, Redis started 5s after", time.Since(begin))
	p.post("/v1/decide", body, &d)
	if !d.Allowed || d.Degraded {
		t.Errorf("the first decision once ready: %+v, want allowed from Redis", d)
	}
	if keys, err := rs.Do("KEYS", "later:*"); err != nil || keys == "" {
		t.Errorf("Redis holds no key of the decision: %q, %v", keys, err)
	}
	p.waitLog("the store answers; ready", 10*time.Second)
	logs := p.logText()
	if n := strings.Count(logs, "the store does not answer; serving unready"); n != 1 {
		t.Errorf("the start unready is logged %d times, want once:\n%s", n, logs)
	}
	if n := strings.Count(logs, "the store answers; ready"); n != 1 {
		t.Errorf("the store answering is logged %d times, want once:\n%s", n, logs)
	}
}
