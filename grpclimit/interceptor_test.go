package grpclimit

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/edge/edgetest"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/storetest"
)

// serve starts a gRPC server with the health service behind the
// interceptors of cfg on a loopback listener, and returns a client of it.
func serve(t *testing.T, cfg Config) healthpb.HealthClient {
	t.Helper()
	ic, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnaryInterceptor(ic.Unary), grpc.StreamInterceptor(ic.Stream))
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return healthpb.NewHealthClient(conn)
}

func newLimiter(t *testing.T) (*sluice.Limiter, *storetest.Clock) {
	t.Helper()
	clock := storetest.NewClock(storetest.T0)
	store := memstore.New(memstore.Config{Clock: clock.Now})
	t.Cleanup(func() { _ = store.Close() })
	return sluice.NewLimiter(store, sluice.Config{}), clock
}

func perKey(limit int64) *sluice.Policy {
	return &sluice.Policy{Name: "api", Rules: []sluice.Rule{
		{Name: "per-key", By: []string{"key"}, Limit: limit, Window: time.Minute},
	}}
}

func withKey(key string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "x-api-key", key)
}

func TestUnaryDeniedWithRetryInfo(t *testing.T) {
	t.Parallel()
	lim, clock := newLimiter(t)
	client := serve(t, Config{Limiter: lim, Policies: []*sluice.Policy{perKey(2)},
		Keys: map[string]KeyFunc{"key": Metadata("X-API-Key")}})

	for i := range 2 {
		if _, err := client.Check(withKey("k1"), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		clock.Advance(10 * time.Second)
	}
	_, err := client.Check(withKey("k1"), &healthpb.HealthCheckRequest{})
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted {
		t.Fatalf("third call: %v, want ResourceExhausted", err)
	}
	var retry *errdetails.RetryInfo
	var quota *errdetails.QuotaFailure
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.RetryInfo:
			retry = d
		case *errdetails.QuotaFailure:
			quota = d
		}
	}
	// The first call, 20 s old, leaves the 1-minute window in 40 s.
	if retry == nil || retry.GetRetryDelay().AsDuration() != 40*time.Second {
		t.Errorf("RetryInfo = %v, want a 40s delay", retry)
	}
	if quota == nil || len(quota.GetViolations()) != 1 || quota.GetViolations()[0].GetQuotaId() != "per-key" ||
		quota.GetViolations()[0].GetSubject() != "api" || quota.GetViolations()[0].GetQuotaValue() != 2 {
		t.Errorf("QuotaFailure = %v, want one violation of api/per-key with quota 2", quota)
	}

	// Another key is not affected; once the window slides, k1 passes.
	if _, err := client.Check(withKey("k2"), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("k2: %v", err)
	}
	clock.Advance(40 * time.Second)
	if _, err := client.Check(withKey("k1"), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("k1 after the window slid: %v", err)
	}
}

