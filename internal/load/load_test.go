package load

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestBenchErrorsAreNotDecisions: a failed call counts as an error and not
// as a decision, and the run's end fails no call: the calls carry the
// command's context, with no deadline of the run's (a Redis client checks a
// deadline itself and fails at once, and such calls were once counted as
// decisions in a tight loop at the run's end, doubling decisions/s). A call
// failed by an interruption is neither.
func TestBenchErrorsAreNotDecisions(t *testing.T) {
	w := Workload{Goroutines: 4, Keys: 10, Duration: 100 * time.Millisecond}
	var calls, failed, deadlines atomic.Int64
	newDecide := func() Decide {
		return func(ctx context.Context, i int) (Answer, error) {
			if _, ok := ctx.Deadline(); ok {
				deadlines.Add(1)
			}
			if err := ctx.Err(); err != nil {
				return Answer{}, err
			}
			if calls.Add(1)%4 == 0 {
				failed.Add(1)
				return Answer{}, errors.New("store failed")
			}
			time.Sleep(100 * time.Microsecond)
			return Answer{Allowed: i%2 == 0}, nil
		}
	}
	r := Run(context.Background(), w, newDecide)
	if r.Errors != failed.Load() || r.Decisions != calls.Load()-failed.Load() || r.Decisions == 0 || deadlines.Load() != 0 {
		t.Errorf("%d decisions, %d errors, %d calls with a deadline; want %d decisions and %d errors (the store's failures alone), none",
			r.Decisions, r.Errors, deadlines.Load(), calls.Load()-failed.Load(), failed.Load())
	}
	if r.Latency.N() != r.Decisions || r.Allowed > r.Decisions {
		t.Errorf("%d latencies and %d allowed for %d decisions", r.Latency.N(), r.Allowed, r.Decisions)
	}

	// Interrupted half way: the calls that fail for it count for nothing.
	calls.Store(0)
	failed.Store(0)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	w.Duration = time.Minute
	r = Run(ctx, w, newDecide)
	if r.Errors != failed.Load() || r.Decisions != calls.Load()-failed.Load() {
		t.Errorf("interrupted: %d decisions, %d errors; want %d and %d", r.Decisions, r.Errors, calls.Load()-failed.Load(), failed.Load())
	}
}

// TestCallsAndKeys: without a duration a run makes its calls, split evenly
// among the goroutines, each goroutine walking every key in turn from its
// own offset; allowed, local and the first error are counted as the
// deciders answer.
func TestCallsAndKeys(t *testing.T) {
	const goroutines, keys, calls = 3, 7, 3 * 7 * 4
	var (
		seen    [keys]atomic.Int64
		next    int
		firsts  [goroutines]int
		created atomic.Int64
	)
	newDecide := func() Decide {
		g := next
		next++
		created.Add(1)
		n := 0
		return func(ctx context.Context, i int) (Answer, error) {
			if n == 0 {
				firsts[g] = i
			}
			n++
			seen[i].Add(1)
			if i == 0 {
				return Answer{}, errors.New("key 0 fails")
			}
			return Answer{Allowed: i%2 == 1, Local: i == 1}, nil
		}
	}
	r := Run(context.Background(), Workload{Goroutines: goroutines, Keys: keys, Calls: calls}, newDecide)
	if created.Load() != goroutines {
		t.Errorf("%d deciders for %d goroutines", created.Load(), goroutines)
	}
	for i := range seen {
		if got := seen[i].Load(); got != calls/keys {
			t.Errorf("key %d decided %d times, want %d", i, got, calls/keys)
		}
	}
	for g, i := range firsts {
		if want := g * 7919 % keys; i != want {
			t.Errorf("goroutine %d started at key %d, want %d", g, i, want)
		}
	}
	perKey := int64(calls / keys)
	if r.Errors != perKey || r.Decisions != calls-perKey || r.Allowed != 3*perKey || r.Local != perKey ||
		r.FirstErr == nil || r.FirstErr.Error() != "key 0 fails" || r.Latency.N() != r.Decisions {
		t.Errorf("got %d decisions, %d allowed, %d local, %d errors (first %v), %d latencies; want %d, %d, %d, %d",
			r.Decisions, r.Allowed, r.Local, r.Errors, r.FirstErr, r.Latency.N(), calls-perKey, 3*perKey, perKey, perKey)
	}
}

// TestEmptyWorkload: a workload without goroutines or keys decides nothing
// and says why, rather than panicking.
func TestEmptyWorkload(t *testing.T) {
	for _, w := range []Workload{{Goroutines: 0, Keys: 1, Calls: 10}, {Goroutines: 2, Keys: 0, Calls: 10}} {
		called := false
		r := Run(context.Background(), w, func() Decide { called = true; return nil })
		if called || r.Decisions != 0 || r.FirstErr == nil || !strings.Contains(r.FirstErr.Error(), "give at least 1 of each") {
			t.Errorf("%+v: deciders made %v, %d decisions, error %v", w, called, r.Decisions, r.FirstErr)
		}
	}
}
