package rls

import (
	"context"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/status"

	"github.com/sluicerate/sluice/internal/tracing"
)

// SetTracer makes the service trace each answer: a span of the call, its
// domain and outcome, under the caller's trace when the call carries one;
// the store's calls are spans under it. nil, the default, traces nothing.
// It is called before serving.
func (e *Front) SetTracer(t trace.Tracer) { e.tracer = t }

// tracedDecide is decide in a span.
func (e *Front) tracedDecide(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	ctx, span := e.tracer.Start(tracing.FromGRPC(ctx), "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit",
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("ratelimit.domain", req.GetDomain()),
			attribute.Int("ratelimit.descriptors", len(req.GetDescriptors())),
			attribute.Int64("ratelimit.hits_addend", int64(req.GetHitsAddend()))))
	defer span.End()
	out, err := e.decide(ctx, req)
	if err != nil {
		st := status.Convert(err)
		span.SetAttributes(attribute.String("rpc.grpc.status_code", st.Code().String()))
		span.SetStatus(otelcodes.Error, st.Message())
		return out, err
	}
	codes := make([]string, len(out.GetStatuses()))
	for i, s := range out.GetStatuses() {
		codes[i] = s.GetCode().String()
	}
	span.SetAttributes(attribute.String("ratelimit.overall_code", out.GetOverallCode().String()),
		attribute.StringSlice("ratelimit.descriptor_codes", codes))
	return out, nil
}
