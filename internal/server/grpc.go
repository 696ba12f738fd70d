package server

import (
	"context"
	"net/http"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/edge"
	sluicev1 "github.com/sluicerate/sluice/proto/sluice/v1"
)

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
	ok, p := g.s.cancel(ctx, g.s.state.Load(), req.GetSchedule(), req.GetAttributes(), req.GetId())
	if p != nil {
		return nil, grpcError(p)
	}
	return &sluicev1.CancelResponse{Cancelled: ok}, nil
}
