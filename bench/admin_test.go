package main

import (
	"context"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/redistest"
	"github.com/sluicerate/sluice/redisstore"
)

// TestMemoryUsageEvents checks that memoryUsage counts a sluice window's
// events by their cost, as redisstore reads the entries.
func TestMemoryUsageEvents(t *testing.T) {
	srv := redistest.Start(t)
	s, err := redisstore.New(redisstore.Config{Addrs: []string{srv.Addr()}, Prefix: "s"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	lim := sluice.NewLimiter(s, benchLimiterConfig)
	p := &sluice.Policy{Name: "a", Rules: []sluice.Rule{{Name: "r", Limit: 100, Window: time.Hour, By: []string{"key"}}}}
	attrs := map[string]string{"key": "k"}
	var want int64
	for _, cost := range []int64{1, 1, 5, 3, 1} {
		d, err := lim.AllowN(context.Background(), p, attrs, cost)
		if err != nil || !d.Allowed {
			t.Fatalf("AllowN(%d) = %+v, %v", cost, d, err)
		}
		want += cost
	}
	req, err := lim.Resolve(p, attrs, 1)
	if err != nil {
		t.Fatal(err)
	}
	adm, err := newAdmin(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(adm.c.Close)
	bytes, events, ok := adm.memoryUsage(s.Keys(req)[0], true)
	if !ok || bytes <= 0 || events != want {
		t.Errorf("memoryUsage = %d bytes, %d events, %v; want some bytes, %d events", bytes, events, ok, want)
	}
}
