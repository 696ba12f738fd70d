package server

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/sluicerate/sluice/memstore"
	sluicev1 "github.com/sluicerate/sluice/proto/sluice/v1"
	"github.com/sluicerate/sluice/store"
)

// gateStore is a real store whose decisions wait at a gate: each says it
// entered, then waits to be let through or for its context to end.
type gateStore struct {
	store.Store
	entered chan struct{}
	open    chan struct{}
}

func (g *gateStore) Decide(ctx context.Context, req *store.Request) error {
	g.entered <- struct{}{}
	select {
	case <-g.open:
	case <-ctx.Done():
		return ctx.Err()
	}
	return g.Store.Decide(ctx, req)
}

func gatedServer(t *testing.T, opts Options) (*testServer, *gateStore, *prometheus.Registry) {
	t.Helper()
	st := &gateStore{Store: memstore.New(memstore.Config{}), entered: make(chan struct{}, 10), open: make(chan struct{})}
	t.Cleanup(func() { st.Close() })
	reg := prometheus.NewRegistry()
	opts.Logger, opts.Registry, opts.StoreTimeout = slog.New(slog.DiscardHandler), reg, 10*time.Second
	return testServerFor(t, st, grpcConfig, opts), st, reg
}

// TestShedConcurrency: with MaxInFlight 1, a request beyond the one in
// flight is refused at once, RESOURCE_EXHAUSTED over gRPC and 503 over
// HTTP, saying why; health checks are not; the one in flight finishes.
func TestShedConcurrency(t *testing.T) {
	ts, st, reg := gatedServer(t, Options{MaxInFlight: 1})
	client := sluicev1.NewSluiceClient(ts.conn())
	req := &sluicev1.DecideRequest{Policy: "api", Attributes: map[string]string{"user": "u", "path": "/p"}}
	done := make(chan error, 1)
	go func() {
		_, err := client.Decide(context.Background(), req)
		done <- err
	}()
	<-st.entered
	_, err := client.Decide(context.Background(), req)
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "MAX_CONCURRENT_REQUESTS") {
		t.Errorf("a second call in flight: %v, want RESOURCE_EXHAUSTED naming MAX_CONCURRENT_REQUESTS", err)
	}
	w := ts.do("POST", "/v1/decide", `{"policy":"api","attributes":{"user":"u","path":"/p"}}`)
	if w.Code != 503 || w.Header().Get("Retry-After") != "1" || !strings.Contains(w.Body.String(), "overloaded") {
		t.Errorf("an HTTP request in flight beside it: %d %v %s", w.Code, w.Header(), w.Body)
	}
	if res, err := healthpb.NewHealthClient(ts.conn()).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil || res.Status != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("a health check: %v, %v; want SERVING", res, err)
	}
	if w := ts.do("GET", "/healthz", ""); w.Code != 200 {
		t.Errorf("/healthz: %d", w.Code)
	}
	close(st.open)
	if err := <-done; err != nil {
		t.Errorf("the call in flight: %v", err)
	}
	if got := shedCount(t, reg, "grpc", "concurrency"); got != 1 {
		t.Errorf("shed gRPC calls counted %v, want 1", got)
	}
}

// TestShedTimeout: with RequestTimeout, a call whose store does not answer
// in time is answered DEADLINE_EXCEEDED, naming REQUEST_TIMEOUT.
func TestShedTimeout(t *testing.T) {
	ts, _, reg := gatedServer(t, Options{RequestTimeout: 50 * time.Millisecond})
	_, err := sluicev1.NewSluiceClient(ts.conn()).Decide(context.Background(), &sluicev1.DecideRequest{Policy: "api", Attributes: map[string]string{"user": "u", "path": "/p"}})
	if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "REQUEST_TIMEOUT") {
		t.Errorf("a call past the timeout: %v, want DEADLINE_EXCEEDED naming REQUEST_TIMEOUT", err)
	}
	if got := shedCount(t, reg, "grpc", "timeout"); got != 1 {
		t.Errorf("timed out calls counted %v, want 1", got)
	}
}

// shedCount is sluice_requests_shed_total for api and reason.
func shedCount(t *testing.T, reg *prometheus.Registry, api, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if mf.GetName() == "sluice_requests_shed_total" && labels["api"] == api && labels["reason"] == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}
