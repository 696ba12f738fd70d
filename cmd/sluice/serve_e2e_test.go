package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluicerate/sluice/internal/redistest"
	sluicev1 "github.com/sluicerate/sluice/proto/sluice/v1"
)

// e2eConfig is the file the end-to-end tests serve; a redisStore section is
// prepended for Redis.
const e2eConfig = `
policies:
  - name: notify
    limits:
      - {name: global, limit: 100, window: 30m}
      - {name: category, by: [category], limit: 10, window: 30m}
  - name: edge
    limits:
      - {name: per-ip, by: [ip], limit: 3, window: 1m}
  - name: api
    limits:
      - {name: per-user, by: [user], limit: 2, window: 1m}
      - {name: per-path, by: [path], limit: 100, window: 1h}
schedules:
  - {name: carrier, by: [carrier], rate: 4/s, max_delay: 2s}
forward_auth:
  trusted_proxies: ["127.0.0.1"]
`

// redisStore is the store section of a test server's file: Redis at
// addrs in mode (standalone when ""), and the settings that are set.
type redisStore struct {
	addrs           []string
	mode, master    string
	waitForReplicas bool
	prefix          string
	layout          int
	timeout         string // "": the default deadline
	onError         string // "": the default, deny
}

// String is the section as YAML.
func (s redisStore) String() string {
	var b strings.Builder
	quoted := make([]string, len(s.addrs))
	for i, a := range s.addrs {
		quoted[i] = strconv.Quote(a)
	}
	fmt.Fprintf(&b, "store:\n  redis:\n    addrs: [%s]\n", strings.Join(quoted, ", "))
	for _, kv := range [][2]string{{"mode", s.mode}, {"master_name", s.master}} {
		if kv[1] != "" {
			fmt.Fprintf(&b, "    %s: %s\n", kv[0], kv[1])
		}
	}
	if s.waitForReplicas {
		b.WriteString("    wait_for_replicas: true\n")
	}
	fmt.Fprintf(&b, "  prefix: %s\n", s.prefix)
	if s.layout != 0 {
		fmt.Fprintf(&b, "  layout: %d\n", s.layout)
	}
	for _, kv := range [][2]string{{"timeout", s.timeout}, {"on_error", s.onError}} {
		if kv[1] != "" {
			fmt.Fprintf(&b, "  %s: %s\n", kv[0], kv[1])
		}
	}
	return b.String()
}

// serveFile writes a test server's file, the store section s before
// policies, and returns its path.
func serveFile(t *testing.T, s redisStore, policies string) string {
	t.Helper()
	return writeFile(t, t.TempDir(), "sluice.yaml", s.String()+policies)
}

// redisSection is a store section for the Redis at addr.
func redisSection(addr, prefix string) string {
	return redisStore{addrs: []string{addr}, prefix: prefix, timeout: "2s"}.String()
}

func TestServeMemory(t *testing.T) {
	t.Parallel()
	file := writeFile(t, t.TempDir(), "sluice.yaml", e2eConfig)
	exerciseEndpoints(t, startServe(t, file))
}

