package server

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"unicode/utf8"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/edge"
	sluicev1 "github.com/sluicerate/sluice/proto/sluice/v1"
)

// GRPCServer returns a gRPC server with the services of RegisterGRPC and
// opts. Its codec is protobuf, except that a request whose string fields
// are not valid UTF-8 is answered INVALID_ARGUMENT naming the field or
// attribute, where grpc-go's own codec fails it with INTERNAL before any
// handler runs (grpcCodec). Its calls run on a pool of grpcWorkers worker
// goroutines instead of a fresh goroutine each, whose stack would grow
// anew on every call.
func (s *Server) GRPCServer(opts ...grpc.ServerOption) *grpc.Server {
	base := []grpc.ServerOption{grpc.ForceServerCodecV2(textCodec), grpc.NumStreamWorkers(grpcWorkers)}
	gs := grpc.NewServer(append(base, opts...)...)
	s.RegisterGRPC(gs)
	return gs
}

// grpcWorkers is how many goroutines serve gRPC calls. A call waits for the
// store, so the pool must cover the calls in flight: with one worker per
// CPU, as first written, the workers were nearly always busy and grpc-go
// ran most calls on a fresh goroutine anyway. Under the benchmark's 64
// concurrent Envoy calls, stack growth (runtime.newstack) fell from 9.1%
// to 4.2% of the server's CPU samples with 256 workers (bench -sections
// service -service-profile). A call beyond them still runs, on a goroutine
// of its own.
const grpcWorkers = 256

// textCodec is the codec of GRPCServer: lenient for the requests whose
// handlers check their strings with checkText or checkEnvoyText.
var textCodec = newGRPCCodec(&sluicev1.DecideRequest{}, &sluicev1.ReserveRequest{}, &sluicev1.CancelRequest{},
	&rlsv3.RateLimitRequest{})

// RegisterGRPC registers sluice's own service (sluice.v1.Sluice), Envoy's
// rate-limit service (envoy.service.ratelimit.v3.RateLimitService), health
// checking (grpc.health.v1.Health) and server reflection on gs.
func (s *Server) RegisterGRPC(gs *grpc.Server) {
	sluicev1.RegisterSluiceServer(gs, &sluiceService{s: s})
	s.registerEnvoy(gs)
	s.registerServing(gs)
}

// sluiceService implements sluice.v1.Sluice over a Server.
type sluiceService struct {
	sluicev1.UnimplementedSluiceServer
	s *Server
}

// grpcError turns a problem into a gRPC status: INVALID_ARGUMENT for bad
// input, UNAVAILABLE or INTERNAL otherwise.
func grpcError(p *httplimit.Problem) error {
	switch p.Status {
	case http.StatusBadRequest:
		return status.Error(codes.InvalidArgument, p.Detail)
	case http.StatusServiceUnavailable:
		return status.Error(codes.Unavailable, p.Detail)
	}
	return status.Error(codes.Internal, "internal error")
}

// checkText returns the INVALID_ARGUMENT status of a request with a text
// field that is not valid UTF-8, naming the field (field, holding value)
// or the attribute, or nil. A server with grpc-go's codec never sees one;
// GRPCServer's codec lets it through to be refused here, instead of
// failing the call with INTERNAL.
func checkText(field, value string, attrs map[string]string) error {
	if !utf8.ValidString(value) {
		return status.Errorf(codes.InvalidArgument, "the %q field is not valid UTF-8; send it as UTF-8 text", field)
	}
	for k, v := range attrs {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return status.Error(codes.InvalidArgument, edge.InvalidAttribute(firstInvalid(attrs)).Error())
		}
	}
	return nil
}

// firstInvalid is the least name of attrs whose name or value is not
// valid UTF-8, so that a request with several is always answered alike.
func firstInvalid(attrs map[string]string) string {
	for _, k := range slices.Sorted(maps.Keys(attrs)) {
		if !utf8.ValidString(k) || !utf8.ValidString(attrs[k]) {
			return k
		}
	}
	return ""
}

// checkEnvoyText is checkText for Envoy's rate-limit requests: the domain
// and the descriptors' entries, named by their keys.
func checkEnvoyText(req *rlsv3.RateLimitRequest) error {
	if !utf8.ValidString(req.GetDomain()) {
		return status.Error(codes.InvalidArgument, `the "domain" field is not valid UTF-8; send it as UTF-8 text`)
	}
	for _, d := range req.GetDescriptors() {
		for _, en := range d.GetEntries() {
			if !utf8.ValidString(en.GetKey()) || !utf8.ValidString(en.GetValue()) {
				return status.Error(codes.InvalidArgument, edge.InvalidAttribute(en.GetKey()).Error())
			}
		}
	}
	return nil
}

