// Package grpcapi is sluice's own gRPC service (sluice.v1.Sluice: Decide,
// Peek, Record, Reserve, Cancel, Acquire, Release, Settle, Extend), grpc.health.v1 and server reflection,
// over a front.Front, and the gRPC server sluice serve runs them on
// (docs/server.md). Envoy's rate-limit service is package envoy/rls's.
package grpcapi

import (
	"context"
	"maps"
	"slices"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/edge"
	"github.com/sluicerate/sluice/internal/front"
	"github.com/sluicerate/sluice/internal/wire"
	"github.com/sluicerate/sluice/internal/wire/grpccodec"
	sluicev1 "github.com/sluicerate/sluice/proto/sluice/v1"
)

// NewServer returns a gRPC server with the services of Register and opts.
// Its codec is protobuf, except that a request of sluice's service, or of
// the types in text (other services' whose handlers check their strings),
// whose string fields are not valid UTF-8 is answered INVALID_ARGUMENT
// naming the field or attribute, where grpc-go's own codec fails it with
// INTERNAL before any handler runs (package grpccodec). Its calls run on a
// pool of workers goroutines instead of a fresh goroutine each, whose
// stack would grow anew on every call.
func NewServer(f *front.Front, text []proto.Message, opts ...grpc.ServerOption) *grpc.Server {
	codec := grpccodec.New(append([]proto.Message{&sluicev1.DecideRequest{}, &sluicev1.ReserveRequest{}, &sluicev1.CancelRequest{},
		&sluicev1.LeaseRequest{}, &sluicev1.SettleRequest{}}, text...)...)
	base := []grpc.ServerOption{grpc.ForceServerCodecV2(codec), grpc.NumStreamWorkers(workers)}
	gs := grpc.NewServer(append(base, opts...)...)
	Register(gs, f)
	return gs
}

// workers is how many goroutines serve gRPC calls. A call waits for the
// store, so the pool must cover the calls in flight: with one worker per
// CPU, as first written, the workers were nearly always busy and grpc-go
// ran most calls on a fresh goroutine anyway. Under the benchmark's 64
// concurrent Envoy calls, stack growth (runtime.newstack) fell from 9.1%
// to 4.2% of the server's CPU samples with 256 workers (bench -sections
// service -service-profile). A call beyond them still runs, on a goroutine
// of its own.
const workers = 256

// Register registers sluice's own service (sluice.v1.Sluice), health
// checking (grpc.health.v1.Health) and server reflection on gs.
func Register(gs *grpc.Server, f *front.Front) {
	sluicev1.RegisterSluiceServer(gs, &sluiceService{f: f})
	healthpb.RegisterHealthServer(gs, &healthService{f: f, poll: time.Second})
	reflection.Register(gs)
}

// sluiceService implements sluice.v1.Sluice over a Front.
type sluiceService struct {
	sluicev1.UnimplementedSluiceServer
	f *front.Front
}

// checkText returns the INVALID_ARGUMENT status of a request with a text
// field that is not valid UTF-8, naming the field (field, holding value)
// or the attribute, or nil. A server with grpc-go's codec never sees one;
// NewServer's codec lets it through to be refused here, instead of
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

// count counts a gRPC answer of sluice's service.
func (g *sluiceService) count(err error) {
	g.f.Answered("grpc", status.Code(err).String())
}

func (g *sluiceService) decide(ctx context.Context, op edge.Op, req *sluicev1.DecideRequest) (out *sluicev1.Decision, err error) {
	defer func() { g.count(err) }()
	o, err := g.outcome(ctx, op, req)
	if err != nil {
		return nil, err
	}
	return decisionOf(o.Decision()), nil
}

// outcome decides req as op says, or returns the status of a request that
// cannot be decided.
func (g *sluiceService) outcome(ctx context.Context, op edge.Op, req *sluicev1.DecideRequest) (edge.Outcome, error) {
	st := g.f.State()
	if req.GetPolicy() == "" {
		return edge.Outcome{}, status.Error(codes.InvalidArgument, "the request names no policy")
	}
	if err := checkText("policy", req.GetPolicy(), req.GetAttributes()); err != nil {
		return edge.Outcome{}, err
	}
	o := st.Policies.DecideAttrs(ctx, req.GetPolicy(), req.GetAttributes(), front.Call("grpc", op, wire.CostOf(req.Cost)))
	g.f.Counted(op, &o)
	if p := front.LeaseOnly(front.OutcomeProblem(&o), o.Err, grpcLeaseRemedy); p != nil {
		return o, front.GRPCError(p)
	}
	return o, nil
}

