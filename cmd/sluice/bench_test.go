package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestBenchMemory(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"bench", "--duration", "300ms", "--goroutines", "4", "--keys", "50", "--limit", "3", "--rules", "2"}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"the in-memory store: 4 goroutines, 50 keys, 2 rule(s) of 3 per 1m0s", "decisions/s", "latency: p50", "latency histogram:", "%"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// 50 keys of 3: at most 150 admitted however long it runs.
	if strings.Contains(out, " 100.0% allowed") {
		t.Errorf("every decision allowed with 50 keys of 3 over 300ms:\n%s", out)
	}
}

func TestBenchServer(t *testing.T) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Policy     string            `json:"policy"`
			Attributes map[string]string `json:"attributes"`
			Cost       int64             `json:"cost"`
		}
		if r.URL.Path != "/v1/decide" || json.NewDecoder(r.Body).Decode(&req) != nil || req.Policy != "api" || req.Attributes["user"] == "" || req.Cost != 1 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		n := calls.Add(1)
		json.NewEncoder(w).Encode(map[string]any{"allowed": n%2 == 0, "local": n%4 == 0})
	}))
	defer srv.Close()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"bench", "--server", srv.URL, "--policy", "api", "--attr", "user", "--duration", "200ms", "--goroutines", "2"}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, stderr.String())
	}
	if calls.Load() == 0 || !strings.Contains(stdout.String(), " 0 errors") || !strings.Contains(stdout.String(), " decisions local (") {
		t.Errorf("%d calls; output:\n%s", calls.Load(), stdout.String())
	}
}

// TestBenchBudget: --budget budgets each rule; the run counts the
// decisions answered from slices, which must be most of them when one hot
// key's limit is far above the demand, and a budget too long for the
// window is refused with the rule's reason.
func TestBenchBudget(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"bench", "--duration", "300ms", "--goroutines", "4", "--keys", "1", "--limit", "100000000",
		"--budget", "2s"}, &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, stderr.String())
	}
	out := stdout.String()
	var ops, local int64
	var pct float64
	for line := range strings.SplitSeq(out, "\n") {
		if strings.Contains(line, " decisions in ") {
			fmt.Sscanf(line, "%d decisions", &ops)
		}
		if strings.Contains(line, " decisions local (") {
			fmt.Sscanf(line, "%d decisions local (%f%%)", &local, &pct)
		}
	}
	if !strings.Contains(out, "1 rule(s) of 100000000 per 1m0s, budget 2s") || ops == 0 || local*2 < ops || local > ops {
		t.Errorf("%d decisions, %d local; want most of them local:\n%s", ops, local, out)
	}

	stdout.Reset()
	stderr.Reset()
	if code := run(context.Background(), []string{"bench", "--duration", "100ms", "--budget", "30s"}, &stdout, &stderr); code != exitUsage ||
		!strings.Contains(stderr.String(), "budget 30s is longer than 15s") {
		t.Errorf("a budget past a quarter of the window: exit %d, stderr %s", code, stderr.String())
	}
}

func TestBenchUsage(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "--redis", "redis://x", "--server", "http://y"},
		{"bench", "--goroutines", "0"},
		{"bench", "--duration", "-1s"},
		{"bench", "--server", "y:80"},
		{"bench", "extra"},
		{"bench", "--server", "http://y", "--budget", "1s"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code != exitUsage {
			t.Errorf("%q: exit %d, want %d", args, code, exitUsage)
		}
	}
}

func TestLatencyBuckets(t *testing.T) {
	var h latencies
	for _, d := range []time.Duration{time.Microsecond, 3 * time.Microsecond, 40 * time.Microsecond, 900 * time.Microsecond, 7 * time.Millisecond} {
		h.add(d)
		if up := latencyUpper(latencyBucket(d)); up < d || float64(up) > 1.25*float64(d) {
			t.Errorf("%v lands in a bucket ending at %v", d, up)
		}
	}
	if got := h.quantile(1); got != 7*time.Millisecond {
		t.Errorf("max quantile %v, want 7ms", got)
	}
	var buf bytes.Buffer
	h.draw(&buf)
	if n := strings.Count(buf.String(), "\n"); n < 5 {
		t.Errorf("histogram of five spread latencies has %d lines:\n%s", n, buf.String())
	}
}

// TestBenchErrorsAreNotDecisions: a failed call counts as an error and not
// as a decision, and the run's end fails no call: the calls carry the
// command's context, with no deadline of the run's (a Redis client checks a
// deadline itself and fails at once, and such calls were once counted as
// decisions in a tight loop at the run's end, doubling decisions/s). A call
// failed by an interruption is neither.
func TestBenchErrorsAreNotDecisions(t *testing.T) {
	o := benchOptions{goroutines: 4, keys: 10, duration: 100 * time.Millisecond}
	var calls, failed, deadlines atomic.Int64
	newDecide := func() benchDecide {
		return func(ctx context.Context, i int) (benchAnswer, error) {
			if _, ok := ctx.Deadline(); ok {
				deadlines.Add(1)
			}
			if err := ctx.Err(); err != nil {
				return benchAnswer{}, err
			}
			if calls.Add(1)%4 == 0 {
				failed.Add(1)
				return benchAnswer{}, errors.New("store failed")
			}
			time.Sleep(100 * time.Microsecond)
			return benchAnswer{allowed: i%2 == 0}, nil
		}
	}
	var stderr bytes.Buffer
	r := drive(context.Background(), o, newDecide, &stderr)
	if r.errors != failed.Load() || r.ops != calls.Load()-failed.Load() || r.ops == 0 || deadlines.Load() != 0 {
		t.Errorf("%d decisions, %d errors, %d calls with a deadline; want %d decisions and %d errors (the store's failures alone), none",
			r.ops, r.errors, deadlines.Load(), calls.Load()-failed.Load(), failed.Load())
	}
	if r.hist.n != r.ops || r.allowed > r.ops {
		t.Errorf("%d latencies and %d allowed for %d decisions", r.hist.n, r.allowed, r.ops)
	}

	// Interrupted half way: the calls that fail for it count for nothing.
	calls.Store(0)
	failed.Store(0)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	o.duration = time.Minute
	r = drive(ctx, o, newDecide, &stderr)
	if r.errors != failed.Load() || r.ops != calls.Load()-failed.Load() {
		t.Errorf("interrupted: %d decisions, %d errors; want %d and %d", r.ops, r.errors, calls.Load()-failed.Load(), failed.Load())
	}
}
