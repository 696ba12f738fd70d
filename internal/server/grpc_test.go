package server

import (
	"context"
	"net"
	"testing"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	sluicev1 "github.com/sluicerate/sluice/proto/sluice/v1"
)

const grpcConfig = `
policies:
  - name: api
    limits:
      - {name: per-user, by: [user], limit: 2, window: 1m}
      - {name: per-path, by: [path], limit: 100, window: 1h}
schedules:
  - {name: carrier, by: [carrier], rate: 4/s, max_delay: 1s}
`

// grpcConn serves ts's gRPC services on a loopback port and dials it.
func grpcConn(t *testing.T, ts *testServer) *grpc.ClientConn {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := ts.srv.GRPCServer()
	go gs.Serve(l)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// conn returns a client connection to ts's gRPC services, made once.
func (ts *testServer) conn() *grpc.ClientConn {
	if ts.grpc == nil {
		ts.grpc = grpcConn(ts.t, ts)
	}
	return ts.grpc
}

func descriptor(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func TestEnvoyAtomicDescriptors(t *testing.T) {
	ts := newTestServer(t, grpcConfig)
	client := rlsv3.NewRateLimitServiceClient(grpcConn(t, ts))
	ctx := context.Background()
	req := &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		descriptor("user", "bob"), descriptor("path", "/orders"),
	}}
	for i := range 2 {
		res, err := client.ShouldRateLimit(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if res.OverallCode != rlsv3.RateLimitResponse_OK || len(res.Statuses) != 2 {
			t.Fatalf("request %d = %v", i, res)
		}
		if got := res.Statuses[0].LimitRemaining; got != uint32(1-i) {
			t.Errorf("request %d: user remaining %d, want %d", i, got, 1-i)
		}
	}
	res, err := client.ShouldRateLimit(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if res.OverallCode != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("third request = %v, want OVER_LIMIT", res.OverallCode)
	}
	user, path := res.Statuses[0], res.Statuses[1]
	if user.Code != rlsv3.RateLimitResponse_OVER_LIMIT || user.CurrentLimit.GetName() != "per-user" ||
		user.CurrentLimit.GetRequestsPerUnit() != 2 || user.CurrentLimit.GetUnit() != rlsv3.RateLimitResponse_RateLimit_MINUTE {
		t.Errorf("user status = %v", user)
	}
	if path.Code != rlsv3.RateLimitResponse_OK || path.LimitRemaining != 98 || path.CurrentLimit.GetUnit() != rlsv3.RateLimitResponse_RateLimit_HOUR {
		t.Errorf("path status = %v, want OK with 98 remaining", path)
	}
	var retry bool
	for _, h := range res.ResponseHeadersToAdd {
		retry = retry || (h.Key == "retry-after" && h.Value == "60")
	}
	if !retry {
		t.Errorf("headers %v lack Retry-After: 60", res.ResponseHeadersToAdd)
	}
	// The denied request consumed nothing: /orders still has 98 left, and
	// another user can use it.
	res, err = client.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*ratelimitv3.RateLimitDescriptor{
		descriptor("user", "carol"), descriptor("path", "/orders"),
	}})
	if err != nil || res.OverallCode != rlsv3.RateLimitResponse_OK || res.Statuses[1].LimitRemaining != 97 {
		t.Fatalf("carol = %v, %v; want OK with /orders at 97 remaining", res, err)
	}
	// A descriptor hits_addend of 0 checks without recording: it reports
	// what the hit would leave (96), and leaves 97.
	peek := proto.Clone(req).(*rlsv3.RateLimitRequest)
	peek.Descriptors[1].HitsAddend = wrapperspb.UInt64(0)
	peek.Descriptors[0] = descriptor("user", "dave")
	res, err = client.ShouldRateLimit(ctx, peek)
	if err != nil || res.Statuses[1].LimitRemaining != 96 {
		t.Fatalf("peek = %v, %v", res, err)
	}
	res, _ = client.ShouldRateLimit(ctx, peek)
	if res.Statuses[1].LimitRemaining != 96 {
		t.Errorf("a peek recorded: remaining %d, want 96", res.Statuses[1].LimitRemaining)
	}
}

