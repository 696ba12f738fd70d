package sluice_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/memstore"
)

// BenchmarkAllow measures Limiter.Allow of a one-rule policy over the
// memory store, every key warm: the call a user makes, from the policy and
// attributes to the Decision.
func BenchmarkAllow(b *testing.B) {
	for _, keys := range []int{1_000, 100_000} {
		b.Run(fmt.Sprintf("keys=%d", keys), func(b *testing.B) {
			names := make([]string, keys)
			for i := range names {
				names[i] = "user-" + strconv.Itoa(i)
			}
			lim := sluice.NewLimiter(memstore.New(memstore.Config{}), sluice.Config{})
			p := &sluice.Policy{Name: "api", Rules: []sluice.Rule{
				{Name: "per-user", Limit: 100, Window: time.Minute, By: []string{"user"}},
			}}
			ctx := context.Background()
			attrs := map[string]string{"user": ""}
			for i := range names {
				attrs["user"] = names[i]
				if _, err := lim.Allow(ctx, p, attrs); err != nil {
					b.Fatal(err)
				}
			}
			b.Run("serial", func(b *testing.B) {
				b.ReportAllocs()
				i := 0
				for b.Loop() {
					attrs["user"] = names[i]
					if _, err := lim.Allow(ctx, p, attrs); err != nil {
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
					attrs := map[string]string{"user": ""}
					i := int(time.Now().UnixNano() % int64(keys))
					for pb.Next() {
						attrs["user"] = names[i]
						if _, err := lim.Allow(ctx, p, attrs); err != nil {
							b.Error(err)
							return
						}
						if i++; i == keys {
							i = 0
						}
					}
				})
			})
		})
	}
}
