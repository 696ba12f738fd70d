package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicerate/sluice/internal/envoy/decide"
	"github.com/sluicerate/sluice/internal/envoy/envoytest"
	"github.com/sluicerate/sluice/internal/envoy/xds/xdstest"
	"github.com/sluicerate/sluice/internal/redistest"
	"github.com/sluicerate/sluice/internal/tlsfiles/tlsfilestest"
)

// TestServeEnvoyQuotaMetadata: upstream's example configuration, as it
// is, with RESPONSE_DYNAMIC_METADATA=true: its quota scripts, each answer
// carrying the metadata of the service that still has quota, over gRPC and
// in POST /json's answer.
func TestServeEnvoyQuotaMetadata(t *testing.T) {
	t.Parallel()
	for _, sc := range envoytest.Quota() {
		t.Run(sc.Name, func(t *testing.T) {
			t.Parallel()
			env := []string{"RESPONSE_DYNAMIC_METADATA=true"}
			if sc.Counting == decide.PerDescriptor {
				env = append(env, "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT=false")
			}
			p := startServeArgs(t, env, "--envoy-config", copyDir(t, sc.Dir))
			if passed, _ := envoytest.Run(t, sc, rlsCall(dialRLS(t, p)), true); passed != len(sc.Steps) {
				t.Errorf("%d of %d steps pass", passed, len(sc.Steps))
			}
		})
	}
	t.Run("json", func(t *testing.T) {
		t.Parallel()
		p := startServeArgs(t, []string{"RESPONSE_DYNAMIC_METADATA=true"}, "--envoy-config", copyDir(t, "examples/config"))
		r := p.do("POST", "/json", `{"domain":"rl","descriptors":[{"entries":[{"key":"service","value":"service_1"}]},{"entries":[{"key":"service","value":"service_2"}]}]}`)
		if !strings.Contains(strings.ReplaceAll(string(r.Body), " ", ""), `"metadata":{"service_with_quota":{"name":"service_1"}}`) {
			t.Errorf("/json: %d %s; want service_1's metadata in dynamicMetadata", r.Status, r.Body)
		}
	})
}

// certFiles writes a CA and a certificate of it for 127.0.0.1 in a new
// directory: ca.crt, tls.crt, tls.key.
func certFiles(t *testing.T) (*tlsfilestest.CA, string) {
	t.Helper()
	ca := tlsfilestest.NewCA(t, "ca")
	dir := t.TempDir()
	crt, key := ca.Issue(t, 1, "127.0.0.1", "localhost")
	writeFile(t, dir, "ca.crt", string(ca.PEM))
	writeFile(t, dir, "tls.crt", string(crt))
	writeFile(t, dir, "tls.key", string(key))
	return ca, dir
}

// httpsGet gets url with a client of ca presenting certs.
func httpsGet(t *testing.T, url string, ca *tlsfilestest.CA, certs ...tls.Certificate) (int, string, error) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: poolOf(ca.Cert), Certificates: certs}}}
	res, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b), nil
}

