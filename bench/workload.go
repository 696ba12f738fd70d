package main

import (
	"context"
	"math/bits"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// decideFunc decides one request for key number i and reports whether it
// was allowed.
type decideFunc func(ctx context.Context, i int) (bool, error)

// workload is what every contender is driven with.
type workload struct {
	goroutines int
	keys       int
	duration   time.Duration
}

// outcome is what one run measured.
type outcome struct {
	ops, allowed, errors int64
	elapsed              time.Duration
	p50, p99             time.Duration
	allocsPerOp          float64
	clientCPU            float64 // µs of this process's CPU per decision
	firstErr             error
}

func (o outcome) perSecond() float64 { return float64(o.ops) / o.elapsed.Seconds() }

// run drives newWorker's deciders from w.goroutines goroutines for
// w.duration, each goroutine walking the keys from its own offset, and
// measures throughput, latency, allocations and CPU.
func run(w workload, newWorker func() decideFunc, progress func(done float64)) outcome {
	var (
		ops, allowed, errs atomic.Int64
		firstErr           atomic.Value
		hists              = make([]histogram, w.goroutines)
		wg                 sync.WaitGroup
	)
	workers := make([]decideFunc, w.goroutines)
	for g := range workers {
		workers[g] = newWorker()
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu0 := processCPU()
	start := time.Now()
	deadline := start.Add(w.duration)
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(200 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-t.C:
				if progress != nil {
					progress(min(1, float64(now.Sub(start))/float64(w.duration)))
				}
			}
		}
	}()
	ctx := context.Background()
	for g := range w.goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, h := workers[g], &hists[g]
			i := (g * 7919) % w.keys
			var n, ok int64
			for {
				t0 := time.Now()
				if !t0.Before(deadline) {
					break
				}
				a, err := f(ctx, i)
				h.add(time.Since(t0))
				n++
				if err != nil {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, errBox{err})
				} else if a {
					ok++
				}
				if i++; i == w.keys {
					i = 0
				}
			}
			ops.Add(n)
			allowed.Add(ok)
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(stop)
	cpu1 := processCPU()
	runtime.ReadMemStats(&after)
	var all histogram
	for g := range hists {
		all.merge(&hists[g])
	}
	o := outcome{ops: ops.Load(), allowed: allowed.Load(), errors: errs.Load(), elapsed: elapsed,
		p50: all.quantile(0.5), p99: all.quantile(0.99)}
	if o.ops > 0 {
		o.allocsPerOp = float64(after.Mallocs-before.Mallocs) / float64(o.ops)
		o.clientCPU = float64(cpu1-cpu0) / float64(time.Microsecond) / float64(o.ops)
	}
	if e, ok := firstErr.Load().(errBox); ok {
		o.firstErr = e.err
	}
	return o
}

// processCPU returns the user and system CPU time this process used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// histogram counts latencies in log-linear buckets: 16 per power of two of
// nanoseconds, so a quantile is within 6% of the true value.
type histogram struct {
	counts [64 * 16]int64
	n      int64
}

func bucketOf(d time.Duration) int {
	v := uint64(max(d, 1))
	e := bits.Len64(v) - 1
	if e < 4 {
		return int(v)
	}
	return e*16 + int(v>>(e-4))&15
}

func bucketValue(b int) time.Duration {
	e, m := b/16, b%16
	if e < 4 {
		return time.Duration(b)
	}
	return time.Duration((uint64(16+m) << (e - 4)))
}

func (h *histogram) add(d time.Duration) {
	h.counts[bucketOf(d)]++
	h.n++
}

func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
}

// quantile returns the latency below which a fraction q of the samples lie.
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	target := int64(q * float64(h.n))
	var seen int64
	for i, c := range h.counts {
		seen += c
		if seen > target {
			return bucketValue(i)
		}
	}
	return bucketValue(len(h.counts) - 1)
}

// errBox holds an error in an atomic.Value, which needs one concrete type.
type errBox struct{ err error }
