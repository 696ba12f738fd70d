package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/sluicerate/sluice/internal/envoy/xds/xdstest"
	"github.com/sluicerate/sluice/internal/redistest"
	"github.com/sluicerate/sluice/internal/tlsfiles/tlsfilestest"
)

// Envoy Gateway's names (its internal/infrastructure/kubernetes/ratelimit).
const (
	egNode   = "envoy-ratelimit"
	egDomain = "default/eg/http"
	egRoute  = "httproute/default/backend/rule/0/match/0"
)

// egEnv is the environment Envoy Gateway starts envoyproxy/ratelimit with
// (resource.go's expectedRateLimitContainerEnv, Prometheus on), its
// certificates in certs, its control plane at cp and Redis at redis.
func egEnv(certs, cp, redis string) []string {
	return []string{
		"RUNTIME_ROOT=/data", "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_IGNOREDOTFILES=true", "RUNTIME_WATCH_ROOT=false",
		"LOG_LEVEL=info", "USE_STATSD=false",
		"CONFIG_TYPE=GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_URL=" + cp, "CONFIG_GRPC_XDS_NODE_ID=" + egNode,
		"GRPC_SERVER_USE_TLS=true", "GRPC_SERVER_TLS_CERT=" + certs + "/tls.crt", "GRPC_SERVER_TLS_KEY=" + certs + "/tls.key",
		"GRPC_SERVER_TLS_CA_CERT=" + certs + "/ca.crt",
		"CONFIG_GRPC_XDS_SERVER_USE_TLS=true", "CONFIG_GRPC_XDS_CLIENT_TLS_CERT=" + certs + "/tls.crt",
		"CONFIG_GRPC_XDS_CLIENT_TLS_KEY=" + certs + "/tls.key", "CONFIG_GRPC_XDS_SERVER_TLS_CACERT=" + certs + "/ca.crt",
		"FORCE_START_WITHOUT_INITIAL_CONFIG=true",
		"REDIS_SOCKET_TYPE=tcp", "REDIS_URL=" + redis,
		"USE_PROMETHEUS=true", "PROMETHEUS_ADDR=127.0.0.1:0", "PROMETHEUS_MAPPER_YAML=/etc/statsd-exporter/conf.yaml",
	}
}

// egConfig is a resource as Envoy Gateway's translator makes one: a
// route's descriptor, and under it one per user, perMinute each.
func egConfig(perMinute uint32) *rlsconfv3.RateLimitConfig {
	return &rlsconfv3.RateLimitConfig{Name: egDomain, Domain: egDomain, Descriptors: []*rlsconfv3.RateLimitDescriptor{{
		Key: egRoute, Value: egRoute,
		Descriptors: []*rlsconfv3.RateLimitDescriptor{{Key: "x-user-id",
			RateLimit: &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_MINUTE, RequestsPerUnit: perMinute}}},
	}}}
}

// egRequest is the request Envoy sends for user's request on the route.
func egRequest(user string) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: egDomain, Descriptors: []*ratelimitv3.RateLimitDescriptor{{Entries: []*ratelimitv3.RateLimitDescriptor_Entry{
		{Key: egRoute, Value: egRoute}, {Key: "x-user-id", Value: user}}}}}
}

// limitOf calls the service and returns the answer's code and limit.
func limitOf(t *testing.T, c rlsv3.RateLimitServiceClient, user string) (rlsv3.RateLimitResponse_Code, uint32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := c.ShouldRateLimit(ctx, egRequest(user))
	if err != nil {
		t.Fatalf("ShouldRateLimit(%s): %v", user, err)
	}
	return res.GetOverallCode(), res.GetStatuses()[0].GetCurrentLimit().GetRequestsPerUnit()
}

