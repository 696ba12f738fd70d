package grpclimit

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicerate/sluice"
)

func TestKeyNotUTF8(t *testing.T) {
	t.Parallel()
	lim, _ := newLimiter(t)
	p := &sluice.Policy{Name: "api", Rules: []sluice.Rule{
		{Name: "per-user", By: []string{"user"}, Limit: 1, Window: time.Minute},
	}}
	// Binary metadata carries any bytes.
	client := serve(t, Config{Limiter: lim, Policies: []*sluice.Policy{p},
		Keys: map[string]KeyFunc{"user": Metadata("x-user-bin")}})
	for _, user := range []string{"\xff", "\xfe"} {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "x-user-bin", user)
		_, err := client.Check(ctx, &healthpb.HealthCheckRequest{})
		if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), `"user" attribute is not valid UTF-8`) {
			t.Errorf("user %q: %v, want InvalidArgument naming the attribute", user, err)
		}
	}
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-user-bin", "ünïcode")
	if _, err := client.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Errorf("a UTF-8 user: %v", err)
	}
}