// decisionOf is d as sluice.v1.Decision.
func decisionOf(d sluice.Decision) *sluicev1.Decision {
	out := &sluicev1.Decision{
		Allowed:      d.Allowed,
		Remaining:    d.Remaining,
		RetryAfterMs: wire.Millis(d.RetryAfter),
		ResetAfterMs: wire.Millis(d.ResetAfter),
		DeniedBy:     d.DeniedBy,
		Cause:        string(d.Cause),
		Shadowed:     d.Shadowed,
		Local:        d.Local,
		Degraded:     d.Degraded,
		Limits:       make([]*sluicev1.LimitStatus, len(d.Limits())),
	}
	for i, l := range d.Limits() {
		out.Limits[i] = &sluicev1.LimitStatus{Name: l.Rule, Limit: l.Limit, Used: l.Used, Remaining: l.Remaining,
			WindowMs: wire.Millis(l.Window), RetryAfterMs: wire.Millis(l.RetryAfter), Cause: string(l.Cause)}
	}
	return out
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
	defer func() { g.count(err) }()
	if err := checkText("schedule", req.GetSchedule(), req.GetAttributes()); err != nil {
		return nil, err
	}
	res, p := g.f.Reserve(ctx, g.f.State(), "grpc", req.GetSchedule(), req.GetAttributes(), wire.CostOf(req.Cost))
	if p != nil {
		return nil, front.GRPCError(p)
	}
	return &sluicev1.Reservation{Ok: res.OK, DelayMs: wire.Millis(res.Delay), Id: res.ID, Queue: res.Queue,
		Reason: string(res.Reason), Degraded: res.Degraded}, nil
}

// Cancel implements sluice.v1.Sluice.
func (g *sluiceService) Cancel(ctx context.Context, req *sluicev1.CancelRequest) (out *sluicev1.CancelResponse, err error) {
	defer func() { g.count(err) }()
	if err := checkText("schedule", req.GetSchedule(), req.GetAttributes()); err != nil {
		return nil, err
	}
	if !utf8.ValidString(req.GetId()) {
		return nil, status.Error(codes.InvalidArgument, `the "id" field is not valid UTF-8; send the id Reserve returned`)
	}
	ok, p := g.f.Cancel(ctx, g.f.State(), req.GetSchedule(), req.GetAttributes(), req.GetId())
	if p != nil {
		return nil, front.GRPCError(p)
	}
	return &sluicev1.CancelResponse{Cancelled: ok}, nil
}

// Acquire implements sluice.v1.Sluice.
func (g *sluiceService) Acquire(ctx context.Context, req *sluicev1.DecideRequest) (out *sluicev1.Acquired, err error) {
	defer func() { g.count(err) }()
	o, err := g.outcome(ctx, edge.OpAcquire, req)
	if err != nil {
		return nil, err
	}
	out = &sluicev1.Acquired{Decision: decisionOf(o.Decision())}
	if len(o.Leases) > 0 {
		out.Lease, out.LeaseExpiresMs = o.Leases[0].ID(), wire.Millis(o.Leases[0].TTL())
	}
	return out, nil
}

// Release implements sluice.v1.Sluice.
func (g *sluiceService) Release(ctx context.Context, req *sluicev1.LeaseRequest) (*sluicev1.LeaseState, error) {
	return g.finish(ctx, "release", req.GetLease(), edge.Release, 0)
}

// Settle implements sluice.v1.Sluice.
func (g *sluiceService) Settle(ctx context.Context, req *sluicev1.SettleRequest) (*sluicev1.LeaseState, error) {
	return g.finish(ctx, "settle", req.GetLease(), edge.Settle, req.GetCost())
}

// Extend implements sluice.v1.Sluice.
func (g *sluiceService) Extend(ctx context.Context, req *sluicev1.LeaseRequest) (*sluicev1.LeaseState, error) {
	return g.finish(ctx, "extend", req.GetLease(), edge.Extend, 0)
}

// finish releases, settles or extends the lease id.
func (g *sluiceService) finish(ctx context.Context, api, id string, op edge.LeaseOp, cost int64) (out *sluicev1.LeaseState, err error) {
	defer func() { g.count(err) }()
	if err := checkText("lease", id, nil); err != nil {
		return nil, err
	}
	res, p := g.f.Finish(ctx, g.f.State(), api, id, op, cost)
	if p != nil {
		return nil, front.GRPCError(p)
	}
	out = &sluicev1.LeaseState{Held: res.Held}
	if op == edge.Extend && res.Held {
		out.LeaseExpiresMs = wire.Millis(res.Lease.TTL())
	}
	return out, nil
}

// grpcLeaseRemedy is what Decide or Record on a policy with a concurrency
// rule tells a gRPC caller to do instead.
const grpcLeaseRemedy = "take a lease with sluice.v1.Sluice/Acquire (the same request), then end it with Release or Settle; Peek may look"