func TestServeRedis(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	file := writeFile(t, t.TempDir(), "sluice.yaml", redisSection(rs.Addr(), "e2e")+e2eConfig)
	p := startServe(t, file)
	if got := p.waitLog("sluice serving", 0)["store"]; !strings.Contains(fmt.Sprint(got), rs.Addr()) {
		t.Fatalf("store = %v, want Redis at %s", got, rs.Addr())
	}
	exerciseEndpoints(t, p)

	// sluice inspect shows the windows the server wrote.
	code, out, errOut := runCLI(t, "inspect", "--config", file, "--policy", "notify", "--attr", "category=errors", "--json")
	if code != 0 {
		t.Fatalf("inspect = %d\n%s", code, errOut)
	}
	var in inspectOutput
	(&response{Body: []byte(out)}).JSON(t, &in)
	if len(in.Windows) != 2 || in.Windows[1].Rule != "category" || in.Windows[1].Counted == nil || *in.Windows[1].Counted != 10 || len(in.Windows[1].Entries) != 10 ||
		in.Windows[1].TTLMS <= 0 || in.Windows[1].TTLMS > 1800000 || !strings.HasPrefix(in.Windows[1].Key, "e2e:{notify}2l:category") {
		t.Errorf("inspect = %+v", in)
	}
	if in.Next == nil || in.Next.Allowed || in.Next.DeniedBy != "category" || in.Next.Cause != "limit" || in.Windows[1].Cause != "limit" || in.Windows[0].Cause != "" {
		t.Errorf("inspect's next request = %+v (windows %+v), want denied by category for its limit", in.Next, in.Windows)
	}
	code, out, _ = runCLI(t, "inspect", "--config", file, "--policy", "notify", "--attr", "category=errors")
	if code != 0 || !strings.Contains(out, "rule category: 10/10 used per 30m0s; 10 entries; expires in") || !strings.Contains(out, "age ") ||
		!strings.Contains(out, "a request of cost 1 now: denied by rule category, its window is full; retry in") {
		t.Errorf("inspect text = %d\n%s", code, out)
	}
	// Without the file, inspect finds the windows with SCAN.
	code, out, errOut = runCLI(t, "inspect", "--redis", "redis://"+rs.Addr(), "--prefix", "e2e", "--policy", "notify", "--attr", "category=errors", "--json")
	if code != 0 {
		t.Fatalf("inspect --redis = %d\n%s", code, errOut)
	}
	in = inspectOutput{}
	(&response{Body: []byte(out)}).JSON(t, &in)
	rules := map[string]int{}
	for _, w := range in.Windows {
		rules[w.Rule] = len(w.Entries)
		if w.Counted != nil || w.TTLMS <= 0 {
			t.Errorf("window %+v: want no count without the file, and a TTL", w)
		}
	}
	if len(in.Windows) != 2 || rules["category"] != 10 || rules["global"] != 11 {
		t.Errorf("inspect --redis found %v, want category (10 entries) and global (11)", rules)
	}
	code, out, errOut = runCLI(t, "inspect", "--redis", "redis://"+rs.Addr(), "--policy", "notify", "--attr", "category=errors")
	if code != 0 || !strings.Contains(out, "no windows") {
		t.Errorf("inspect under the default prefix = %d %s %s, want no windows", code, out, errOut)
	}

	// sluice check reads the same store: the category is full.
	code, out, _ = runCLI(t, "check", "--config", file, "--policy", "notify", "--attr", "category=errors", "--json")
	if code != 1 || !strings.Contains(out, `"denied_by":"category"`) {
		t.Errorf("check on a full category = %d %s, want 1 and denied by category", code, out)
	}
}

