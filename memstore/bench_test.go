package memstore

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/store"
)

// BenchmarkDecide measures one decision of a one-rule policy spread over
// 100,000 keys, through the Limiter as a user calls it.
func BenchmarkDecide(b *testing.B) {
	for _, bc := range []struct {
		name   string
		policy *sluice.Policy
	}{
		{"rules=1", &sluice.Policy{Name: "api", Rules: []sluice.Rule{
			{Name: "per-user", Limit: 100, Window: time.Minute, By: []string{"user"}},
		}}},
		{"rules=2", &sluice.Policy{Name: "notify", Rules: []sluice.Rule{
			{Name: "global", Limit: 1 << 40, Window: time.Minute},
			{Name: "per-user", Limit: 100, Window: time.Minute, By: []string{"user"}},
		}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			const keys = 100_000
			attrs := make([]map[string]string, keys)
			for i := range attrs {
				attrs[i] = map[string]string{"user": "user-" + strconv.Itoa(i)}
			}
			s := New(Config{})
			lim := sluice.NewLimiter(s, sluice.Config{})
			ctx := context.Background()
			for i := range attrs { // every key warm
				if _, err := lim.Allow(ctx, bc.policy, attrs[i]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if _, err := lim.Allow(ctx, bc.policy, attrs[i]); err != nil {
					b.Fatal(err)
				}
				if i++; i == keys {
					i = 0
				}
			}
		})
	}
}

// BenchmarkDecideParallel measures decisions from GOMAXPROCS goroutines over
// 100,000 keys.
func BenchmarkDecideParallel(b *testing.B) {
	const keys = 100_000
	attrs := make([]map[string]string, keys)
	for i := range attrs {
		attrs[i] = map[string]string{"user": "user-" + strconv.Itoa(i)}
	}
	p := &sluice.Policy{Name: "api", Rules: []sluice.Rule{
		{Name: "per-user", Limit: 100, Window: time.Minute, By: []string{"user"}},
	}}
	lim := sluice.NewLimiter(New(Config{}), sluice.Config{})
	ctx := context.Background()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := int(time.Now().UnixNano() % int64(keys))
		for pb.Next() {
			if _, err := lim.Allow(ctx, p, attrs[i]); err != nil {
				b.Error(err)
				return
			}
			if i++; i == keys {
				i = 0
			}
		}
	})
}

// BenchmarkStoreDecide measures one decision of a one-rule policy over
// 100,000 keys made on the store directly, reusing one Request and its
// Limits buffer: the allocation-free path.
func BenchmarkStoreDecide(b *testing.B) {
	for _, keys := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) { benchmarkStoreDecide(b, keys) })
	}
}

func benchmarkStoreDecide(b *testing.B, keys int) {
	names := make([]string, keys)
	for i := range names {
		names[i] = "user-" + strconv.Itoa(i)
	}
	// A per-user rule of 100 a minute, as the Limiter resolves it.
	newRequest := func() (*store.Request, []string) {
		values := make([]string, 1)
		return &store.Request{Policy: "api", Checks: []store.Check{
			{Rule: "per-user", Values: values, Limit: 100, Window: time.Minute, Cost: 1},
		}, Results: make([]store.Result, 1)}, values
	}
	s := New(Config{})
	ctx := context.Background()
	req, user := newRequest()
	for i := range names { // every key warm
		user[0] = names[i]
		if err := s.Decide(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			user[0] = names[i]
			if err := s.Decide(ctx, req); err != nil {
				b.Fatal(err)
			}
			if i++; i == keys {
				i = 0
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			req, user := newRequest()
			i := int(time.Now().UnixNano() % int64(keys))
			for pb.Next() {
				user[0] = names[i]
				if err := s.Decide(ctx, req); err != nil {
					b.Error(err)
					return
				}
				if i++; i == keys {
					i = 0
				}
			}
		})
	})
}
