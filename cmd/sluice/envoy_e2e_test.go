package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/proto"

	"github.com/sluicerate/sluice/internal/envoy/decide"
	"github.com/sluicerate/sluice/internal/envoy/envoytest"
	"github.com/sluicerate/sluice/internal/redistest"
)

// copyDir copies the YAML files of envoytest.Dir(name) into a new
// temporary directory, so a test may change them.
func copyDir(t *testing.T, name string) string {
	t.Helper()
	dst := t.TempDir()
	src := envoytest.Dir(name)
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		writeFile(t, dst, e.Name(), string(b))
	}
	return dst
}

// dialRLS connects to the server's gRPC port.
func dialRLS(t *testing.T, p *serveProc) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(p.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func rlsCall(conn *grpc.ClientConn) envoytest.Call {
	c := rlsv3.NewRateLimitServiceClient(conn)
	return func(req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return c.ShouldRateLimit(ctx, req)
	}
}

// countLogs counts the log records whose message contains msg.
func (p *serveProc) countLogs(msg string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, rec := range p.logs {
		if m, _ := rec["msg"].(string); strings.Contains(m, msg) {
			n++
		}
	}
	return n
}

// waitLogs waits until n records contain msg.
func (p *serveProc) waitLogs(msg string, n int, timeout time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for p.countLogs(msg) < n {
		if time.Now().After(deadline) {
			p.t.Fatalf("fewer than %d log records %q after %v:\n%s", n, msg, timeout, p.logText())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestServeEnvoyUpstream replays envoyproxy/ratelimit's integration test and
// example scripts over gRPC against sluice serve --envoy-config, with its
// configuration files as they are, on memory and on Redis, in both
// countings.
func TestServeEnvoyUpstream(t *testing.T) {
	t.Parallel()
	backends := []struct {
		name  string
		redis func(t *testing.T) string
	}{
		{"memory", func(*testing.T) string { return "" }},
		{"redis", func(t *testing.T) string { return "redis://" + redistest.Start(t).Addr() + "/0" }},
	}
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			total, passed, differ := 0, 0, 0
			run := func(sc envoytest.Scenario, p *serveProc) {
				n, d := envoytest.Run(t, sc, rlsCall(dialRLS(t, p)), true)
				total, passed, differ = total+len(sc.Steps), passed+n, differ+d
			}
			// On Redis, a store call may take a second: these are the
			// upstream semantics, not a latency test, and a test machine
			// under load can stall a call past the default 50 ms.
			redisArgs := func() []string {
				if u := b.redis(t); u != "" {
					return []string{"--redis", u, "--config", writeFile(t, t.TempDir(), "store.yaml", "store:\n  timeout: 1s\n")}
				}
				return nil
			}

			// The integration test, with its reload: the runtime directory
			// given by envoyproxy/ratelimit's own environment variables.
			root := t.TempDir()
			dir := filepath.Join(root, "ratelimit", "config")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			src := copyDir(t, "integration/config")
			for _, f := range []string{"another.yaml", "basic.yaml", "share_threshold.yaml"} {
				data, _ := os.ReadFile(filepath.Join(src, f))
				writeFile(t, dir, f, string(data))
			}
			p := startServeArgs(t, []string{"RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit", "LOG_LEVEL=DEBUG"}, redisArgs()...)
			run(envoytest.Integration(decide.AllOrNothing), p)
			call := rlsCall(dialRLS(t, p))
			reload := envoytest.Step{Domain: "reload", Descriptors: [][][2]string{{{"block", "foo"}}}}
			got, err := call(reload.Request())
			if err != nil || !proto.Equal(got, &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK,
				Statuses: []*rlsv3.RateLimitResponse_DescriptorStatus{{Code: rlsv3.RateLimitResponse_OK}}}) {
				t.Errorf("reload domain before the file: %v, %v", got, err)
			}
			data, err := os.ReadFile(filepath.Join(envoytest.Dir("integration"), "reload.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, dir, "reload.yaml", string(data))
			p.waitLogs("Envoy configuration reloaded", 1, 10*time.Second)
			key1 := envoytest.Step{Domain: "reload", Descriptors: [][][2]string{{{"key1", "foo"}}}}
			got, err = call(key1.Request())
			if err != nil || got.OverallCode != rlsv3.RateLimitResponse_OK || got.Statuses[0].LimitRemaining != 49 ||
				got.Statuses[0].CurrentLimit.GetRequestsPerUnit() != 50 || got.Statuses[0].CurrentLimit.GetUnit() != rlsv3.RateLimitResponse_RateLimit_SECOND {
				t.Errorf("reload domain after the file: %v, %v; want OK, 50 per SECOND, 49 remaining", got, err)
			}
			if err := os.Remove(filepath.Join(dir, "reload.yaml")); err != nil {
				t.Fatal(err)
			}
			p.waitLogs("Envoy configuration reloaded", 2, 10*time.Second)
			m := string(p.do("GET", "/metrics", "").Body)
			if !strings.Contains(m, "ratelimit_service_config_load_success 3") {
				t.Errorf("/metrics: want ratelimit_service_config_load_success 3 (the start and two reloads)")
			}

			// Envoy's counting, by its own variable.
			p = startServeArgs(t, []string{"RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit", "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=false"}, redisArgs()...)
			run(envoytest.Integration(decide.PerDescriptor), p)

			// The example configuration and the scripts run against it.
			p = startServeArgs(t, nil, append([]string{"--envoy-config", copyDir(t, "examples/config")}, redisArgs()...)...)
			run(envoytest.Examples(), p)
			m = string(p.do("GET", "/metrics", "").Body)
			if !strings.Contains(m, `ratelimit_service_rate_limit_over_limit{domain="rl",key1="unspec_unspecified_value",key2=""} 1`) {
				t.Errorf("/metrics lacks the detailed over_limit of unspec_unspecified_value (value-included-in-stats-key-when-unspecified.sh)")
			}
			t.Logf("upstream scenarios on %s: %d of %d steps pass, %d of them with sluice's figure where windows slide", b.name, passed, total, differ)
		})
	}
}

// TestServeEnvoyHTTP: /json, /healthcheck and /rlconfig, as
// envoyproxy/ratelimit answers them.
func TestServeEnvoyHTTP(t *testing.T) {
	t.Parallel()
	p := startServeArgs(t, nil, "--envoy-config", copyDir(t, "integration/config"))
	body := `{"domain":"basic","descriptors":[{"entries":[{"key":"one_per_minute","value":"x"}]}]}`
	r := p.do("POST", "/json", body)
	if r.Status != 200 || !strings.Contains(string(r.Body), `"overallCode":"OK"`) {
		t.Errorf("/json first: %d %s", r.Status, r.Body)
	}
	r = p.do("POST", "/json", body)
	if r.Status != 429 || !strings.Contains(string(r.Body), `"overallCode":"OVER_LIMIT"`) || !strings.Contains(string(r.Body), `"durationUntilReset":"60s"`) {
		t.Errorf("/json second: %d %s; want 429 OVER_LIMIT with 60s until reset", r.Status, r.Body)
	}
	if r := p.do("POST", "/json", `{"domain":`); r.Status != 400 {
		t.Errorf("/json malformed: %d %s", r.Status, r.Body)
	}
	if r := p.do("GET", "/healthcheck", ""); r.Status != 200 || string(r.Body) != "OK" {
		t.Errorf("/healthcheck: %d %q", r.Status, r.Body)
	}
	r = p.do("GET", "/rlconfig", "")
	if r.Status != 200 || !strings.Contains(string(r.Body), "basic.one_per_minute: unit=MINUTE requests_per_unit=1") {
		t.Errorf("/rlconfig: %d %s", r.Status, r.Body)
	}
}

// TestServeEnvoyHealth: POST /api/v1/envoy/reset on the admin listener
// (and not on the public one) empties a key's window on Redis; grpc.health.v1 answers SERVING while Redis answers and NOT_SERVING
// while it is paused, for the server and for "ratelimit"; reflection lists
// the services.
func TestServeEnvoyHealth(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	p := startServeArgs(t, nil, "--envoy-config", copyDir(t, "integration/config"), "--redis", "redis://"+rs.Addr()+"/0", "--admin", "127.0.0.1:0")
	conn := dialRLS(t, p)

	// An operator gives a key its limit back.
	body := `{"domain":"basic","descriptors":[{"entries":[{"key":"one_per_minute","value":"u1"}]}]}`
	for i, want := range []int{200, 429} {
		if r := p.do("POST", "/json", body); r.Status != want {
			t.Errorf("/json hit %d: %d %s, want %d", i+1, r.Status, r.Body, want)
		}
	}
	if r := p.do("POST", "/api/v1/envoy/reset", body); r.Status != 404 {
		t.Errorf("/api/v1/envoy/reset on the public listener: %d %s, want 404", r.Status, r.Body)
	}
	hres, err := http.Post("http://"+p.adminAddr()+"/api/v1/envoy/reset", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	reset, _ := io.ReadAll(hres.Body)
	hres.Body.Close()
	if hres.StatusCode != 200 || !strings.Contains(string(reset), `"reset":1`) {
		t.Errorf("/api/v1/envoy/reset on the admin listener: %d %s", hres.StatusCode, reset)
	}
	if r := p.do("POST", "/json", body); r.Status != 200 {
		t.Errorf("/json after the reset: %d %s, want 200", r.Status, r.Body)
	}

	hc := healthpb.NewHealthClient(conn)
	check := func(service string) healthpb.HealthCheckResponse_ServingStatus {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			t.Fatalf("health check %q: %v", service, err)
		}
		return res.Status
	}
	for _, svc := range []string{"", "ratelimit", "envoy.service.ratelimit.v3.RateLimitService"} {
		if got := check(svc); got != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health %q with Redis up: %v", svc, got)
		}
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
	for _, svc := range []string{"", "ratelimit"} {
		if got := check(svc); got != healthpb.HealthCheckResponse_NOT_SERVING {
			t.Errorf("health %q with Redis paused: %v", svc, got)
		}
	}
	if r := p.do("GET", "/healthcheck", ""); r.Status != 500 {
		t.Errorf("/healthcheck with Redis paused: %d", r.Status)
	}
	if err := rs.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	deadline := time.Now().Add(10 * time.Second)
	for check("ratelimit") != healthpb.HealthCheckResponse_SERVING {
		if time.Now().After(deadline) {
			t.Fatal("health did not come back after Redis resumed")
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Reflection: what grpcurl -plaintext HOST:PORT list shows.
	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	res, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	_ = stream.CloseSend()
	var names []string
	for _, s := range res.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	got := strings.Join(names, " ")
	for _, want := range []string{"envoy.service.ratelimit.v3.RateLimitService", "grpc.health.v1.Health", "sluice.v1.Sluice", "grpc.reflection.v1.ServerReflection"} {
		if !strings.Contains(got, want) {
			t.Errorf("reflection lists %q, want %s among them", got, want)
		}
	}
}

// TestEnvoyConfigErrors: a bad file stops serve and check with its place.
func TestEnvoyConfigErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "bad.yaml", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n")
	code, _, stderr := runCLI(t, "serve", "--envoy-config", dir, "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0")
	want := filepath.Join(dir, "bad.yaml") + ":4:24: invalid rate limit unit \"fortnight\""
	if code != exitUsage || !strings.Contains(stderr, want) {
		t.Errorf("serve: exit %d, stderr %q; want 2 and %q", code, stderr, want)
	}
	code, _, stderr = runCLI(t, "check", "--envoy-config", dir, "--domain", "d", "--descriptor", "k=v")
	if code != exitUsage || !strings.Contains(stderr, want) {
		t.Errorf("check: exit %d, stderr %q; want 2 and %q", code, stderr, want)
	}
}

// TestCheckEnvoy: sluice check --envoy-config prints the statuses of one
// request, recording nothing.
func TestCheckEnvoy(t *testing.T) {
	t.Parallel()
	dir := copyDir(t, "examples/config")
	args := []string{"check", "--envoy-config", dir, "--domain", "rl", "--descriptor", "foo=x,bar=banned"}
	code, stdout, stderr := runCLI(t, args...)
	if code != exitDenied || !strings.Contains(stdout, "OVER_LIMIT") {
		t.Errorf("check banned: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, _ = runCLI(t, append(args[:len(args)-1], "foo=x,bar=y")...)
	if code != exitOK || !strings.Contains(stdout, "OK") || !strings.Contains(stdout, "3 per MINUTE") {
		t.Errorf("check bar: exit %d\n%s", code, stdout)
	}
}

// TestServeEnvoyBudget: a rate_limit with budget: D, served on Redis, is
// answered from the process's slices of each window, never past its
// limit, and the budget metrics count the slices.
func TestServeEnvoyBudget(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "a.yaml", "domain: d\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 100, budget: 10s}\n")
	rs := redistest.Start(t)
	p := startServeArgs(t, nil, "--envoy-config", dir, "--redis", "redis://"+rs.Addr()+"/0",
		"--config", writeFile(t, t.TempDir(), "store.yaml", "store:\n  timeout: 5s\n"))
	call := rlsCall(dialRLS(t, p))
	req := &rlsv3.RateLimitRequest{Domain: "d", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{{Key: "user", Value: "ann"}}}}}
	ok := 0
	for range 150 {
		resp, err := call(req)
		if err != nil {
			t.Fatal(err)
		}
		st := resp.Statuses[0]
		if st.Code == rlsv3.RateLimitResponse_OK {
			ok++
		}
		if st.LimitRemaining > 100 {
			t.Fatalf("remaining %d above the limit: %v", st.LimitRemaining, st)
		}
	}
	if ok != 100 {
		t.Errorf("%d of 150 admitted, want the limit, 100", ok)
	}
	// Most of the 100 admitted take a unit from a slice: no store call.
	m := string(p.do("GET", "/metrics", "").Body)
	local, slices := metricValue(m, `sluice_budget_decisions_total{answered="local"}`), metricValue(m, "sluice_budget_slices_total")
	if local < 50 || slices < 1 {
		t.Errorf("/metrics: %d decisions answered locally, %d slices; want most, at least one", local, slices)
	}
}

// metricValue returns the value of the sample name in a Prometheus text
// exposition, 0 when absent.
func metricValue(m, name string) int64 {
	for _, l := range strings.Split(m, "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			n, _ := strconv.ParseFloat(v, 64)
			return int64(n)
		}
	}
	return 0
}
