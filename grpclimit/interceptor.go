package grpclimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/edge"
)

// Interceptor limits the calls of a gRPC server. Unary and Stream are its
// server interceptors. It is safe for concurrent use. Its zero value is not
// usable; create one with New.
type Interceptor struct {
	edge *edge.Edge[call]
	op   edge.Op // OpAcquire with Config.Lease
}

// call is what key functions read: the call's context and full method.
type call struct {
	ctx    context.Context
	method string
}

// Config configures an Interceptor. Limiter, Policies and Keys are
// required; Logger's zero value is its default.
type Config struct {
	// Limiter decides every call. Required.
	Limiter *sluice.Limiter

	// Policies are decided for each call, in order, each with cost 1. The
	// call proceeds only when every policy allows it; deciding stops at the
	// first policy that denies, while earlier ones have already recorded
	// the call. Shadow policies never deny. At least one is required, with
	// distinct names.
	Policies []*sluice.Policy

	// Keys maps each attribute a rule names (in By, Unless, Match or an
	// override's Match) to the function that reads it from a call. Every
	// such attribute needs one; see KeyFunc for one that finds no value.
	Keys map[string]KeyFunc

	// Lease holds a lease of each policy (sluice.Limiter.Acquire) while
	// the handler runs, for a unary call until it returns and for a stream
	// until it ends: a slot of each concurrency rule (at most N calls in
	// progress), and cost 1 recorded in the rate rules as an estimate.
	// When the handler returns, or panics, the leases are released; when
	// it called ReportCost, they are settled at the cost it reported
	// instead. Default off: calls are decided (Limiter.AllowN), and a
	// policy with a concurrency rule is an error at each call.
	Lease bool

	// Logger receives store failures (warn), unexpected limiter errors
	// (error), would-be denials of shadow policies (info) and key errors
	// (debug). Store failures are not logged one per call: an outage of
	// the store is logged as its first failure, with its error; the
	// circuit breaker opening and its first probe; one summary every 10 s
	// while failures go on (how many, the policies, the first and last
	// error); and one line when the store answers again, with the
	// outage's length and count. Default: discard.
	Logger *slog.Logger
}

// New returns an Interceptor configured by cfg. It reports an error,
// starting with "grpclimit: ", for a missing limiter, no or invalid
// policies, duplicate policy names, or an attribute without a key function.
func New(cfg Config) (*Interceptor, error) {
	e, err := edge.New(edge.Config[call]{
		Limiter:  cfg.Limiter,
		Policies: cfg.Policies,
		Keys: func(attr string) edge.Key[call] {
			fn := cfg.Keys[attr]
			if fn == nil {
				return nil
			}
			return func(c call) (string, error) { return fn(c.ctx, c.method) }
		},
		Absent: ErrMissingKey,
		Log:    edge.PackageLog(cfg.Logger, "grpclimit", "call"),
	})
	if err != nil {
		return nil, fmt.Errorf("grpclimit: %w", err)
	}
	ic := &Interceptor{edge: e}
	if cfg.Lease {
		ic.op = edge.OpAcquire
	}
	return ic, nil
}

// Unary is a grpc.UnaryServerInterceptor: it decides the call and, when
// every policy allows it, calls handler.
func (ic *Interceptor) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	h, err := ic.decide(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	if h != nil {
		defer h.End(ctx)
		ctx = edge.WithHold(ctx, h)
	}
	return handler(ctx, req)
}

// Stream is a grpc.StreamServerInterceptor: it decides the stream once,
// when it opens, and, when every policy allows it, calls handler.
func (ic *Interceptor) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	h, err := ic.decide(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	if h != nil {
		defer h.End(ss.Context())
		ss = heldStream{ss, edge.WithHold(ss.Context(), h)}
	}
	return handler(srv, ss)
}

// heldStream is a stream whose context carries its leases, for ReportCost.
type heldStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s heldStream) Context() context.Context { return s.ctx }

// ReportCost reports the real cost of the call whose context is ctx, for
// a handler behind an Interceptor with Config.Lease: when the handler
// returns, its leases are settled at cost (at least 0) in place of the
// estimate. It reports whether the call holds leases; without them it
// does nothing. The last cost reported counts.
func ReportCost(ctx context.Context, cost int64) bool {
	return edge.ReportCost(ctx, cost)
}

// decide returns, when every policy allows the call, the leases it holds
// (nil without Config.Lease), and otherwise the status error the call
// fails with.
func (ic *Interceptor) decide(ctx context.Context, method string) (*edge.Hold, error) {
	c := edge.Call{Cost: 1, Op: ic.op, Tag: slog.String("method", method)}
	o := ic.edge.Decide(ctx, call{ctx: ctx, method: method}, c)
	if o.Kind == edge.Allowed && ic.op == edge.OpAcquire {
		return ic.edge.Hold(&o, c), nil
	}
	return nil, ic.refusal(&o)
}

// refusal is the status error of a call that o does not allow, or nil.
func (ic *Interceptor) refusal(o *edge.Outcome) error {
	switch o.Kind {
	case edge.Allowed:
		return nil
	case edge.Denied:
		return Denied(o.Policy, o.Decision())
	case edge.Unavailable:
		// Denied by the failure policy alone, not by a quota.
		return status.Error(codes.Unavailable, "rate limiter unavailable; retry later")
	case edge.BadInput:
		switch {
		case errors.Is(o.Err, edge.ErrInvalidAttribute):
			return status.Errorf(codes.InvalidArgument, "the call's %q attribute is not valid UTF-8", o.Attribute)
		case o.Attribute != "":
			return status.Errorf(codes.InvalidArgument, "the call lacks the %q attribute its rate limit is keyed on", o.Attribute)
		}
		return status.Error(codes.InvalidArgument, o.Err.Error())
	}
	return status.Error(codes.Internal, "rate limiter error")
}

// Denied returns the status error of a call that policy p denied with
// decision d: codes.ResourceExhausted, with a google.rpc.RetryInfo detail
// holding d.RetryAfter and a google.rpc.QuotaFailure detail with one
// violation per rule that did not fit (subject the policy, quota id the
// rule, quota value its limit).
func Denied(p *sluice.Policy, d sluice.Decision) error {
	msg := fmt.Sprintf("rate limit exceeded: policy %q rule %q; retry after %v", p.Name, d.DeniedBy, d.RetryAfter.Round(time.Millisecond))
	st := status.New(codes.ResourceExhausted, msg)
	qf := &errdetails.QuotaFailure{}
	for _, s := range d.Limits() {
		if !s.Fits {
			qf.Violations = append(qf.Violations, &errdetails.QuotaFailure_Violation{
				Subject:     p.Name,
				Description: fmt.Sprintf("at most %d per %v", s.Limit, s.Window),
				QuotaId:     s.Rule,
				QuotaValue:  s.Limit,
			})
		}
	}
	withDetails, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(d.RetryAfter)}, qf)
	if err != nil {
		return st.Err() // the details always marshal; keep the code regardless
	}
	return withDetails.Err()
}
