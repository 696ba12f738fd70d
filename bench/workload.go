package main

import (
	"context"
	"time"

	"github.com/sluicerate/sluice/internal/load"
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

// outcome is what one run measured: ops decisions (allowed of them
// admitted) and, apart, errors, calls that failed.
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
// w.duration, each goroutine walking the keys from its own offset, with
// internal/load's driver (sluice bench's), and measures throughput,
// latency, allocations and CPU.
func run(w workload, newWorker func() decideFunc, progress func(done float64)) outcome {
	lw := load.Workload{Goroutines: w.goroutines, Keys: w.keys, Duration: w.duration}
	if progress != nil {
		lw.Progress = func(p load.Progress) { progress(p.Done) }
	}
	r := load.Run(context.Background(), lw, decider(newWorker))
	o := outcome{ops: r.Decisions, allowed: r.Allowed, errors: r.Errors, elapsed: r.Elapsed,
		p50: r.Latency.Quantile(0.5), p99: r.Latency.Quantile(0.99), firstErr: r.FirstErr}
	if o.ops > 0 {
		o.allocsPerOp = float64(r.Mallocs) / float64(o.ops)
		o.clientCPU = float64(r.CPU) / float64(time.Microsecond) / float64(o.ops)
	}
	return o
}

// runCount runs n calls of newWorker's deciders from g goroutines over
// keys, each goroutine walking the keys from its own offset, and returns
// the decisions allowed and the first error.
func runCount(n, g, keys int, newWorker func() decideFunc) (allowed int64, err error) {
	r := load.Run(context.Background(), load.Workload{Goroutines: g, Keys: keys, Calls: int64(n)}, decider(newWorker))
	return r.Allowed, r.FirstErr
}

// decider makes newWorker's deciders load's.
func decider(newWorker func() decideFunc) func() load.Decide {
	return func() load.Decide {
		f := newWorker()
		return func(ctx context.Context, i int) (load.Answer, error) {
			ok, err := f(ctx, i)
			return load.Answer{Allowed: ok}, err
		}
	}
}
