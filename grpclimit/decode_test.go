package grpclimit

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/sluicerate/sluice"
)

// A unary request that the server's codec refuses fails before the
// interceptor: it is neither decided nor recorded, and its status is the
// codec's (grpc-go's protobuf codec: INTERNAL for a string that is not
// UTF-8).
func TestUnaryRequestNotUTF8(t *testing.T) {
	t.Parallel()
	lim, _ := newLimiter(t)
	client := serve(t, Config{Limiter: lim, Policies: []*sluice.Policy{perKey(1)},
		Keys: map[string]KeyFunc{"key": Metadata("X-API-Key")}})

	_, err := client.Check(withKey("k1"), &healthpb.HealthCheckRequest{Service: "\xff"}, grpc.ForceCodecV2(uncheckedCodec{}))
	if status.Code(err) != codes.Internal {
		t.Errorf("service \\xff: %v, want Internal from the server's codec", err)
	}
	if _, err := client.Check(withKey("k1"), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("k1's first decoded call: %v; want it admitted, nothing recorded before", err)
	}
	if _, err := client.Check(withKey("k1"), &healthpb.HealthCheckRequest{}); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("k1's second decoded call: %v, want ResourceExhausted", err)
	}
}

// uncheckedCodec sends a HealthCheckRequest's service as its bytes are,
// UTF-8 or not, as a client in another language may.
type uncheckedCodec struct{}

func (uncheckedCodec) Marshal(v any) (mem.BufferSlice, error) {
	b := protowire.AppendTag(nil, 1, protowire.BytesType)
	b = protowire.AppendString(b, v.(*healthpb.HealthCheckRequest).GetService())
	return mem.BufferSlice{mem.SliceBuffer(b)}, nil
}

func (uncheckedCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return proto.Unmarshal(data.Materialize(), v.(proto.Message))
}

func (uncheckedCodec) Name() string { return "proto" }
