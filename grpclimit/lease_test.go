package grpclimit

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sluicerate/sluice"
)

// stream is a server stream with a context and nothing else.
type stream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s stream) Context() context.Context { return s.ctx }

func TestLease(t *testing.T) {
	t.Parallel()
	lim, _ := newLimiter(t)
	p := &sluice.Policy{Name: "llm", Rules: []sluice.Rule{
		{Name: "tokens", By: []string{"key"}, Limit: 100, Window: time.Minute},
		{Name: "in-flight", By: []string{"key"}, Concurrency: 1, Lease: 30 * time.Second},
	}}
	ic, err := New(Config{Limiter: lim, Policies: []*sluice.Policy{p}, Keys: map[string]KeyFunc{"key": Metadata("x-api-key")}, Lease: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx := metadata.NewIncomingContext(t.Context(), metadata.Pairs("x-api-key", "k1"))
	info := &grpc.UnaryServerInfo{FullMethod: "/llm.Model/Complete"}
	var inner error
	_, err = ic.Unary(ctx, nil, info, func(ctx context.Context, _ any) (any, error) {
		// A call made while this one runs finds the one slot held.
		_, inner = ic.Unary(ctx, nil, info, func(context.Context, any) (any, error) { return nil, nil })
		if !ReportCost(ctx, 7) {
			t.Error("ReportCost: the call holds no lease")
		}
		return nil, nil
	})
	if err != nil || status.Code(inner) != codes.ResourceExhausted {
		t.Fatalf("outer call: %v; inner call: %v, want ResourceExhausted", err, inner)
	}
	peek := func() sluice.Decision {
		d, err := lim.Peek(t.Context(), p, map[string]string{"key": "k1"}, 1)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := peek(); d.Limits()[0].Used != 7+1 || d.Limits()[1].Used != 1 {
		t.Errorf("after the unary call: tokens %d, in flight %d (the peek's own included); want 8 and 1", d.Limits()[0].Used, d.Limits()[1].Used)
	}
	// A stream holds its lease until its handler returns.
	err = ic.Stream(nil, stream{ctx: ctx}, &grpc.StreamServerInfo{FullMethod: "/llm.Model/Stream"}, func(_ any, ss grpc.ServerStream) error {
		if d := peek(); d.Allowed {
			t.Error("while the stream runs: its slot is free")
		}
		ReportCost(ss.Context(), 20)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if d := peek(); d.Limits()[0].Used != 7+20+1 || d.Limits()[1].Used != 1 {
		t.Errorf("after the stream: tokens %d, in flight %d; want 28 and 1", d.Limits()[0].Used, d.Limits()[1].Used)
	}
}
