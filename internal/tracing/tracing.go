// Package tracing exports sluice serve's OpenTelemetry spans over OTLP, as
// envoyproxy/ratelimit does with TRACING_ENABLED: a span for each answer
// of Envoy's rate-limit service (its domain and outcome) and one for each
// store call under it. The exporter's endpoint and the rest of its
// settings come from OpenTelemetry's own environment variables
// (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS, ...), unless
// Config names one. With tracing off nothing is traced and nothing costs:
// the fronts hold a nil trace.Tracer.
package tracing

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"
)

// Config configures tracing. The zero value is envoyproxy/ratelimit's
// default.
type Config struct {
	// ServiceName, ServiceNamespace and ServiceInstanceID are the spans'
	// service (TRACING_SERVICE_NAME, default "RateLimit";
	// TRACING_SERVICE_NAMESPACE; TRACING_SERVICE_INSTANCE_ID, default a
	// random id).
	ServiceName, ServiceNamespace, ServiceInstanceID string

	// SamplingRate is the share of traces kept when the caller's context
	// does not say (TRACING_SAMPLING_RATE, from 0 to 1). A span whose
	// parent was sampled is always kept. Default 1.
	SamplingRate *float64

	// Protocol is OTLP's transport: "http" (default) or "grpc"
	// (TRACING_EXPORTER_PROTOCOL).
	Protocol string

	// Endpoint, when set, is the collector's URL, as
	// OTEL_EXPORTER_OTLP_ENDPOINT would give it (http://host:4318 for http,
	// http://host:4317 for grpc); otherwise that variable's.
	Endpoint string
}

// Provider exports the spans of its tracer. Shut it down to flush them.
type Provider struct {
	*sdktrace.TracerProvider
}

// Tracer returns sluice serve's tracer.
func (p *Provider) Tracer() trace.Tracer {
	return p.TracerProvider.Tracer("github.com/sluicerate/sluice")
}

// New returns a provider exporting to the collector of cfg.
func New(ctx context.Context, cfg Config) (*Provider, error) {
	var client otlptrace.Client
	switch strings.ToLower(cfg.Protocol) {
	case "", "http":
		var opts []otlptracehttp.Option
		if cfg.Endpoint != "" {
			opts = append(opts, otlptracehttp.WithEndpointURL(cfg.Endpoint))
		}
		client = otlptracehttp.NewClient(opts...)
	case "grpc":
		var opts []otlptracegrpc.Option
		if cfg.Endpoint != "" {
			opts = append(opts, otlptracegrpc.WithEndpointURL(cfg.Endpoint))
		}
		client = otlptracegrpc.NewClient(opts...)
	default:
		return nil, fmt.Errorf("tracing: exporter protocol %q; use http or grpc", cfg.Protocol)
	}
	exp, err := otlptrace.New(ctx, client)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	rate := 1.0
	if cfg.SamplingRate != nil {
		rate = *cfg.SamplingRate
	}
	name, id := cfg.ServiceName, cfg.ServiceInstanceID
	if name == "" {
		name = "RateLimit"
	}
	if id == "" {
		var b [16]byte
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", name), attribute.String("service.instance.id", id)}
	if cfg.ServiceNamespace != "" {
		attrs = append(attrs, attribute.String("service.namespace", cfg.ServiceNamespace))
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(rate))),
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(attrs...)),
	)
	return &Provider{tp}, nil
}

// propagator reads the caller's trace context: W3C's traceparent and
// tracestate, as Envoy's OpenTelemetry tracer sends them.
var propagator = propagation.TraceContext{}

// FromGRPC returns ctx with the trace context of a gRPC call's metadata.
func FromGRPC(ctx context.Context) context.Context {
	md, _ := metadata.FromIncomingContext(ctx)
	return propagator.Extract(ctx, metadataCarrier(md))
}

// FromHTTP returns ctx with the trace context of an HTTP request's header.
func FromHTTP(ctx context.Context, h propagation.HeaderCarrier) context.Context {
	return propagator.Extract(ctx, h)
}

// metadataCarrier reads gRPC metadata as a propagation.TextMapCarrier.
type metadataCarrier metadata.MD

func (m metadataCarrier) Get(key string) string {
	if v := metadata.MD(m).Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

func (m metadataCarrier) Set(key, value string) { metadata.MD(m).Set(key, value) }

func (m metadataCarrier) Keys() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}
