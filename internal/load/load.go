// Package load drives a decider with a closed-loop workload and measures
// it: throughput, a latency histogram, allocations and CPU. It is the one
// load driver of both sluice bench and the bench module (bench/), so that
// both report the same quantiles for the same run.
package load

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Decide decides one request for key number i (0 ≤ i < Workload.Keys).
// Each goroutine of a run has its own, so it may keep state of its own.
type Decide func(ctx context.Context, i int) (Answer, error)

// Answer is what one decision said.
type Answer struct {
	Allowed bool
	Local   bool // answered from leased slices of budgeted rules (sluice.Decision.Local)
}

// Workload is how a run drives its deciders: Goroutines callers each
// decide as fast as they can, walking the keys from an offset of their
// own, either for Duration or, when Duration is zero, for Calls calls in
// all, split evenly among them.
type Workload struct {
	Goroutines int           // callers deciding at once (at least 1)
	Keys       int           // distinct keys (at least 1); goroutine g starts at key g·7919 mod Keys
	Duration   time.Duration // how long each goroutine calls
	Calls      int64         // without a Duration: the calls of the run

	// Progress, if not nil, is called every 200 ms while the run lasts.
	Progress func(Progress)
}

// Progress is how far a run has come.
type Progress struct {
	Done      float64 // the fraction of the run that has passed, 0 to 1
	Decisions int64   // so far
	Errors    int64   // so far
	Rate      float64 // decisions per second since the previous report
}

// Result is what a run measured. A call that failed is an error, never a
// decision, and its latency is not counted; one that failed because the
// run's context ended is neither.
type Result struct {
	Decisions, Allowed, Local, Errors int64
	Elapsed                           time.Duration
	FirstErr                          error         // the first call that failed, if any
	Latency                           Histogram     // the decisions' latencies
	Mallocs                           uint64        // heap allocations of this process during the run
	CPU                               time.Duration // this process's user and system CPU time during the run (0 where unknown)
}

// PerSecond returns the decisions per second.
func (r *Result) PerSecond() float64 { return float64(r.Decisions) / r.Elapsed.Seconds() }

// worker is one goroutine's decider and what it measured; its counts sit
// on cache lines of their own so that the progress reports and the other
// goroutines do not contend for them.
type worker struct {
	decide                            Decide
	hist                              Histogram
	_                                 [64]byte
	decisions, allowed, local, errors atomic.Int64
	_                                 [64]byte
}

// runState is what a run's goroutines share.
type runState struct {
	ctx      context.Context
	keys     int
	deadline time.Time // with calls < 0: when each goroutine stops
	calls    int64     // if not negative: each goroutine's calls
	firstErr atomic.Pointer[error]
}

// Run calls newDecide once per goroutine, then drives the deciders as w
// says and returns what they measured. The calls carry ctx and no deadline
// of the run's, so the run's end fails none of them; when ctx ends the run
// ends early. A workload without goroutines or keys decides nothing and
// says so in FirstErr.
func Run(ctx context.Context, w Workload, newDecide func() Decide) Result {
	if w.Goroutines < 1 || w.Keys < 1 {
		return Result{FirstErr: fmt.Errorf("load: a workload of %d goroutines over %d keys: give at least 1 of each", w.Goroutines, w.Keys)}
	}
	workers := make([]worker, w.Goroutines)
	for g := range workers {
		workers[g].decide = newDecide()
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cpu0 := processCPU()
	start := time.Now()
	rs := &runState{ctx: ctx, keys: w.Keys, deadline: start.Add(w.Duration), calls: -1}
	if w.Duration <= 0 {
		rs.calls = w.Calls / int64(w.Goroutines)
	}
	var wg sync.WaitGroup
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rs.drive(&workers[g], (g*7919)%w.Keys)
		}()
	}
	sum := func() (r Result) {
		for g := range workers {
			r.Decisions += workers[g].decisions.Load()
			r.Allowed += workers[g].allowed.Load()
			r.Local += workers[g].local.Load()
			r.Errors += workers[g].errors.Load()
		}
		return r
	}
	report(&wg, w, start, sum)
	r := sum()
	r.Elapsed = time.Since(start)
	r.CPU = processCPU() - cpu0
	runtime.ReadMemStats(&after)
	r.Mallocs = after.Mallocs - before.Mallocs
	if e := rs.firstErr.Load(); e != nil {
		r.FirstErr = *e
	}
	for g := range workers {
		r.Latency.Merge(&workers[g].hist)
	}
	return r
}

// drive is one goroutine's loop: it calls w's decider for the keys from i
// on, until the deadline or for its calls.
func (rs *runState) drive(w *worker, i int) {
	done := rs.ctx.Done()
	for n := int64(0); rs.calls < 0 || n < rs.calls; n++ {
		select {
		case <-done:
			return
		default:
		}
		t0 := time.Now()
		if rs.calls < 0 && !t0.Before(rs.deadline) {
			return
		}
		a, err := w.decide(rs.ctx, i)
		switch {
		case err != nil && rs.ctx.Err() != nil:
			return // interrupted: the run ends
		case err != nil:
			w.errors.Add(1)
			rs.firstErr.CompareAndSwap(nil, &err)
		default:
			w.hist.Add(time.Since(t0))
			w.decisions.Add(1)
			if a.Allowed {
				w.allowed.Add(1)
			}
			if a.Local {
				w.local.Add(1)
			}
		}
		if i++; i == rs.keys {
			i = 0
		}
	}
}

// report waits for the goroutines, calling w.Progress every 200 ms if set.
func report(wg *sync.WaitGroup, w Workload, start time.Time, sum func() Result) {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	if w.Progress == nil {
		<-done
		return
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	last, lastDecisions := start, int64(0)
	for {
		select {
		case <-done:
			return
		case now := <-tick.C:
			r := sum()
			p := Progress{Decisions: r.Decisions, Errors: r.Errors,
				Rate: float64(r.Decisions-lastDecisions) / now.Sub(last).Seconds()}
			if w.Duration > 0 {
				p.Done = float64(now.Sub(start)) / float64(w.Duration)
			} else if w.Calls > 0 {
				p.Done = float64(r.Decisions+r.Errors) / float64(w.Calls)
			}
			p.Done = min(max(p.Done, 0), 1)
			last, lastDecisions = now, r.Decisions
			w.Progress(p)
		}
	}
}
