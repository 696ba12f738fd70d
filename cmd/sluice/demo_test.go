package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sluicerate/sluice/internal/demo"
	"github.com/sluicerate/sluice/internal/redistest"
)

// demoRun runs the demo with args and returns its JSON lines.
func demoRun(t *testing.T, args ...string) []demo.Line {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), append([]string{"demo", "--json"}, args...), &stdout, &stderr); code != exitOK {
		t.Fatalf("sluice demo %v: exit %d: %s", args, code, stderr.String())
	}
	var lines []demo.Line
	dec := json.NewDecoder(&stdout)
	for dec.More() {
		var l demo.Line
		if err := dec.Decode(&l); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	return lines
}

// The demo on Redis gives the same sequence as in memory.
func TestDemoOnRedisMatchesMemory(t *testing.T) {
	srv := redistest.Start(t)
	mem := demoRun(t)
	for range 2 { // a second run is not affected by the first one's windows
		red := demoRun(t, "--redis", "redis://"+srv.Addr())
		if len(red) != len(mem) {
			t.Fatalf("redis: %d attempts, memory %d", len(red), len(mem))
		}
		for i := range mem {
			m, r := mem[i], red[i]
			if m.Allowed != r.Allowed || m.DeniedBy != r.DeniedBy || m.Remaining != r.Remaining || m.Category != r.Category {
				t.Errorf("attempt %d: redis %+v, memory %+v", i+1, r, m)
			}
		}
	}
}

func TestDemoText(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"demo"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"in-memory store", "#4  errors    denied by category", "#13 info      denied by global"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestDemoBadFlags(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"demo", "--redis", "nota://url"}, &stdout, &stderr); code != exitUsage {
		t.Errorf("bad --redis: exit %d, want %d", code, exitUsage)
	}
	if code := run(context.Background(), []string{"demo", "--nope"}, &stdout, &stderr); code != exitUsage {
		t.Errorf("unknown flag: exit %d, want %d", code, exitUsage)
	}
	if code := run(context.Background(), []string{"nope"}, &stdout, &stderr); code != exitUsage {
		t.Errorf("unknown command: exit %d, want %d", code, exitUsage)
	}
}
