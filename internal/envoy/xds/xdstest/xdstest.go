// Package xdstest runs an xDS control plane for tests: go-control-plane's
// server (pkg/server/v3) over its snapshot cache (pkg/cache/v3), the
// library Envoy Gateway's control plane serves envoyproxy/ratelimit's
// configuration with, on a loopback port, recording every request its
// clients make.
package xdstest

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discoveryv3 "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	rlsconfv3 "github.com/envoyproxy/go-control-plane/ratelimit/config/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"
)

// ControlPlane is a running control plane. Its methods are safe for
// concurrent use.
type ControlPlane struct {
	// Addr is the address it listens on.
	Addr string

	cache  cachev3.SnapshotCache
	gs     *grpc.Server
	cancel context.CancelFunc

	mu       sync.Mutex
	requests []*discoveryv3.DiscoveryRequest
	headers  []metadata.MD
	streams  int
	changed  chan struct{} // closed and replaced on every request or stream
}

// Start starts a control plane on addr ("127.0.0.1:0" for any port; the
// address of one stopped, to restart it), with opts (TLS credentials, say).
// It stops when the test ends.
func Start(t testing.TB, addr string, opts ...grpc.ServerOption) *ControlPlane {
	t.Helper()
	var l net.Listener
	var err error
	for range 50 { // a restart may find the port in use a moment longer
		if l, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cp := &ControlPlane{Addr: l.Addr().String(), cancel: cancel, changed: make(chan struct{}),
		cache: cachev3.NewSnapshotCache(false, cachev3.IDHash{}, nil)}
	cb := serverv3.CallbackFuncs{
		StreamOpenFunc: func(ctx context.Context, _ int64, _ string) error {
			md, _ := metadata.FromIncomingContext(ctx)
			cp.record(func() { cp.streams++; cp.headers = append(cp.headers, md) })
			return nil
		},
		StreamRequestFunc: func(_ int64, req *discoveryv3.DiscoveryRequest) error {
			req = proto.Clone(req).(*discoveryv3.DiscoveryRequest)
			cp.record(func() { cp.requests = append(cp.requests, req) })
			return nil
		},
	}
	cp.gs = grpc.NewServer(opts...)
	discoveryv3.RegisterAggregatedDiscoveryServiceServer(cp.gs, serverv3.NewServer(ctx, cp.cache, cb))
	go func() { _ = cp.gs.Serve(l) }()
	t.Cleanup(cp.Stop)
	return cp
}

func (cp *ControlPlane) record(f func()) {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	f()
	close(cp.changed)
	cp.changed = make(chan struct{})
}

// Stop stops the control plane, closing its streams.
func (cp *ControlPlane) Stop() {
	cp.cancel()
	cp.gs.Stop()
}

// Push makes configs version's snapshot of node.
func (cp *ControlPlane) Push(t testing.TB, node, version string, configs ...*rlsconfv3.RateLimitConfig) {
	t.Helper()
	res := make([]types.Resource, len(configs))
	for i, c := range configs {
		res[i] = c
	}
	snap, err := cachev3.NewSnapshot(version, map[resourcev3.Type][]types.Resource{resourcev3.RateLimitConfigType: res})
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.cache.SetSnapshot(context.Background(), node, snap); err != nil {
		t.Fatal(err)
	}
}

// Requests returns the requests received so far, in order.
func (cp *ControlPlane) Requests() []*discoveryv3.DiscoveryRequest {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return append([]*discoveryv3.DiscoveryRequest(nil), cp.requests...)
}

// Headers returns the metadata each stream was opened with, in order.
func (cp *ControlPlane) Headers() []metadata.MD {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return append([]metadata.MD(nil), cp.headers...)
}

// Node returns the node of the first request that named one, or nil.
func (cp *ControlPlane) Node() *corev3.Node {
	for _, r := range cp.Requests() {
		if r.GetNode() != nil {
			return r.GetNode()
		}
	}
	return nil
}

// WaitFor waits until cond holds of the requests received, re-checking it
// at each request, for at most timeout; it reports whether it held.
func (cp *ControlPlane) WaitFor(timeout time.Duration, cond func(reqs []*discoveryv3.DiscoveryRequest) bool) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		cp.mu.Lock()
		reqs, changed := append([]*discoveryv3.DiscoveryRequest(nil), cp.requests...), cp.changed
		cp.mu.Unlock()
		if cond(reqs) {
			return true
		}
		select {
		case <-changed:
		case <-deadline.C:
			return cond(cp.Requests())
		}
	}
}

// Acked reports whether reqs acknowledge version: a request naming it,
// without an error.
func Acked(reqs []*discoveryv3.DiscoveryRequest, version string) bool {
	for _, r := range reqs {
		if r.GetVersionInfo() == version && r.GetResponseNonce() != "" && r.GetErrorDetail() == nil {
			return true
		}
	}
	return false
}

// Nacks returns the refusals in reqs: the requests with an error.
func Nacks(reqs []*discoveryv3.DiscoveryRequest) []*discoveryv3.DiscoveryRequest {
	var out []*discoveryv3.DiscoveryRequest
	for _, r := range reqs {
		if r.GetErrorDetail() != nil {
			out = append(out, r)
		}
	}
	return out
}

// Refusals returns the refusals in reqs of version: the requests naming
// it, with an error.
func Refusals(reqs []*discoveryv3.DiscoveryRequest, version string) []*discoveryv3.DiscoveryRequest {
	var out []*discoveryv3.DiscoveryRequest
	for _, r := range Nacks(reqs) {
		if r.GetVersionInfo() == version {
			out = append(out, r)
		}
	}
	return out
}