// exerciseEndpoints drives every endpoint of a server running e2eConfig.
func exerciseEndpoints(t *testing.T, p *serveProc) {
	t.Helper()
	type limit struct {
		Name                                         string
		Limit, Used, Remaining, WindowMS, RetryAfter int64
	}
	type decision struct {
		Allowed      bool
		Remaining    int64
		RetryAfterMS int64  `json:"retry_after_ms"`
		ResetAfterMS int64  `json:"reset_after_ms"`
		DeniedBy     string `json:"denied_by"`
		Degraded     bool
		Limits       []limit
	}
	errs := `{"policy":"notify","attributes":{"category":"errors"},"cost":1}`
	for i := range 10 {
		var d decision
		p.post("/v1/decide", errs, &d)
		if !d.Allowed || d.Remaining != int64(9-i) || d.Degraded {
			t.Fatalf("decision %d = %+v", i, d)
		}
	}
	var d decision
	p.post("/v1/decide", errs, &d)
	if d.Allowed || d.DeniedBy != "category" || d.RetryAfterMS <= 0 || d.RetryAfterMS > 1800000 || d.Limits[0].Used != 10 {
		t.Fatalf("11th decision = %+v, want denied by category", d)
	}
	// A peek answers what decide would: the 10 it asks for counted too.
	p.post("/v1/peek", `{"policy":"notify","attributes":{"category":"info"},"cost":10}`, &d)
	if !d.Allowed || d.Limits[0].Used != 20 || d.Limits[1].Used != 10 {
		t.Errorf("peek = %+v", d)
	}
	p.post("/v1/record", `{"policy":"notify","attributes":{"category":"info"},"cost":10}`, &d)
	if d.Limits[0].Used != 20 || d.Limits[1].Used != 10 {
		t.Errorf("record = %+v, want global 20, category 10", d)
	}

	var pol struct {
		Policies  []struct{ Name string }
		Schedules []struct{ Name, Rate string }
	}
	r := p.do("GET", "/v1/policies", "")
	r.JSON(t, &pol)
	if r.Status != 200 || len(pol.Policies) != 3 || len(pol.Schedules) != 1 || pol.Schedules[0].Rate != "4/1s" {
		t.Errorf("policies = %d %+v", r.Status, pol)
	}

	type reservation struct {
		OK      bool
		DelayMS int64 `json:"delay_ms"`
		ID      string
		Queue   int64
	}
	var r1, r2, r3 reservation
	carrier := `{"schedule":"carrier","attributes":{"carrier":"45"}}`
	// The second slot is 250ms after the first; each delay is that slot
	// less the time gone since the first reservation, which a loaded
	// machine stretches: the bounds allow for the time measured.
	start := time.Now()
	p.post("/v1/reserve", carrier, &r1)
	p.post("/v1/reserve", carrier, &r2)
	if gone := time.Since(start).Milliseconds(); !r1.OK || r1.DelayMS > 5 || !r2.OK || r2.DelayMS < 250-gone-5 || r2.DelayMS > 250 || r2.ID == "" || r2.Queue < 1 {
		t.Errorf("reservations = %+v %+v (%dms apart at most), want delays 0 and the second slot's 250ms less the time gone", r1, r2, gone)
	}
	var c struct{ Cancelled bool }
	p.post("/v1/cancel", `{"schedule":"carrier","attributes":{"carrier":"45"},"id":"`+r2.ID+`"}`, &c)
	if !c.Cancelled {
		t.Error("cancel = false")
	}
	p.post("/v1/reserve", carrier, &r3)
	if gone := time.Since(start).Milliseconds(); !r3.OK || r3.DelayMS < 250-gone-5 || r3.DelayMS > 250 {
		t.Errorf("reservation after cancel = %+v (%dms after the first), want the cancelled slot at 250ms", r3, gone)
	}

	for i := range 4 {
		r := p.do("GET", "/v1/forward-auth?policy=edge", "", "X-Forwarded-For", "198.51.100.9", "X-Forwarded-Uri", "/x")
		want := 200
		if i == 3 {
			want = 429
		}
		if r.Status != want || r.Header.Get("RateLimit") == "" {
			t.Errorf("forward-auth %d = %d %v, want %d with RateLimit", i, r.Status, r.Header, want)
		}
		if want == 429 && r.Header.Get("Retry-After") == "" {
			t.Errorf("429 without Retry-After: %v", r.Header)
		}
	}

	// Each class of bad request answers problem+json.
	problems := []struct {
		name, path, body string
		status           int
		code             string
	}{
		{"malformed JSON", "/v1/decide", `{"policy":`, 400, "malformed_json"},
		{"unknown policy", "/v1/decide", `{"policy":"nope"}`, 400, "unknown_policy"},
		{"missing attribute", "/v1/decide", `{"policy":"notify"}`, 400, "missing_attribute"},
		{"cost 0", "/v1/decide", `{"policy":"notify","attributes":{"category":"x"},"cost":0}`, 400, "invalid_cost"},
		{"body too large", "/v1/decide", `{"policy":"notify","attributes":{"category":"` + strings.Repeat("x", 70000) + `"}}`, 413, "body_too_large"},
		{"unknown route", "/v1/nope", `{}`, 404, "not_found"},
	}
	for _, pr := range problems {
		r := p.do("POST", pr.path, pr.body)
		var body struct {
			Status int
			Code   string
			Title  string
			Detail string
		}
		r.JSON(t, &body)
		if r.Status != pr.status || r.Header.Get("Content-Type") != "application/problem+json" || body.Status != pr.status ||
			body.Code != pr.code || body.Title == "" {
			t.Errorf("%s: %d %s %+v, want %d %s", pr.name, r.Status, r.Header.Get("Content-Type"), body, pr.status, pr.code)
		}
	}

	if r := p.do("GET", "/healthz", ""); r.Status != 200 {
		t.Errorf("/healthz = %d", r.Status)
	}
	if r := p.do("GET", "/readyz", ""); r.Status != 200 {
		t.Errorf("/readyz = %d %s", r.Status, r.Body)
	}

	exerciseGRPC(t, p)

	m := p.do("GET", "/metrics", "")
	for _, want := range []string{
		`sluice_decisions_total{outcome="denied",policy="notify",rule="category"} 1`,
		`sluice_decisions_total{outcome="allowed",policy="notify",rule=""} 11`, // 10 decided, 1 recorded
		`sluice_store_duration_seconds_bucket{op="decide"`,
		`sluice_reservations_total{outcome="reserved",schedule="carrier"} 3`,
		`sluice_reservation_delay_seconds_count{schedule="carrier"} 3`,
		`sluice_requests_total{api="envoy",code="OK"}`,
	} {
		if !strings.Contains(string(m.Body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// exerciseGRPC drives sluice's gRPC service and Envoy's rate-limit service.
func exerciseGRPC(t *testing.T, p *serveProc) {
	t.Helper()
	conn, err := grpc.NewClient(p.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	sc := sluicev1.NewSluiceClient(conn)
	d, err := sc.Peek(ctx, &sluicev1.DecideRequest{Policy: "notify", Attributes: map[string]string{"category": "errors"}})
	if err != nil || d.Allowed || d.DeniedBy != "category" {
		t.Errorf("gRPC Peek = %v, %v; want denied by category", d, err)
	}

	// An atomic multi-descriptor request: bob is over his limit, so nothing
	// is recorded for /orders either.
	env := rlsv3.NewRateLimitServiceClient(conn)
	desc := func(k, v string) *ratelimitv3.RateLimitDescriptor {
		return &ratelimitv3.RateLimitDescriptor{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: k, Value: v}}}
	}
	req := &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*ratelimitv3.RateLimitDescriptor{desc("user", "bob"), desc("path", "/orders")}}
	for i := range 2 {
		res, err := env.ShouldRateLimit(ctx, req)
		if err != nil || res.OverallCode != rlsv3.RateLimitResponse_OK {
			t.Fatalf("Envoy request %d = %v, %v", i, res, err)
		}
	}
	pathUsed := func() int64 {
		d, err := sc.Peek(ctx, &sluicev1.DecideRequest{Policy: "api", Attributes: map[string]string{"user": "nobody", "path": "/orders"}})
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed {
			t.Fatalf("a peek of another user is denied: %v", d)
		}
		return d.Limits[1].Used - 1 // a peek counts the request it would admit
	}
	before := pathUsed()
	res, err := env.ShouldRateLimit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT || res.Statuses[0].Code != rlsv3.RateLimitResponse_OVER_LIMIT ||
		res.Statuses[1].Code != rlsv3.RateLimitResponse_OK {
		t.Errorf("over-limit request = %v", res)
	}
	if after := pathUsed(); before != 2 || after != before {
		t.Errorf("/orders used %d before the denied request and %d after, want 2 and 2", before, after)
	}
}

func TestServeScaleRedis(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	file := writeFile(t, t.TempDir(), "sluice.yaml", redisSection(rs.Addr(), "scale")+e2eConfig)
	var procs []*serveProc
	for range 3 {
		procs = append(procs, startServe(t, file))
	}
	// The notifier's scale scenario: 400 notifications over 20 categories at
	// once, spread over the three instances.
	const n, categories = 400, 20
	var (
		mu         sync.Mutex
		allowed    int
		perCat     = map[string]int{}
		wg         sync.WaitGroup
		start      = make(chan struct{})
		errs       = make(chan error, n)
		transport  = &http.Transport{MaxIdleConnsPerHost: 100}
		client     = &http.Client{Transport: transport, Timeout: 30 * time.Second}
		decodeFail = make(chan string, n)
	)
	defer transport.CloseIdleConnections()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			cat := fmt.Sprintf("c%02d", i%categories)
			body := `{"policy":"notify","attributes":{"category":"` + cat + `"}}`
			res, err := client.Post(procs[i%3].HTTP+"/v1/decide", "application/json", strings.NewReader(body))
			if err != nil {
				errs <- err
				return
			}
			defer res.Body.Close()
			var d struct {
				Allowed  bool
				Degraded bool
			}
			r := &response{Status: res.StatusCode}
			r.Body, _ = io.ReadAll(res.Body)
			if err := json.Unmarshal(r.Body, &d); err != nil || res.StatusCode != 200 || d.Degraded {
				decodeFail <- fmt.Sprintf("%d %s", res.StatusCode, r.Body)
				return
			}
			if d.Allowed {
				mu.Lock()
				allowed++
				perCat[cat]++
				mu.Unlock()
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	close(decodeFail)
	for err := range errs {
		t.Error(err)
	}
	for s := range decodeFail {
		t.Error(s)
	}
	if allowed != 100 {
		t.Errorf("allowed %d of %d, want exactly 100", allowed, n)
	}
	for c, k := range perCat {
		if k > 10 {
			t.Errorf("category %s allowed %d, want at most 10", c, k)
		}
	}
}

func TestServeReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := writeFile(t, dir, "sluice.yaml", e2eConfig)
	p := startServe(t, file)
	categoryLimit := func() int64 {
		var d struct{ Limits []struct{ Limit int64 } }
		p.post("/v1/peek", `{"policy":"notify","attributes":{"category":"x"}}`, &d)
		return d.Limits[1].Limit
	}
	if got := categoryLimit(); got != 10 {
		t.Fatalf("category limit %d, want 10", got)
	}
	// Replace the file as an editor does: write a new file and rename it.
	replace := func(content string) {
		tmp := writeFile(t, dir, "new.yaml", content)
		if err := os.Rename(tmp, file); err != nil {
			t.Fatal(err)
		}
	}
	replace(strings.Replace(e2eConfig, "limit: 10, window: 30m", "limit: 7, window: 30m", 1))
	p.waitLog("configuration reloaded", 10*time.Second)
	if got := categoryLimit(); got != 7 {
		t.Fatalf("after the change the category limit is %d, want 7", got)
	}

	replace(strings.Replace(e2eConfig, "limit: 10, window: 30m", "limit: -1, window: 30m", 1))
	rec := p.waitLog("configuration not reloaded", 10*time.Second)
	if err := fmt.Sprint(rec["err"]); !strings.Contains(err, "sluice.yaml:6:") || !strings.Contains(err, "limit is -1") {
		t.Errorf("logged error %q, want the file, line and problem", err)
	}
	if got := categoryLimit(); got != 7 {
		t.Errorf("after a broken file the category limit is %d, want the previous 7", got)
	}

	// SIGHUP reloads too.
	if err := os.WriteFile(file, []byte(strings.Replace(e2eConfig, "limit: 10, window: 30m", "limit: 5, window: 30m", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for categoryLimit() != 5 {
		if time.Now().After(deadline) {
			t.Fatalf("the limit did not change to 5:\n%s", p.logText())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServeGracefulShutdown sends SIGTERM while a decision is in flight:
// the server finishes it, then exits 0.
func TestServeGracefulShutdown(t *testing.T) {
	t.Parallel()
	file := writeFile(t, t.TempDir(), "sluice.yaml", e2eConfig)
	p := startServe(t, file)
	// A request in flight: its headers ask the server to say when the
	// handler reads the body (Expect: 100-continue), which arrives only
	// after SIGTERM.
	conn, err := net.Dial("tcp", strings.TrimPrefix(p.HTTP, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"policy":"notify","attributes":{"category":"a"}}`
	if _, err := fmt.Fprintf(conn, "POST /v1/decide HTTP/1.1\r\nHost: sluice\r\nContent-Type: application/json\r\n"+
		"Content-Length: %d\r\nExpect: 100-continue\r\n\r\n", len(body)); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	cont, err := http.ReadResponse(br, nil)
	if err != nil || cont.StatusCode != http.StatusContinue {
		t.Fatalf("waiting for the handler to read the body: %v, %v; want 100 Continue", cont, err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	p.waitLog("shutting down", 10*time.Second)
	if _, err := io.WriteString(conn, body); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("in-flight request: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("in-flight request = %d, want 200", res.StatusCode)
	}
	<-p.exited
	if p.exitCode != 0 {
		t.Errorf("exit code %d, want 0", p.exitCode)
	}
}

func TestCheckCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := writeFile(t, dir, "sluice.yaml", e2eConfig)
	code, out, _ := runCLI(t, "check", "--config", file, "--policy", "notify", "--attr", "category=errors", "--json")
	if code != 0 || !strings.Contains(out, `"allowed":true`) {
		t.Errorf("check = %d %s", code, out)
	}
	code, _, _ = runCLI(t, "check", "--config", file, "--policy", "notify", "--attr", "category=errors", "--cost", "11")
	if code != 2 {
		t.Errorf("check with a cost over the limit = %d, want 2", code)
	}
	code, _, errOut := runCLI(t, "check", "--config", file, "--policy", "nope")
	if code != 2 || !strings.Contains(errOut, "unknown policy") {
		t.Errorf("check of an unknown policy = %d %s", code, errOut)
	}
	bad := writeFile(t, dir, "bad.yaml", "policies:\n  - name: p\n    limits: [{name: r, limit: 5, window: 30}]\n")
	code, _, errOut = runCLI(t, "check", "--config", bad, "--policy", "p")
	if code != 2 || !strings.Contains(errOut, filepath.Base(bad)+":3:") || !strings.Contains(errOut, "has no unit") {
		t.Errorf("check of a bad file = %d %s", code, errOut)
	}
	code, _, _ = runCLI(t, "check", "--policy", "p")
	if code != 2 {
		t.Errorf("check without --config = %d, want 2", code)
	}
}
