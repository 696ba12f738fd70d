package grpcapi

import (
	"context"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/sluicerate/sluice/internal/front"
	sluicev1 "github.com/sluicerate/sluice/proto/sluice/v1"
)

// healthServices are the names grpc.health.v1 answers for: the whole
// server (""), envoyproxy/ratelimit's name for it ("ratelimit"), and each
// service.
var healthServices = []string{"", "ratelimit", sluicev1.Sluice_ServiceDesc.ServiceName, rlsv3.RateLimitService_ServiceDesc.ServiceName}

// healthService implements grpc.health.v1.Health: SERVING while the store
// answers a ping and the server is not shutting down, NOT_SERVING
// otherwise, so a Kubernetes gRPC probe or a load balancer follows the
// store.
type healthService struct {
	healthpb.UnimplementedHealthServer
	f *front.Front

	// poll is how often Watch checks the store. Default 1s.
	poll time.Duration
}

// serving is the status of the server now.
func (h *healthService) serving(ctx context.Context) healthpb.HealthCheckResponse_ServingStatus {
	if !h.f.Serving(ctx) {
		return healthpb.HealthCheckResponse_NOT_SERVING
	}
	return healthpb.HealthCheckResponse_SERVING
}

func knownService(name string) bool {
	for _, n := range healthServices {
		if n == name {
			return true
		}
	}
	return false
}

// Check implements grpc.health.v1.Health.
func (h *healthService) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if !knownService(req.GetService()) {
		return nil, status.Errorf(codes.NotFound, "unknown service %q; sluice answers for %q", req.GetService(), healthServices)
	}
	return &healthpb.HealthCheckResponse{Status: h.serving(ctx)}, nil
}

// List implements grpc.health.v1.Health.
func (h *healthService) List(ctx context.Context, _ *healthpb.HealthListRequest) (*healthpb.HealthListResponse, error) {
	st := h.serving(ctx)
	out := &healthpb.HealthListResponse{Statuses: map[string]*healthpb.HealthCheckResponse{}}
	for _, n := range healthServices {
		out.Statuses[n] = &healthpb.HealthCheckResponse{Status: st}
	}
	return out, nil
}

// Watch implements grpc.health.v1.Health: the status now, then each change,
// checked every poll.
func (h *healthService) Watch(req *healthpb.HealthCheckRequest, stream grpc.ServerStreamingServer[healthpb.HealthCheckResponse]) error {
	if !knownService(req.GetService()) {
		// The protocol answers SERVICE_UNKNOWN for a service that may appear later.
		return stream.Send(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVICE_UNKNOWN})
	}
	ctx := stream.Context()
	last := healthpb.HealthCheckResponse_UNKNOWN
	t := time.NewTicker(h.poll)
	defer t.Stop()
	for {
		if st := h.serving(ctx); st != last {
			if err := stream.Send(&healthpb.HealthCheckResponse{Status: st}); err != nil {
				return err
			}
			last = st
		}
		select {
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		case <-t.C:
		}
	}
}
