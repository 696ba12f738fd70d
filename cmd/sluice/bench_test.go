package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
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