// dialTLS connects to addr trusting ca, presenting certs.
func dialTLS(t *testing.T, addr string, ca *tlsfilestest.CA, certs ...tls.Certificate) *grpc.ClientConn {
	t.Helper()
	pool := ca.Cert
	cfg := &tls.Config{Certificates: certs, RootCAs: poolOf(pool)}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// servedSerial returns the serial of the certificate addr serves now.
func servedSerial(t *testing.T, addr string, ca *tlsfilestest.CA, cert tls.Certificate) int64 {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: poolOf(ca.Cert), NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// TestServeUnderEnvoyGateway runs sluice as Envoy Gateway runs
// envoyproxy/ratelimit: the binary started as ratelimit with exactly its
// environment (the ports on loopback, JSON logs and the store's timeout
// aside), the
// configuration from a go-control-plane snapshot cache over mutual TLS,
// gRPC served with TLS and client certificates required, decisions on
// Redis.
func TestServeUnderEnvoyGateway(t *testing.T) {
	t.Parallel()
	ca := tlsfilestest.NewCA(t, "envoy-gateway-ca")
	vol := ca.ServerVolume(t, filepath.Join(t.TempDir(), "certs"), 1, "127.0.0.1", "envoy-ratelimit") // the envoy-rate-limit secret
	cpCreds := controlPlaneCreds(t, ca)
	cp := xdstest.Start(t, "127.0.0.1:0", cpCreds)
	redis := redistest.Start(t)

	bin := filepath.Join(t.TempDir(), "ratelimit")
	if err := os.Symlink(sluiceBinary(t), bin); err != nil {
		t.Fatal(err)
	}
	// REDIS_TIMEOUT: a store call may take up to a second, as in the other
	// tests that serve from Redis: under make test's load, one now and then
	// overran sluice's default 50 ms and was answered UNAVAILABLE.
	env := append(egEnv(vol.Dir, cp.Addr, redis.Addr()), "HOST=127.0.0.1", "PORT=0", "GRPC_HOST=127.0.0.1", "GRPC_PORT=0", "LOG_FORMAT=json",
		"REDIS_TIMEOUT=1s")
	p := startProc(t, bin, nil, env)
	envoyCert := ca.Pair(t, 50, "envoy")
	conn := dialTLS(t, p.GRPC, ca, envoyCert)
	rls := rlsv3.NewRateLimitServiceClient(conn)

	// Started before any version (FORCE_START_WITHOUT_INITIAL_CONFIG):
	// healthy, every domain unknown.
	if r := p.do("GET", "/healthcheck", ""); r.Status != 200 {
		t.Fatalf("/healthcheck before the first version: %d %s", r.Status, r.Body)
	}
	if code, _ := limitOf(t, rls, "alice"); code != rlsv3.RateLimitResponse_OK {
		t.Fatalf("before the first version: %v, want OK", code)
	}

	// Version 1: 3 a minute.
	cp.Push(t, egNode, "1", egConfig(3))
	waitAcked(t, cp, "1")
	for i, want := range []rlsv3.RateLimitResponse_Code{0: rlsv3.RateLimitResponse_OK, 1: rlsv3.RateLimitResponse_OK, 2: rlsv3.RateLimitResponse_OK, 3: rlsv3.RateLimitResponse_OVER_LIMIT} {
		if code, limit := limitOf(t, rls, "alice"); code != want || limit != 3 {
			t.Fatalf("version 1, call %d: %v with %d a minute, want %v with 3", i+1, code, limit, want)
		}
	}

	// Version 2, 5 a minute: answered within a second of the push.
	start := time.Now()
	cp.Push(t, egNode, "2", egConfig(5))
	for {
		if _, limit := limitOf(t, rls, "alice"); limit == 5 {
			break
		}
		if time.Since(start) > time.Second {
			t.Fatalf("version 2 not answered a second after its push")
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("version 2 answered %v after its push", time.Since(start).Round(time.Millisecond))
	if r := p.do("GET", "/rlconfig", ""); !strings.Contains(string(r.Body), "version 2, 1 resources") ||
		!strings.Contains(string(r.Body), egDomain+"."+egRoute+"_"+egRoute+".x-user-id: unit=MINUTE requests_per_unit=5") {
		t.Errorf("/rlconfig:\n%s", r.Body)
	}

	// Version 3 configures the domain twice: refused once, version 2 serves on.
	bad := egConfig(9)
	bad.Name = "default/eg/https"
	cp.Push(t, egNode, "3", egConfig(9), bad)
	if !cp.WaitFor(10*time.Second, func(r []*discoveryv3.DiscoveryRequest) bool { return len(xdstest.Refusals(r, "3")) > 0 }) {
		t.Fatalf("version 3 not refused:\n%s", p.logText())
	}
	for range 20 {
		if _, limit := limitOf(t, rls, "bob"); limit != 5 {
			t.Fatalf("after version 3 was refused, the limit is %d a minute, want version 2's 5", limit)
		}
	}
	cp.Push(t, egNode, "4", egConfig(6))
	waitAcked(t, cp, "4")
	if n := xdstest.Refusals(cp.Requests(), "3"); len(n) != 1 || !strings.Contains(n[0].GetErrorDetail().GetMessage(), `domain "default/eg/http" is already configured at xds:default/eg/http`) {
		t.Errorf("version 3 refused %d times, want once, with the loader's message: %v", len(n), n)
	}

	// Client certificates: none is refused at the handshake, the CA's answered.
	if _, err := rlsv3.NewRateLimitServiceClient(dialTLS(t, p.GRPC, ca)).ShouldRateLimit(context.Background(), egRequest("eve")); err == nil {
		t.Errorf("a client without a certificate was answered")
	}
	refusedAtHandshake(t, p.GRPC, ca)
	if code, limit := limitOf(t, rlsv3.NewRateLimitServiceClient(dialTLS(t, p.GRPC, ca, ca.Pair(t, 51, "other-envoy"))), "carol"); code != rlsv3.RateLimitResponse_OK || limit != 6 {
		t.Errorf("a client with the CA's certificate: %v, %d", code, limit)
	}

	// The secret's certificate replaced: served from the next handshake, no restart.
	if got := servedSerial(t, p.GRPC, ca, envoyCert); got != 1 {
		t.Fatalf("serial %d, want 1", got)
	}
	crt2, key2 := ca.Issue(t, 2, "127.0.0.1", "envoy-ratelimit")
	vol.Write(t, map[string][]byte{"tls.crt": crt2, "tls.key": key2, "ca.crt": ca.PEM})
	if got := servedSerial(t, p.GRPC, ca, envoyCert); got != 2 {
		t.Errorf("after the secret changed, serial %d, want 2", got)
	}
	if code, _ := limitOf(t, rls, "dave"); code != rlsv3.RateLimitResponse_OK {
		t.Errorf("the connection made before the change: %v", code)
	}

	// The control plane restarts, counting its versions from 1 again: sluice
	// answers throughout, follows the new one, and presents the new
	// certificate to it.
	stop, answered, failed := hammer(rls)
	cp.Stop()
	cp2 := xdstest.Start(t, cp.Addr, cpCreds)
	cp2.Push(t, egNode, "1", egConfig(7))
	if !cp2.WaitFor(20*time.Second, func(r []*discoveryv3.DiscoveryRequest) bool { return xdstest.Acked(r, "1") }) {
		t.Fatalf("no ACK from the restarted control plane:\n%s", p.logText())
	}
	if _, limit := limitOf(t, rls, "erin"); limit != 7 {
		t.Errorf("after the restart, %d a minute, want 7", limit)
	}
	stop()
	if answered.Load() == 0 || failed.Load() != 0 {
		t.Errorf("while the control plane restarted: %d answers, %d failures; want answers and no failure", answered.Load(), failed.Load())
	}

	checkGatewayMetrics(t, p, cp.Addr)
	if p.countLogs("PROMETHEUS_MAPPER_YAML=/etc/statsd-exporter/conf.yaml is not read") != 1 {
		t.Errorf("the mapper file is not noted:\n%s", p.logText())
	}
}

// checkGatewayMetrics checks the Prometheus listener's metrics after the
// scenario: the version in use, one refusal.
func checkGatewayMetrics(t *testing.T, p *serveProc, cp string) {
	t.Helper()
	rec := p.waitLog("sluice serving", time.Second)
	addr, _ := rec["metrics"].(string)
	res, err := http.Get("http://" + addr)
	if err != nil {
		t.Fatalf("metrics at %q: %v", addr, err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	for _, want := range []string{
		fmt.Sprintf(`sluice_envoy_xds_version_info{server=%q,version="1"} 1`, cp),
		`sluice_envoy_xds_responses_total{result="rejected"} 1`,
		`sluice_envoy_xds_connected 1`,
		`ratelimit_service_config_load_error 1`,
		`ratelimit_service_rate_limit_over_limit{domain="default/eg/http"`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the metrics at %s lack %s", addr, want)
		}
	}
}

// hammer calls the service in a loop until stop, counting answers and
// failures.
func hammer(c rlsv3.RateLimitServiceClient) (stop func(), answered, failed *atomic.Int64) {
	answered, failed = new(atomic.Int64), new(atomic.Int64)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if _, err := c.ShouldRateLimit(ctx, egRequest(fmt.Sprint("user-", i%50))); err != nil {
				failed.Add(1)
			} else {
				answered.Add(1)
			}
			cancel()
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return func() { close(done); wg.Wait() }, answered, failed
}

// refusedAtHandshake checks that a TLS client without a certificate is
// refused by the handshake: TLS 1.2's fails, TLS 1.3's is answered with
// the alert "certificate required".
func refusedAtHandshake(t *testing.T, addr string, ca *tlsfilestest.CA) {
	t.Helper()
	if c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: poolOf(ca.Cert), NextProtos: []string{"h2"}, MaxVersion: tls.VersionTLS12}); err == nil {
		c.Close()
		t.Errorf("a TLS 1.2 handshake without a client certificate succeeded")
	}
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: poolOf(ca.Cert), NextProtos: []string{"h2"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || !strings.Contains(err.Error(), "certificate required") {
		t.Errorf("TLS 1.3 without a client certificate: read %v, want the alert certificate required", err)
	}
}

func waitAcked(t *testing.T, cp *xdstest.ControlPlane, version string) {
	t.Helper()
	if !cp.WaitFor(10*time.Second, func(r []*discoveryv3.DiscoveryRequest) bool { return xdstest.Acked(r, version) }) {
		t.Fatalf("version %s not acknowledged", version)
	}
}
