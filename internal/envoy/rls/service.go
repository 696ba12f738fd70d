package rls

import (
	"context"
	"errors"
	"log/slog"
	"unicode/utf8"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicerate/sluice/internal/edge"
	"github.com/sluicerate/sluice/internal/envoy"
	"github.com/sluicerate/sluice/internal/envoy/decide"
	"github.com/sluicerate/sluice/internal/front"
)

// service implements envoy.service.ratelimit.v3.RateLimitService.
type service struct {
	rlsv3.UnimplementedRateLimitServiceServer
	e *Front
}

// ShouldRateLimit implements envoy.service.ratelimit.v3.RateLimitService.
func (s *service) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (out *rlsv3.RateLimitResponse, err error) {
	if s.e.tracer != nil {
		out, err = s.e.tracedDecide(ctx, req)
	} else {
		out, err = s.e.decide(ctx, req)
	}
	s.e.f.Answered("envoy", status.Code(err).String())
	return out, err
}

// decide answers req under the state in use: by the envoyproxy/ratelimit
// model when it serves the domain, else as the policy the domain names.
func (e *Front) decide(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	if err := checkText(req); err != nil {
		return nil, err
	}
	st := e.f.State()
	if cfg, ok := e.domain(st, req.GetDomain()); ok {
		return e.decideEnvoy(ctx, st, cfg, req)
	}
	if e.pending() && st.Config.Policy(req.GetDomain()) == nil {
		return nil, status.Error(codes.Unavailable, e.ready().Error())
	}
	attrs, op, cost, err := policyRequest(req)
	if err != nil {
		return nil, err
	}
	o := st.Policies.DecideAttrs(ctx, req.GetDomain(), attrs, front.Call("envoy", op, cost))
	e.f.Counted(op, &o)
	if p := front.OutcomeProblem(&o); p != nil {
		return nil, front.GRPCError(p)
	}
	d := o.Decision()
	return policyResponse(o.Policy, req.GetDescriptors(), &d), nil
}

// checkText returns the INVALID_ARGUMENT status of a request whose domain,
// or an entry of whose descriptors, is not valid UTF-8, naming it by its
// key. A server with grpc-go's codec never sees one; grpcapi.NewServer's
// lets it through to be refused here, instead of failing the call with
// INTERNAL.
func checkText(req *rlsv3.RateLimitRequest) error {
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

// domain reports whether a request for domain is the envoyproxy/ratelimit
// model's: the model is loaded, and the domain is configured in it or is
// not a policy of the configuration file.
func (e *Front) domain(st *front.State, domain string) (*envoy.Config, bool) {
	cfg := e.cfg.Load()
	if cfg == nil {
		return nil, false
	}
	if cfg.HasDomain(domain) || st.Config.Policy(domain) == nil {
		return cfg, true
	}
	return nil, false
}

// decideEnvoy answers req with the envoyproxy/ratelimit model, telling the
// edge's road what the store did and counting the metrics.
func (e *Front) decideEnvoy(ctx context.Context, st *front.State, cfg *envoy.Config, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	res, err := decide.Decide(ctx, cfg, st.Limiter, req, e.opts.Decide)
	call := front.Call("envoy", edge.OpDecide, 1)
	switch {
	case errors.Is(err, decide.ErrBadRequest):
		e.metrics.errors.WithLabelValues("service_error").Inc()
		return nil, status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, decide.ErrUnavailable):
		e.metrics.errors.WithLabelValues("redis_error").Inc()
		st.Policies.Stored(ctx, call, req.GetDomain(), &res.Decision, err)
		return nil, status.Error(codes.Unavailable, "the store does not answer: "+err.Error())
	case err != nil:
		e.f.Log.Error("deciding an Envoy request", slog.String("domain", req.GetDomain()), slog.Any("err", err))
		return nil, status.Error(codes.Internal, "internal error")
	}
	st.Policies.Stored(ctx, call, req.GetDomain(), &res.Decision, res.StoreErr)
	if !res.Decision.Unlimited {
		e.f.Metrics.Decision(envoy.PolicyName(req.GetDomain()), &res.Decision)
	}
	e.metrics.count(req.GetDomain(), res.Descriptors)
	return res.Response, nil
}
