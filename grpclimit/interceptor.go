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
)

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

	// Keys maps each attribute named in a rule's By list to the function
	// that reads it from a call. Every such attribute needs one.
	Keys map[string]KeyFunc

	// Logger receives store failures (warn), unexpected limiter errors
	// (error), would-be denials of shadow policies (info) and key errors
	// (debug). Default: discard.
	Logger *slog.Logger
}

// Interceptor limits the calls of a gRPC server. Unary and Stream are its
// server interceptors. It is safe for concurrent use. Its zero value is not
// usable; create one with New.
type Interceptor struct {
	lim      *sluice.Limiter
	policies []*sluice.Policy
	keys     []attrKey
	log      *slog.Logger
}

type attrKey struct {
	name string
	fn   KeyFunc
}

// New returns an Interceptor configured by cfg. It reports an error,
// starting with "grpclimit: ", for a missing limiter, no or invalid
// policies, duplicate policy names, or an attribute without a key function.
func New(cfg Config) (*Interceptor, error) {
	if cfg.Limiter == nil {
		return nil, errors.New("grpclimit: Config.Limiter is nil")
	}
	if len(cfg.Policies) == 0 {
		return nil, errors.New("grpclimit: Config.Policies is empty; give at least one policy")
	}
	ic := &Interceptor{
		lim:      cfg.Limiter,
		policies: append([]*sluice.Policy(nil), cfg.Policies...),
		log:      cfg.Logger,
	}
	if ic.log == nil {
		ic.log = slog.New(slog.DiscardHandler)
	}
	names := map[string]bool{}
	needed := map[string]bool{}
	for i, p := range ic.policies {
		if p == nil {
			return nil, fmt.Errorf("grpclimit: Config.Policies[%d] is nil", i)
		}
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("grpclimit: %w", err)
		}
		if names[p.Name] {
			return nil, fmt.Errorf("grpclimit: policy %q is listed twice", p.Name)
		}
		names[p.Name] = true
		for _, r := range p.Rules {
			for _, a := range r.By {
				if needed[a] {
					continue
				}
				fn := cfg.Keys[a]
				if fn == nil {
					return nil, fmt.Errorf("grpclimit: policy %q rule %q is keyed by attribute %q, which has no function in Config.Keys", p.Name, r.Name, a)
				}
				needed[a] = true
				ic.keys = append(ic.keys, attrKey{name: a, fn: fn})
			}
		}
	}
	return ic, nil
}

// Unary is a grpc.UnaryServerInterceptor: it decides the call and, when
// every policy allows it, calls handler.
func (ic *Interceptor) Unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := ic.decide(ctx, info.FullMethod); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

// Stream is a grpc.StreamServerInterceptor: it decides the stream once,
// when it opens, and, when every policy allows it, calls handler.
func (ic *Interceptor) Stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := ic.decide(ss.Context(), info.FullMethod); err != nil {
		return err
	}
	return handler(srv, ss)
}

// decide returns nil when every policy allows the call, and otherwise the
// status error the call fails with.
func (ic *Interceptor) decide(ctx context.Context, method string) error {
	attrs := make(map[string]string, len(ic.keys))
	for _, k := range ic.keys {
		v, err := k.fn(ctx, method)
		if err != nil {
			ic.log.DebugContext(ctx, "grpclimit: cannot read a rate-limit key", "method", method, "attribute", k.name, "err", err)
			return status.Errorf(codes.InvalidArgument, "the call lacks the %q attribute its rate limit is keyed on", k.name)
		}
		attrs[k.name] = v
	}
	for _, p := range ic.policies {
		d, err := ic.lim.Allow(ctx, p, attrs)
		if err != nil {
			if !d.Degraded {
				ic.log.ErrorContext(ctx, "grpclimit: rate limiter rejected the call", "method", method, "policy", p.Name, "err", err)
				return status.Error(codes.Internal, "rate limiter error")
			}
			ic.log.WarnContext(ctx, "grpclimit: rate limiter store failed; failure policy applied",
				"method", method, "policy", p.Name, "allowed", d.Allowed, "fallback", len(d.Limits) > 0, "err", err)
		}
		if d.Shadowed {
			ic.log.InfoContext(ctx, "grpclimit: shadow policy would deny", "method", method, "policy", p.Name,
				"denied_by", d.DeniedBy, "retry_after", d.RetryAfter)
		}
		switch {
		case d.Allowed:
		case d.FailedClosed():
			// Denied by the failure policy alone, not by a quota.
			return status.Error(codes.Unavailable, "rate limiter unavailable; retry later")
		default:
			return Denied(p, d)
		}
	}
	return nil
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
	for _, s := range d.Limits {
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
