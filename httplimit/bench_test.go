package httplimit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/memstore"
)

// discardWriter is a ResponseWriter that keeps only its header map, cleared
// between requests, so the benchmark measures the middleware and not the
// recorder.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(int)             {}

// steppingClock advances 1ms per reading, so a 1s window holds at most
// 1000 entries and a limit of 2000 always allows.
func steppingClock() func() time.Time {
	var n atomic.Int64
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return func() time.Time { return t0.Add(time.Duration(n.Add(1)) * time.Millisecond) }
}

// BenchmarkMiddleware measures one request through the middleware on the
// memory store, keyed by client IP: "handler" is the wrapped handler alone,
// "limiter" the Limiter's decision alone, "allowed" and "denied" the whole
// middleware. The middleware's own overhead is "allowed" minus "limiter".
func BenchmarkMiddleware(b *testing.B) {
	policy := func(limit int64) *sluice.Policy {
		return &sluice.Policy{Name: "api", Rules: []sluice.Rule{
			{Name: "per-ip", By: []string{"ip"}, Limit: limit, Window: time.Second},
		}}
	}
	clients, err := NewIPResolver(IPConfig{})
	if err != nil {
		b.Fatal(err)
	}
	keys := map[string]KeyFunc{"ip": clients.Key}
	req := httptest.NewRequest(http.MethodGet, "/v1/items", nil)
	req.RemoteAddr = "203.0.113.7:4711"
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	w := &discardWriter{h: http.Header{}}

	b.Run("handler", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			clear(w.h)
			next.ServeHTTP(w, req)
		}
	})
	b.Run("limiter", func(b *testing.B) {
		lim := sluice.NewLimiter(memstore.New(memstore.Config{Clock: steppingClock()}), sluice.Config{})
		p := policy(2000)
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			d, err := lim.Allow(ctx, p, map[string]string{"ip": "203.0.113.7"})
			if err != nil || !d.Allowed {
				b.Fatalf("%+v, %v", d, err)
			}
		}
	})
	b.Run("allowed", func(b *testing.B) {
		lim := sluice.NewLimiter(memstore.New(memstore.Config{Clock: steppingClock()}), sluice.Config{})
		m, err := New(Config{Limiter: lim, Policies: []*sluice.Policy{policy(2000)}, Keys: keys})
		if err != nil {
			b.Fatal(err)
		}
		h := m.Handler(next)
		b.ReportAllocs()
		for b.Loop() {
			clear(w.h)
			h.ServeHTTP(w, req)
		}
		if w.h.Get(HeaderRetryAfter) != "" {
			b.Fatal("the allowed benchmark was denied")
		}
	})
	b.Run("denied", func(b *testing.B) {
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		lim := sluice.NewLimiter(memstore.New(memstore.Config{Clock: func() time.Time { return now }}), sluice.Config{})
		m, err := New(Config{Limiter: lim, Policies: []*sluice.Policy{policy(1)}, Keys: keys})
		if err != nil {
			b.Fatal(err)
		}
		h := m.Handler(next)
		h.ServeHTTP(w, req) // use up the limit
		b.ReportAllocs()
		for b.Loop() {
			clear(w.h)
			h.ServeHTTP(w, req)
		}
		if w.h.Get(HeaderRetryAfter) == "" {
			b.Fatal("the denied benchmark was allowed")
		}
	})
}
