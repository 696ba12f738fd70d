package xds_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/sluicerate/sluice/internal/envoy"
	"github.com/sluicerate/sluice/internal/envoy/xds"
	"github.com/sluicerate/sluice/internal/envoy/xds/xdstest"
	"github.com/sluicerate/sluice/internal/tlsfiles"
	"github.com/sluicerate/sluice/internal/tlsfiles/tlsfilestest"
)

// domain is a resource of one domain with one limit.
func domain(name, domain string, perMinute uint32) *rlsconfv3.RateLimitConfig {
	return &rlsconfv3.RateLimitConfig{Name: name, Domain: domain, Descriptors: []*rlsconfv3.RateLimitDescriptor{{
		Key: "k", RateLimit: &rlsconfv3.RateLimitPolicy{Unit: rlsconfv3.RateLimitUnit_MINUTE, RequestsPerUnit: perMinute}}}}
}

// applied records what a client applied.
type applied struct {
	mu       sync.Mutex
	versions []string
	dumps    []string
	ch       chan string
}

func (a *applied) apply(version string, docs []envoy.Source) error {
	cfg, err := envoy.Parse(docs, envoy.LoadOptions{})
	if err != nil {
		return err
	}
	a.mu.Lock()
	a.versions = append(a.versions, version)
	a.dumps = append(a.dumps, cfg.Dump())
	a.mu.Unlock()
	a.ch <- version
	return nil
}

// next waits for the next version applied.
func (a *applied) next(t *testing.T) (string, string) {
	t.Helper()
	select {
	case v := <-a.ch:
		a.mu.Lock()
		defer a.mu.Unlock()
		return v, a.dumps[len(a.dumps)-1]
	case <-time.After(10 * time.Second):
		t.Fatal("no version applied in 10s")
		return "", ""
	}
}