func TestStreamDenied(t *testing.T) {
	t.Parallel()
	lim, _ := newLimiter(t)
	client := serve(t, Config{Limiter: lim, Policies: []*sluice.Policy{perKey(1)},
		Keys: map[string]KeyFunc{"key": Metadata("x-api-key")}})

	ctx, cancel := context.WithCancel(withKey("k1"))
	defer cancel()
	stream, err := client.Watch(ctx, &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatalf("first stream: %v", err)
	}
	cancel()

	stream, err = client.Watch(withKey("k1"), &healthpb.HealthCheckRequest{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = stream.Recv()
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || len(st.Details()) == 0 {
		t.Errorf("second stream: %v, want ResourceExhausted with details", err)
	}
}

func TestMissingKey(t *testing.T) {
	t.Parallel()
	lim, _ := newLimiter(t)
	client := serve(t, Config{Limiter: lim, Policies: []*sluice.Policy{perKey(1)},
		Keys: map[string]KeyFunc{"key": Metadata("x-api-key")}})
	_, err := client.Check(context.Background(), &healthpb.HealthCheckRequest{})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("no API key: %v, want InvalidArgument", err)
	}
}

// failingStore is a store whose every decision fails.
type failingStore = edgetest.FailingStore

func TestStoreFailure(t *testing.T) {
	t.Parallel()
	t.Run("deny fails with Unavailable", func(t *testing.T) { checkStoreFailure(t, sluice.Deny, codes.Unavailable) })
	t.Run("allow proceeds", func(t *testing.T) { checkStoreFailure(t, sluice.Allow, codes.OK) })
}

func TestFallbackDenialIsQuota(t *testing.T) {
	t.Parallel()
	fallback := memstore.New(memstore.Config{Clock: storetest.NewClock(storetest.T0).Now})
	lim := sluice.NewLimiter(failingStore{}, sluice.Config{Fallback: fallback, Breaker: sluice.Breaker{Failures: -1}})
	client := serve(t, Config{Limiter: lim, Policies: []*sluice.Policy{perKey(1)},
		Keys: map[string]KeyFunc{"key": Metadata("x-api-key")}})
	if _, err := client.Check(withKey("k1"), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("first call through the fallback store: %v", err)
	}
	_, err := client.Check(withKey("k1"), &healthpb.HealthCheckRequest{})
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || len(st.Details()) == 0 {
		t.Errorf("second call: %v, want ResourceExhausted with details from the fallback store's denial", err)
	}
}

// checkStoreFailure checks a call when the store fails and the failure
// policy is onError: it ends with code want, its status does not show the
// store's error, and the error is logged.
func checkStoreFailure(t *testing.T, onError sluice.OnError, want codes.Code) {
	t.Parallel()
	var logs bytes.Buffer
	client := serve(t, Config{
		Limiter:  sluice.NewLimiter(failingStore{}, sluice.Config{OnError: onError}),
		Policies: []*sluice.Policy{perKey(1)},
		Keys:     map[string]KeyFunc{"key": Metadata("x-api-key")},
		Logger:   slog.New(slog.NewTextHandler(&logs, nil)),
	})
	_, err := client.Check(withKey("k1"), &healthpb.HealthCheckRequest{})
	if status.Code(err) != want {
		t.Fatalf("%v, want %v", err, want)
	}
	if err != nil && strings.Contains(err.Error(), "10.1.2.3") {
		t.Errorf("status %v leaks the store error", err)
	}
	if !strings.Contains(logs.String(), "connection refused") {
		t.Errorf("store error not logged: %q", logs.String())
	}
}

func TestShadowSurvivesStoreFailure(t *testing.T) {
	t.Parallel()
	p := perKey(1)
	p.Shadow = true
	client := serve(t, Config{Limiter: sluice.NewLimiter(failingStore{}, sluice.Config{}), Policies: []*sluice.Policy{p},
		Keys: map[string]KeyFunc{"key": Metadata("x-api-key")}})
	if _, err := client.Check(withKey("k1"), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("shadow policy with a failing store: %v, want the call to proceed", err)
	}
}

func TestShadowNeverDenies(t *testing.T) {
	t.Parallel()
	lim, _ := newLimiter(t)
	p := perKey(1)
	p.Shadow = true
	client := serve(t, Config{Limiter: lim, Policies: []*sluice.Policy{p},
		Keys: map[string]KeyFunc{"key": Metadata("x-api-key")}})
	for i := range 3 {
		if _, err := client.Check(withKey("k1"), &healthpb.HealthCheckRequest{}); err != nil {
			t.Errorf("call %d under a shadow policy: %v", i, err)
		}
	}
}

func TestClientIPAndMethod(t *testing.T) {
	t.Parallel()
	lim, _ := newLimiter(t)
	clients, err := httplimit.NewIPResolver(httplimit.IPConfig{
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := &sluice.Policy{Name: "api", Rules: []sluice.Rule{
		{Name: "per-client-method", By: []string{"client", "method"}, Limit: 1, Window: time.Minute},
	}}
	client := serve(t, Config{Limiter: lim, Policies: []*sluice.Policy{p},
		Keys: map[string]KeyFunc{"client": ClientIP(clients), "method": Method}})

	from := func(addr string) context.Context {
		return metadata.AppendToOutgoingContext(context.Background(), "x-forwarded-for", addr)
	}
	if _, err := client.Check(from("203.0.113.7"), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	// The same client through the trusted loopback proxy is denied; a
	// different one is not.
	if _, err := client.Check(from("203.0.113.7"), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("same client: %v, want ResourceExhausted", err)
	}
	if _, err := client.Check(from("203.0.113.8"), &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("other client: %v", err)
	}
	d, err := lim.Peek(context.Background(), p, map[string]string{
		"client": "203.0.113.7", "method": healthpb.Health_Check_FullMethodName,
	}, 1)
	if err != nil || d.Limits()[0].Used != 1 {
		t.Errorf("window of 203.0.113.7: %+v, %v; want one entry", d, err)
	}
}

func TestNewErrors(t *testing.T) {
	t.Parallel()
	lim, _ := newLimiter(t)
	keys := map[string]KeyFunc{"key": Metadata("x-api-key")}
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no limiter", Config{Policies: []*sluice.Policy{perKey(1)}, Keys: keys}, "Limiter is nil"},
		{"no policies", Config{Limiter: lim, Keys: keys}, "Policies is empty"},
		{"nil policy", Config{Limiter: lim, Policies: []*sluice.Policy{nil}, Keys: keys}, "Policies[0] is nil"},
		{"invalid policy", Config{Limiter: lim, Policies: []*sluice.Policy{perKey(-1)}, Keys: keys}, "limit -1 is negative"},
		{"duplicate policy", Config{Limiter: lim, Policies: []*sluice.Policy{perKey(1), perKey(2)}, Keys: keys}, "listed twice"},
		{"missing key function", Config{Limiter: lim, Policies: []*sluice.Policy{perKey(1)}}, `attribute "key", which has no function`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if _, err := New(c.cfg); err == nil || !strings.HasPrefix(err.Error(), "grpclimit: ") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("New error = %v, want one starting with grpclimit: and containing %q", err, c.want)
			}
		})
	}
}
