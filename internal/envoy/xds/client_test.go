package xds_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/anypb"

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
	if !cp.WaitFor(5*time.Second, func(r []*discoveryv3.DiscoveryRequest) bool { return len(xdstest.Refusals(r, "3")) > 0 }) {
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
	if n := len(xdstest.Refusals(reqs, "3")); n != 1 {
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
	// A stream to the stopped control plane may end at once more than
	// once; the backoff between streams stays short so that the test's
	// wait does not depend on the jitter's draw.
	c := run(t, xds.Options{Server: cp.Addr, TLS: files, Apply: a.apply, ConnectRetry: 100 * time.Millisecond,
		Backoff: xds.Backoff{Initial: 50 * time.Millisecond, Max: 200 * time.Millisecond},
		Logger:  slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))})
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

// scripted is an ADS server that runs script on the first stream opened,
// reporting what it found wrong on errs.
type scripted struct {
	discoveryv3.UnimplementedAggregatedDiscoveryServiceServer
	script func(s discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error
	errs   chan error
}

func (p *scripted) StreamAggregatedResources(s discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	err := p.script(s)
	p.errs <- err
	<-s.Context().Done() // keep the stream open: the client would open another
	return nil
}

// response is a DiscoveryResponse of version and nonce carrying configs.
func response(t *testing.T, version, nonce string, configs ...*rlsconfv3.RateLimitConfig) *discoveryv3.DiscoveryResponse {
	t.Helper()
	res := &discoveryv3.DiscoveryResponse{TypeUrl: xds.TypeURL, VersionInfo: version, Nonce: nonce}
	for _, c := range configs {
		a, err := anypb.New(c)
		if err != nil {
			t.Fatal(err)
		}
		res.Resources = append(res.Resources, a)
	}
	return res
}

// TestClientAnswersEachVersionOnce drives the client's stream step by step
// from the control plane's side: the first request asks for the type with
// no version; a good version is applied and acknowledged with its version
// and nonce; a bad one is refused with its version, its nonce and the
// loader's message; the same bad version sent again is not answered (the
// next request the server sees is the ACK of the version after it, the
// stream being in order); a good version sent again is acknowledged with
// its new nonce and not applied twice.
func TestClientAnswersEachVersionOnce(t *testing.T) {
	good1, bad, good3 := domain("r", "d", 1), domain("r", "d", 2), domain("r", "d", 3)
	bad.Descriptors[0].RateLimit.Unit = rlsconfv3.RateLimitUnit_UNKNOWN
	expect := func(s discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesServer, version, nonce, errPart string) error {
		req, err := s.Recv()
		switch {
		case err != nil:
			return err
		case req.GetTypeUrl() != xds.TypeURL || req.GetVersionInfo() != version || req.GetResponseNonce() != nonce:
			return fmt.Errorf("request %q/%q of %s, want version %q, nonce %q", req.GetVersionInfo(), req.GetResponseNonce(), req.GetTypeUrl(), version, nonce)
		case errPart == "" && req.GetErrorDetail() != nil:
			return fmt.Errorf("version %s refused: %s", version, req.GetErrorDetail().GetMessage())
		case errPart != "" && !strings.Contains(req.GetErrorDetail().GetMessage(), errPart):
			return fmt.Errorf("version %s: error detail %q, want it to say %q", version, req.GetErrorDetail().GetMessage(), errPart)
		}
		return nil
	}
	steps := []struct {
		res                     *discoveryv3.DiscoveryResponse
		version, nonce, errPart string // the request expected after it; none when version is ""
	}{
		{response(t, "1", "a", good1), "1", "a", ""},
		{response(t, "2", "b", bad), "2", "b", "xds:r:"},
		{response(t, "2", "c", bad), "", "", ""},
		{response(t, "3", "d", good3), "3", "d", ""},
		{response(t, "3", "e", good3), "3", "e", ""},
	}
	p := &scripted{errs: make(chan error, 1), script: func(s discoveryv3.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
		first, err := s.Recv()
		if err != nil {
			return err
		}
		if first.GetVersionInfo() != "" || first.GetResponseNonce() != "" || first.GetNode().GetId() != "n" || first.GetTypeUrl() != xds.TypeURL {
			return fmt.Errorf("first request %v, want node n asking for %s with no version", first, xds.TypeURL)
		}
		for _, st := range steps {
			if err := s.Send(st.res); err != nil {
				return err
			}
			if st.version == "" {
				continue
			}
			if err := expect(s, st.version, st.nonce, st.errPart); err != nil {
				return err
			}
		}
		return nil
	}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(gs, p)
	go func() { _ = gs.Serve(l) }()
	t.Cleanup(gs.Stop)
	a := &applied{ch: make(chan string, 10)}
	c := run(t, xds.Options{Server: l.Addr().String(), NodeID: "n", Apply: a.apply})
	select {
	case err := <-p.errs:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the script did not end in 10s")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if strings.Join(a.versions, ",") != "1,3" {
		t.Errorf("applied %v, want 1 and 3, each once", a.versions)
	}
	if st := c.Status(); st.Version != "3" || st.Rejected != "" {
		t.Errorf("status %+v", st)
	}
}