// TestServeXDSFromFile: the control plane named by sluice's own
// configuration file (envoy.xds), over TLS with a client certificate;
// HTTP with TLS requiring client certificates and the admin view with TLS
// (the file's tls section); not ready, and Envoy's requests UNAVAILABLE,
// until the first version; the admin view's account of the configuration.
func TestServeXDSFromFile(t *testing.T) {
	t.Parallel()
	ca, dir := certFiles(t)
	cp := xdstest.Start(t, "127.0.0.1:0", controlPlaneCreds(t, ca))
	file := writeFile(t, dir, "sluice.yaml", fmt.Sprintf(`envoy:
  xds:
    server: %s
    node_id: sluice-1
    node_metadata: {zone: a}
    headers: {X-Tenant: t1}
    tls: {ca: ca.crt, cert: tls.crt, key: tls.key}
tls:
  http: {cert: tls.crt, key: tls.key, client_ca: ca.crt}
  admin: {cert: tls.crt, key: tls.key}
`, cp.Addr))
	p := startServeArgs(t, nil, "--config", file, "--admin", "127.0.0.1:0")
	base := strings.Replace(p.HTTP, "http://", "https://", 1)
	client := ca.Pair(t, 7, "client")
	if _, _, err := httpsGet(t, base+"/healthz", ca); err == nil {
		t.Errorf("HTTPS without a client certificate was answered")
	}
	if code, body, err := httpsGet(t, base+"/healthcheck", ca, client); err != nil || code != 500 || !strings.Contains(body, "waiting for the first version from the xDS control plane") {
		t.Errorf("/healthcheck before the first version: %d %q %v", code, body, err)
	}
	if code, body, _ := httpsGet(t, base+"/readyz", ca, client); code != 503 {
		t.Errorf("/readyz before the first version: %d %s", code, body)
	}
	rls := rlsv3.NewRateLimitServiceClient(dialRLS(t, p))
	if _, err := rls.ShouldRateLimit(context.Background(), egRequest("alice")); status.Code(err) != codes.Unavailable {
		t.Errorf("Envoy's request before the first version: %v, want UNAVAILABLE", err)
	}
	cp.Push(t, "sluice-1", "7", egConfig(2))
	waitAcked(t, cp, "7")
	if code, body, err := httpsGet(t, base+"/healthcheck", ca, client); err != nil || code != 200 {
		t.Errorf("/healthcheck after the first version: %d %q %v", code, body, err)
	}
	if code, limit := limitOf(t, rls, "alice"); code != rlsv3.RateLimitResponse_OK || limit != 2 {
		t.Errorf("after the first version: %v, %d a minute", code, limit)
	}
	if n := cp.Node(); n.GetId() != "sluice-1" || n.GetMetadata().GetFields()["zone"].GetStringValue() != "a" {
		t.Errorf("node %v", n)
	}
	if h := cp.Headers(); len(h) == 0 || strings.Join(h[0].Get("x-tenant"), "") != "t1" {
		t.Errorf("stream headers %v", h)
	}
	code, body, err := httpsGet(t, "https://"+p.adminAddr()+"/api/v1/envoy/config", ca)
	var got struct {
		Source, Server, Version string
		Domains                 []string
		Ready, Connected        bool
	}
	if err != nil || code != 200 || json.Unmarshal([]byte(body), &got) != nil || got.Source != "xds" || got.Server != cp.Addr ||
		got.Version != "7" || !got.Ready || !got.Connected || len(got.Domains) != 1 || got.Domains[0] != egDomain {
		t.Errorf("admin /api/v1/envoy/config: %d %s %v", code, body, err)
	}
}

// TestServeRedisTLS: Envoy Gateway's Redis with TLS and a client
// certificate (REDIS_TLS, REDIS_TLS_CLIENT_CERT, _KEY; REDIS_TLS_CACERT,
// envoyproxy/ratelimit's, for the test's own authority), a Redis that
// requires client certificates.
func TestServeRedisTLS(t *testing.T) {
	t.Parallel()
	_, dir := certFiles(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	redistest.StartWith(t, redistest.Options{Args: []string{"--tls-port", strconv.Itoa(port), "--tls-cert-file", filepath.Join(dir, "tls.crt"),
		"--tls-key-file", filepath.Join(dir, "tls.key"), "--tls-ca-cert-file", filepath.Join(dir, "ca.crt"), "--tls-auth-clients", "yes"}})
	env := []string{"REDIS_SOCKET_TYPE=tcp", fmt.Sprintf("REDIS_URL=127.0.0.1:%d", port), "REDIS_TLS=true",
		"REDIS_TLS_CLIENT_CERT=" + filepath.Join(dir, "tls.crt"), "REDIS_TLS_CLIENT_KEY=" + filepath.Join(dir, "tls.key"),
		"REDIS_TLS_CACERT=" + filepath.Join(dir, "ca.crt")}
	// A store call may take a second: the first one's handshake, under the
	// race detector on a loaded machine.
	p := startServeArgs(t, env, "--envoy-config", copyDir(t, "integration/config"), "--config", writeFile(t, t.TempDir(), "store.yaml", "store:\n  timeout: 1s\n"))
	if !strings.Contains(p.waitLog("sluice serving", time.Second)["store"].(string), fmt.Sprint(port)) {
		t.Fatalf("not on the TLS port:\n%s", p.logText())
	}
	call := rlsCall(dialRLS(t, p))
	step := envoytest.Step{Domain: "another", Descriptors: [][][2]string{{{"key2", "tls"}}}}
	for i := range 21 {
		res, err := call(step.Request())
		want := rlsv3.RateLimitResponse_OK
		if i == 20 {
			want = rlsv3.RateLimitResponse_OVER_LIMIT
		}
		if err != nil || res.GetOverallCode() != want {
			t.Fatalf("call %d: %v, %v; want %v", i+1, res, err, want)
		}
	}
	if r := p.do("GET", "/healthcheck", ""); r.Status != 200 {
		t.Errorf("/healthcheck: %d %s", r.Status, r.Body)
	}
}