func run(t *testing.T, opts xds.Options) *xds.Client {
	t.Helper()
	c, err := xds.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

func nacksOf(reqs []*discoveryv3.DiscoveryRequest, version string) int {
	n := 0
	for _, r := range xdstest.Nacks(reqs) {
		if r.GetVersionInfo() == version {
			n++
		}
	}
	return n
}

// TestClientFollowsVersions: each version pushed is applied and
// acknowledged; a bad one is refused once, with the loader's message
// naming the resource, and the next good one is applied; the node, its
// metadata and the headers reach the control plane.
func TestClientFollowsVersions(t *testing.T) {
	cp := xdstest.Start(t, "127.0.0.1:0")
	a := &applied{ch: make(chan string, 10)}
	c := run(t, xds.Options{Server: cp.Addr, NodeID: "envoy-ratelimit", NodeMetadata: map[string]string{"zone": "a"},
		Headers: map[string]string{"x-tenant": "t1"}, Apply: a.apply})

	cp.Push(t, "envoy-ratelimit", "1", domain("default/eg/http", "d", 10))
	if v, dump := a.next(t); v != "1" || !strings.Contains(dump, "d.k: unit=MINUTE requests_per_unit=10") {
		t.Fatalf("applied %q: %s", v, dump)
	}
	cp.Push(t, "envoy-ratelimit", "2", domain("default/eg/http", "d", 20))
	if v, dump := a.next(t); v != "2" || !strings.Contains(dump, "requests_per_unit=20") {
		t.Fatalf("applied %q: %s", v, dump)
	}
	if !cp.WaitFor(5*time.Second, func(r []*discoveryv3.DiscoveryRequest) bool { return xdstest.Acked(r, "2") }) {
		t.Fatal("version 2 not acknowledged")
	}
	// Version 3: two resources configure one domain.
	cp.Push(t, "envoy-ratelimit", "3", domain("default/eg/http", "d", 30), domain("default/eg/grpc", "d", 40))
	if !cp.WaitFor(5*time.Second, func(r []*discoveryv3.DiscoveryRequest) bool { return nacksOf(r, "3") > 0 }) {
		t.Fatal("version 3 not refused")
	}
	cp.Push(t, "envoy-ratelimit", "4", domain("default/eg/http", "d", 40))
	if v, _ := a.next(t); v != "4" {
		t.Fatalf("applied %q, want 4", v)
	}
	if !cp.WaitFor(5*time.Second, func(r []*discoveryv3.DiscoveryRequest) bool { return xdstest.Acked(r, "4") }) {
		t.Fatal("version 4 not acknowledged")
	}
	reqs := cp.Requests()
	if n := nacksOf(reqs, "3"); n != 1 {
		t.Errorf("version 3 refused %d times, want once", n)
	}
	nack := xdstest.Nacks(reqs)[0]
	if msg := nack.GetErrorDetail().GetMessage(); !strings.Contains(msg, `xds:default/eg/http:1:9`) || !strings.Contains(msg, `xds:default/eg/grpc:1:9`) ||
		!strings.Contains(msg, `domain "d" is already configured at`) {
		t.Errorf("the refusal says %q; want the loader's message naming both resources", msg)
	}
	if n := cp.Node(); n.GetId() != "envoy-ratelimit" || n.GetMetadata().GetFields()["zone"].GetStringValue() != "a" {
		t.Errorf("node %v", n)
	}
	if h := cp.Headers(); len(h) == 0 || strings.Join(h[0].Get("x-tenant"), ",") != "t1" {
		t.Errorf("stream headers %v", h)
	}
	if st := c.Status(); st.Version != "4" || !st.Connected || st.Rejected != "" {
		t.Errorf("status %+v", st)
	}
}

// TestClientReconnects: when the control plane restarts, with versions
// counted from 1 again, the client opens another stream at once and takes
// its state, over mutual TLS.
func TestClientReconnects(t *testing.T) {
	ca := tlsfilestest.NewCA(t, "ca")
	vol := ca.ServerVolume(t, t.TempDir(), 1, "127.0.0.1")
	scfg, err := tlsfiles.ServerConfig(tlsfiles.Server{Cert: vol.Path("tls.crt"), Key: vol.Path("tls.key"), ClientCA: vol.Path("ca.crt")})
	if err != nil {
		t.Fatal(err)
	}
	creds := grpc.Creds(credentials.NewTLS(scfg))
	cp := xdstest.Start(t, "127.0.0.1:0", creds)
	files, err := tlsfiles.NewClient(tlsfiles.Client{CA: vol.Path("ca.crt"), Cert: vol.Path("tls.crt"), Key: vol.Path("tls.key")})
	if err != nil {
		t.Fatal(err)
	}
	a := &applied{ch: make(chan string, 10)}
	c := run(t, xds.Options{Server: cp.Addr, TLS: files, Apply: a.apply, ConnectRetry: 100 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	cp.Push(t, "default", "5", domain("r", "d", 5))
	if v, _ := a.next(t); v != "5" {
		t.Fatalf("applied %q", v)
	}
	cp.Stop()
	cp = xdstest.Start(t, cp.Addr, creds)
	cp.Push(t, "default", "1", domain("r", "d", 1))
	if v, dump := a.next(t); v != "1" || !strings.Contains(dump, "requests_per_unit=1,") {
		t.Fatalf("after the restart, applied %q: %s", v, dump)
	}
	if !cp.WaitFor(5*time.Second, func(r []*discoveryv3.DiscoveryRequest) bool { return xdstest.Acked(r, "1") }) {
		t.Fatal("version 1 not acknowledged")
	}
	if st := c.Status(); st.Version != "1" || !st.Connected {
		t.Errorf("status %+v", st)
	}
}

// tWriter writes to the test's log.
type tWriter struct{ t *testing.T }

func (w tWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// TestBackoff: at once after a stream that brought something, then
// doubling from Initial up to Max, randomized by RandomFactor.
func TestBackoff(t *testing.T) {
	b := xds.Backoff{Initial: time.Second, Max: 5 * time.Second, RandomFactor: 0.5}
	for _, tt := range []struct {
		failures int
		rand     float64
		want     time.Duration
	}{
		{0, 0.9, 0},
		{1, 0.5, time.Second},
		{2, 0.5, 2 * time.Second},
		{3, 0.5, 4 * time.Second},
		{4, 0.5, 5 * time.Second},
		{9, 0.5, 5 * time.Second},
		{1, 0, 500 * time.Millisecond},
		{1, 0.999999, 1499999 * time.Microsecond},
	} {
		if got := xds.Delay(b, tt.failures, tt.rand); got.Round(time.Microsecond) != tt.want {
			t.Errorf("failures %d, rand %v: %v, want %v", tt.failures, tt.rand, got, tt.want)
		}
	}
	if got := xds.Delay(xds.Backoff{Initial: time.Second, NoJitter: true}, 1, 0); got != time.Second {
		t.Errorf("no jitter: %v", got)
	}
	if got := xds.Delay(xds.Backoff{}, 1, 0.5); got != 10*time.Second {
		t.Errorf("defaults: %v, want 10s", got)
	}
}
