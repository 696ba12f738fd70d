package main

import (
	"context"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/sluicerate/sluice/internal/envoy/envoytest"
)

// collector is an OTLP trace receiver: OpenTelemetry's collector service
// over gRPC, or its HTTP endpoint /v1/traces.
type collector struct {
	coltracepb.UnimplementedTraceServiceServer
	mu       sync.Mutex
	requests []*coltracepb.ExportTraceServiceRequest
}

// Export implements coltracepb.TraceServiceServer.
func (c *collector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.requests = append(c.requests, req)
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// ServeHTTP is OTLP/HTTP's /v1/traces, in protobuf.
func (c *collector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	req := &coltracepb.ExportTraceServiceRequest{}
	if err != nil || r.URL.Path != "/v1/traces" || proto.Unmarshal(body, req) != nil {
		http.Error(w, "not an OTLP export", http.StatusBadRequest)
		return
	}
	_, _ = c.Export(r.Context(), req)
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// spans returns the spans received, with their resources' attributes.
func (c *collector) spans() (spans []*tracepb.Span, resource map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	resource = map[string]string{}
	for _, req := range c.requests {
		for _, rs := range req.GetResourceSpans() {
			for k, v := range attrs(rs.GetResource().GetAttributes()) {
				resource[k] = v
			}
			for _, ss := range rs.GetScopeSpans() {
				spans = append(spans, ss.GetSpans()...)
			}
		}
	}
	return spans, resource
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	out := map[string]string{}
	for _, kv := range kvs {
		out[kv.GetKey()] = kv.GetValue().GetStringValue()
	}
	return out
}

// TestServeTracing: with Envoy Gateway's tracing variables, a decision's
// span reaches an OTLP receiver, over HTTP (envoyproxy/ratelimit's default
// protocol) and gRPC, under the trace Envoy sent, with its domain and
// outcome, and the store call's span under it.
func TestServeTracing(t *testing.T) {
	t.Parallel()
	for _, protocol := range []string{"http", "grpc"} {
		t.Run(protocol, func(t *testing.T) {
			t.Parallel()
			col := &collector{}
			var endpoint string
			if protocol == "http" {
				srv := httptest.NewServer(col)
				t.Cleanup(srv.Close)
				endpoint = srv.URL
			} else {
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				gs := grpc.NewServer()
				coltracepb.RegisterTraceServiceServer(gs, col)
				go func() { _ = gs.Serve(l) }()
				t.Cleanup(gs.Stop)
				endpoint = "http://" + l.Addr().String()
			}
			env := []string{"TRACING_ENABLED=true", "TRACING_SERVICE_NAME=envoy-ratelimit", "TRACING_SERVICE_NAMESPACE=envoy-gateway-system",
				"TRACING_SERVICE_INSTANCE_ID=envoy-ratelimit-7d9f", "TRACING_SAMPLING_RATE=1.0", "OTEL_EXPORTER_OTLP_ENDPOINT=" + endpoint}
			if protocol == "grpc" {
				env = append(env, "TRACING_EXPORTER_PROTOCOL=grpc")
			}
			p := startServeArgs(t, env, "--envoy-config", copyDir(t, "examples/config"))
			// Envoy's call, in a trace of its own: upstream's banned_limit
			// (0 a minute) answers OVER_LIMIT.
			const traceID, parentID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
			ctx := metadata.AppendToOutgoingContext(context.Background(), "traceparent", "00-"+traceID+"-"+parentID+"-01")
			step := envoytest.Step{Domain: "rl", Descriptors: [][][2]string{{{"foo", "bkthomps"}, {"bar", "banned"}}}}
			res, err := rlsv3.NewRateLimitServiceClient(dialRLS(t, p)).ShouldRateLimit(ctx, step.Request())
			if err != nil || res.GetOverallCode() != rlsv3.RateLimitResponse_OVER_LIMIT {
				t.Fatalf("%v, %v; want OVER_LIMIT", res, err)
			}
			p.stop() // flushes the spans
			checkDecisionTrace(t, col, traceID, parentID)
		})
	}
}

// checkDecisionTrace checks the spans col received: the decision's under
// the caller's span, and the store's under it.
func checkDecisionTrace(t *testing.T, col *collector, traceID, parentID string) {
	t.Helper()
	spans, resource := col.spans()
	var decision, store *tracepb.Span
	for _, s := range spans {
		switch s.GetName() {
		case "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit":
			decision = s
		case "sluice.store/Decide":
			store = s
		}
	}
	if decision == nil || store == nil {
		t.Fatalf("spans received: %v; want the decision's and the store's", spans)
	}
	a := attrs(decision.GetAttributes())
	if a["ratelimit.domain"] != "rl" || a["ratelimit.overall_code"] != "OVER_LIMIT" {
		t.Errorf("the decision's attributes %v; want domain rl, overall code OVER_LIMIT", a)
	}
	if got := hex.EncodeToString(decision.GetTraceId()); got != traceID || hex.EncodeToString(decision.GetParentSpanId()) != parentID {
		t.Errorf("the decision's span is in trace %s under %x; want %s under %s", got, decision.GetParentSpanId(), traceID, parentID)
	}
	if string(store.GetParentSpanId()) != string(decision.GetSpanId()) || attrs(store.GetAttributes())["sluice.policy"] != "envoy/rl" {
		t.Errorf("the store's span %v is not under the decision's", store)
	}
	for k, want := range map[string]string{"service.name": "envoy-ratelimit", "service.namespace": "envoy-gateway-system", "service.instance.id": "envoy-ratelimit-7d9f"} {
		if resource[k] != want {
			t.Errorf("resource %s = %q, want %q", k, resource[k], want)
		}
	}
}