func TestEnvoyErrors(t *testing.T) {
	ts := newTestServer(t, grpcConfig)
	client := rlsv3.NewRateLimitServiceClient(grpcConn(t, ts))
	tests := []struct {
		name string
		req  *rlsv3.RateLimitRequest
	}{
		{"unknown domain", &rlsv3.RateLimitRequest{Domain: "nope", Descriptors: []*ratelimitv3.RateLimitDescriptor{descriptor("user", "a")}}},
		{"no domain", &rlsv3.RateLimitRequest{Descriptors: []*ratelimitv3.RateLimitDescriptor{descriptor("user", "a")}}},
		{"no descriptors", &rlsv3.RateLimitRequest{Domain: "api"}},
		{"missing attribute", &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*ratelimitv3.RateLimitDescriptor{descriptor("user", "a")}}},
		{"conflicting values", &rlsv3.RateLimitRequest{Domain: "api", Descriptors: []*ratelimitv3.RateLimitDescriptor{
			descriptor("user", "a", "path", "/"), descriptor("user", "b")}}},
		{"cost over limit", &rlsv3.RateLimitRequest{Domain: "api", HitsAddend: 3, Descriptors: []*ratelimitv3.RateLimitDescriptor{
			descriptor("user", "a", "path", "/")}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := client.ShouldRateLimit(context.Background(), tt.req)
			if status.Code(err) != codes.InvalidArgument {
				t.Errorf("err = %v, want InvalidArgument", err)
			}
		})
	}
}

func TestSluiceService(t *testing.T) {
	ts := newTestServer(t, grpcConfig)
	client := sluicev1.NewSluiceClient(grpcConn(t, ts))
	ctx := context.Background()
	req := &sluicev1.DecideRequest{Policy: "api", Attributes: map[string]string{"user": "u", "path": "/"}}
	d, err := client.Decide(ctx, req)
	if err != nil || !d.Allowed || d.Remaining != 1 || len(d.Limits) != 2 || d.Limits[0].WindowMs != 60000 {
		t.Fatalf("Decide = %v, %v", d, err)
	}
	d, err = client.Record(ctx, &sluicev1.DecideRequest{Policy: "api", Attributes: req.Attributes, Cost: proto.Int64(2)})
	if err != nil || d.Allowed || d.Limits[0].Used != 3 {
		t.Fatalf("Record = %v, %v", d, err)
	}
	d, err = client.Peek(ctx, req)
	if err != nil || d.Allowed || d.DeniedBy != "per-user" || d.RetryAfterMs != 60000 {
		t.Fatalf("Peek = %v, %v", d, err)
	}
	if _, err := client.Decide(ctx, &sluicev1.DecideRequest{Policy: "api", Attributes: req.Attributes, Cost: proto.Int64(0)}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("cost 0: %v", err)
	}
	if _, err := client.Decide(ctx, &sluicev1.DecideRequest{Policy: "nope"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("unknown policy: %v", err)
	}
	r, err := client.Reserve(ctx, &sluicev1.ReserveRequest{Schedule: "carrier", Attributes: map[string]string{"carrier": "45"}})
	if err != nil || !r.Ok || r.Id == "" {
		t.Fatalf("Reserve = %v, %v", r, err)
	}
	r2, _ := client.Reserve(ctx, &sluicev1.ReserveRequest{Schedule: "carrier", Attributes: map[string]string{"carrier": "45"}})
	if r2.DelayMs != 250 {
		t.Errorf("second reservation delay %d, want 250", r2.DelayMs)
	}
	c, err := client.Cancel(ctx, &sluicev1.CancelRequest{Schedule: "carrier", Attributes: map[string]string{"carrier": "45"}, Id: r2.Id})
	if err != nil || !c.Cancelled {
		t.Fatalf("Cancel = %v, %v", c, err)
	}
}