// count counts a gRPC answer of api.
func (s *Server) count(api string, err error) {
	s.metrics.requests.WithLabelValues(api, status.Code(err).String()).Inc()
}

func (g *sluiceService) decide(ctx context.Context, op edge.Op, req *sluicev1.DecideRequest) (out *sluicev1.Decision, err error) {
	defer func() { g.s.count("grpc", err) }()
	st := g.s.state.Load()
	if req.GetPolicy() == "" {
		return nil, status.Error(codes.InvalidArgument, "the request names no policy")
	}
	if err := checkText("policy", req.GetPolicy(), req.GetAttributes()); err != nil {
		return nil, err
	}
	o := st.policies.DecideAttrs(ctx, req.GetPolicy(), req.GetAttributes(), call("grpc", op, costOf(req.Cost)))
	g.s.counted(op, &o)
	if p := outcomeProblem(&o); p != nil {
		return nil, grpcError(p)
	}
	d := o.Decision()
	out = &sluicev1.Decision{
		Allowed:      d.Allowed,
		Remaining:    d.Remaining,
		RetryAfterMs: ms(d.RetryAfter),
		ResetAfterMs: ms(d.ResetAfter),
		DeniedBy:     d.DeniedBy,
		Cause:        string(d.Cause),
		Shadowed:     d.Shadowed,
		Degraded:     d.Degraded,
		Limits:       make([]*sluicev1.LimitStatus, len(d.Limits)),
	}
	for i, l := range d.Limits {
		out.Limits[i] = &sluicev1.LimitStatus{Name: l.Rule, Limit: l.Limit, Used: l.Used, Remaining: l.Remaining,
			WindowMs: ms(l.Window), RetryAfterMs: ms(l.RetryAfter), Cause: string(l.Cause)}
	}
	return out, nil
}

// Decide implements sluice.v1.Sluice.
func (g *sluiceService) Decide(ctx context.Context, req *sluicev1.DecideRequest) (*sluicev1.Decision, error) {
	return g.decide(ctx, edge.OpDecide, req)
}

// Peek implements sluice.v1.Sluice.
func (g *sluiceService) Peek(ctx context.Context, req *sluicev1.DecideRequest) (*sluicev1.Decision, error) {
	return g.decide(ctx, edge.OpPeek, req)
}

// Record implements sluice.v1.Sluice.
func (g *sluiceService) Record(ctx context.Context, req *sluicev1.DecideRequest) (*sluicev1.Decision, error) {
	return g.decide(ctx, edge.OpRecord, req)
}

// Reserve implements sluice.v1.Sluice.
func (g *sluiceService) Reserve(ctx context.Context, req *sluicev1.ReserveRequest) (out *sluicev1.Reservation, err error) {
	defer func() { g.s.count("grpc", err) }()
	if err := checkText("schedule", req.GetSchedule(), req.GetAttributes()); err != nil {
		return nil, err
	}
	res, p := g.s.reserve(ctx, g.s.state.Load(), "grpc", req.GetSchedule(), req.GetAttributes(), costOf(req.Cost))
	if p != nil {
		return nil, grpcError(p)
	}
	return &sluicev1.Reservation{Ok: res.OK, DelayMs: ms(res.Delay), Id: res.ID, Queue: res.Queue,
		Reason: string(res.Reason), Degraded: res.Degraded}, nil
}

// Cancel implements sluice.v1.Sluice.
func (g *sluiceService) Cancel(ctx context.Context, req *sluicev1.CancelRequest) (out *sluicev1.CancelResponse, err error) {
	defer func() { g.s.count("grpc", err) }()
	if err := checkText("schedule", req.GetSchedule(), req.GetAttributes()); err != nil {
		return nil, err
	}
	if !utf8.ValidString(req.GetId()) {
		return nil, status.Error(codes.InvalidArgument, `the "id" field is not valid UTF-8; send the id Reserve returned`)
	}
	ok, p := g.s.cancel(ctx, g.s.state.Load(), req.GetSchedule(), req.GetAttributes(), req.GetId())
	if p != nil {
		return nil, grpcError(p)
	}
	return &sluicev1.CancelResponse{Cancelled: ok}, nil
}
