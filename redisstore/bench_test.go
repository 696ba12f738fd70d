package redisstore_test

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/redistest"
	"github.com/sluicerate/sluice/redisstore"
)

// BenchmarkDecide measures decisions per second from 64 goroutines on one
// local redis-server: a one-rule policy of 100 a minute over 10,000 keys,
// each goroutine walking the keys from its own offset, on Redis's clock.
func BenchmarkDecide(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			benchDecide(b, be.open(b, redisstore.Config{Prefix: newPrefix()}))
		})
	}
}

// BenchmarkWaitForReplicas is BenchmarkDecide on a Sentinel master with one
// replica, without and with WaitForReplicas: what the WAIT after each call
// costs.
func BenchmarkWaitForReplicas(b *testing.B) {
	st := redistest.StartSentinel(b)
	for _, wait := range []bool{false, true} {
		b.Run("wait="+strconv.FormatBool(wait), func(b *testing.B) {
			s, err := redisstore.New(redisstore.Config{Mode: redisstore.Sentinel, Addrs: st.Addrs(),
				MasterName: redistest.SentinelMaster, Prefix: newPrefix(), WaitForReplicas: wait})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			benchDecide(b, s)
		})
	}
}

// benchDecide runs BenchmarkDecide's load on s.
func benchDecide(b *testing.B, s *redisstore.Store) {
	p := &sluice.Policy{Name: "bench", Rules: []sluice.Rule{
		{Name: "per-key", Limit: 100, Window: time.Minute, By: []string{"key"}},
	}}
	const nkeys = 10000
	names := make([]string, nkeys)
	for i := range names {
		names[i] = "k" + strconv.Itoa(i)
	}
	var (
		next    atomic.Int64
		allowed atomic.Int64
		failed  atomic.Int64
	)
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		i := int(next.Add(7919))
		req := request(b, p, map[string]string{"key": ""}, 1)
		for pb.Next() {
			req.Checks[0].Values[0] = names[i%nkeys]
			i++
			if err := s.Decide(ctx, req); err != nil {
				failed.Add(1)
				continue
			}
			if req.Results[0].Fits {
				allowed.Add(1)
			}
		}
	})
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d decisions failed", n)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	b.ReportMetric(float64(allowed.Load())/float64(b.N), "allowed/op")
}
