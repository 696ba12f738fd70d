package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicerate/sluice/internal/oneshot"
	"github.com/sluicerate/sluice/internal/redistest"
)

const reserveConfig = `
schedules:
  - {name: carrier, by: [carrier], rate: 4/s, max_delay: 1s}
  - {name: short, by: [carrier], rate: 4/s, max_delay: 10s, max_queue: 2}
`

func writeReserveConfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sluice.yaml")
	if err := os.WriteFile(path, []byte(reserveConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// runReserveJSON runs sluice reserve --json with args and returns its
// lines, its exit code, its stderr, and how long it ran: the reservations
// run on the system clock, so a delay is its slot less some of that time.
func runReserveJSON(t *testing.T, args ...string) ([]oneshot.Line, int, string, int64) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := run(context.Background(), append([]string{"reserve", "--json"}, args...), &stdout, &stderr)
	ran := time.Since(start).Milliseconds()
	var lines []oneshot.Line
	dec := json.NewDecoder(&stdout)
	for dec.More() {
		var l oneshot.Line
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("output is not JSON lines: %v\n%s", err, stdout.String())
		}
		lines = append(lines, l)
	}
	return lines, code, stderr.String(), ran
}

func TestReserveFromConfig(t *testing.T) {
	lines, code, stderr, ran := runReserveJSON(t, "--config", writeReserveConfig(t), "--schedule", "carrier", "--attr", "carrier=45", "--n", "7")
	if code != exitDenied {
		t.Errorf("exit %d, want %d (a reservation was rejected); stderr: %s", code, exitDenied, stderr)
	}
	if len(lines) != 7 {
		t.Fatalf("%d lines, want 7", len(lines))
	}
	// The reservations run on the system clock, a little apart: each delay
	// is its slot (T0 + k*250ms) less the time already spent, at most the
	// time the command ran.
	for i, l := range lines {
		k := int64(min(i, 5))
		wantOK := i < 5
		if l.N != i+1 || l.OK != wantOK || l.DelayMS > k*250 || l.DelayMS < k*250-ran-1 || (l.ID != "") != wantOK {
			t.Errorf("line %d: %+v, want ok=%v delay about %dms", i+1, l, wantOK, k*250)
		}
		if want := map[bool]string{true: "", false: "delay"}[wantOK]; l.Reason != want {
			t.Errorf("line %d: reason %q, want %q", i+1, l.Reason, want)
		}
		if _, err := time.Parse(time.RFC3339Nano, l.Slot); err != nil {
			t.Errorf("line %d: slot %q: %v", i+1, l.Slot, err)
		}
	}
}

func TestReserveMaxQueue(t *testing.T) {
	lines, code, _, _ := runReserveJSON(t, "--config", writeReserveConfig(t), "--schedule", "short", "--attr", "carrier=45", "--n", "4", "--cost", "2")
	if code != exitDenied || len(lines) != 4 {
		t.Fatalf("exit %d with %d lines, want %d with 4", code, len(lines), exitDenied)
	}
	// Cost 2 at 4/s: slots 500ms apart. The first leaves at once and holds
	// the queue for its 500ms, so a queue of two holds it and the second,
	// and rejects the third and fourth.
	for i, want := range []bool{true, true, false, false} {
		if lines[i].OK != want {
			t.Errorf("line %d: %+v, want ok=%v", i+1, lines[i], want)
		}
	}
	for i, l := range lines {
		if l.Queue != min(int64(i+1), 2) || (i >= 2 && l.Reason != "queue") {
			t.Errorf("line %d: %+v, want queue %d and, from the third, rejected by the queue of 2", i+1, l, min(i+1, 2))
		}
	}
}

func TestReserveWithoutConfig(t *testing.T) {
	lines, code, stderr, ran := runReserveJSON(t, "--rate", "20/s", "--max-delay", "1s", "--attr", "carrier=45", "--n", "3")
	if code != exitOK || len(lines) != 3 {
		t.Fatalf("exit %d with %d lines, want 0 with 3; stderr: %s", code, len(lines), stderr)
	}
	if lines[2].DelayMS > 100 || lines[2].DelayMS < 100-ran-1 {
		t.Errorf("third reservation at 20/s: delay %dms, want about 100ms", lines[2].DelayMS)
	}

	var stdout, errOut bytes.Buffer
	if code := run(context.Background(), []string{"reserve", "--rate", "4/s", "--attr", "carrier=45", "--n", "2"}, &stdout, &errOut); code != exitDenied {
		t.Errorf("text output: exit %d, want %d", code, exitDenied)
	}
	for _, want := range []string{`schedule "cli"`, "one every 250ms", "#1   ok", "#2   rejected  (delay)"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("text output lacks %q:\n%s", want, stdout.String())
		}
	}
}

func TestReserveUsageErrors(t *testing.T) {
	cfg := writeReserveConfig(t)
	tests := []struct {
		args []string
		want string
	}{
		{nil, "give the schedule"},
		{[]string{"--config", cfg, "--attr", "carrier=1"}, "--schedule is required"},
		{[]string{"--config", cfg, "--schedule", "nope", "--attr", "carrier=1"}, "unknown schedule"},
		{[]string{"--config", cfg, "--schedule", "carrier"}, "missing attribute"},
		{[]string{"--config", cfg, "--schedule", "carrier", "--attr", "carrier=1", "--cost", "0"}, "cost"},
		{[]string{"--config", cfg, "--schedule", "carrier", "--attr", "carrier=1", "--n", "0"}, "--n is 0"},
		{[]string{"--config", cfg, "--schedule", "carrier", "--rate", "4/s", "--attr", "carrier=1"}, "either --config or --rate"},
		{[]string{"--config", filepath.Join(t.TempDir(), "missing.yaml"), "--schedule", "carrier"}, "missing.yaml"},
		{[]string{"--rate", "four/s", "--attr", "carrier=1"}, "--rate"},
		{[]string{"--rate", "4/s", "--max-delay", "-1s"}, "negative max delay"},
		{[]string{"--rate", "4/s", "--attr", "nope"}, "NAME=VALUE"},
		{[]string{"--rate", "4/s", "--attr", "a=1", "--attr", "a=2"}, "given twice"},
		{[]string{"--rate", "4/s", "extra"}, "unexpected argument"},
	}
	for _, tt := range tests {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), append([]string{"reserve"}, tt.args...), &stdout, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("reserve %v: exit %d, stderr %q; want %d and %q", tt.args, code, stderr.String(), exitUsage, tt.want)
		}
	}
}

func TestReserveOnRedis(t *testing.T) {
	srv := redistest.Start(t)
	url := "redis://" + srv.Addr() + "/0"
	// Slots 1s apart and a longest delay of 4s: the sixth is rejected
	// unless more than a second goes by between the two runs.
	args := []string{"--redis", url, "--rate", "1/s", "--max-delay", "4s", "--schedule", "shared", "--attr", "carrier=45"}
	// Two invocations, as two processes would: the second finds the first's
	// reservations in Redis and queues behind them.
	first, code, stderr, _ := runReserveJSON(t, append(args, "--n", "3")...)
	if code != exitOK || len(first) != 3 {
		t.Fatalf("first run: exit %d, %d lines; stderr: %s", code, len(first), stderr)
	}
	second, code, _, _ := runReserveJSON(t, append(args, "--n", "3")...)
	if code != exitDenied || len(second) != 3 {
		t.Fatalf("second run: exit %d with %d lines, want %d with 3", code, len(second), exitDenied)
	}
	// The slots, on Redis's clock, follow each other 1s apart across the
	// two runs: T0 to T0+4s, and the sixth would wait more than 4s.
	all := append(first, second...)
	t0, err := time.Parse(time.RFC3339Nano, all[0].Slot)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range all[:5] {
		slot, err := time.Parse(time.RFC3339Nano, l.Slot)
		if err != nil || !l.OK || slot.Sub(t0) != time.Duration(i)*time.Second {
			t.Errorf("reservation %d: %+v, want OK at T0+%v", i+1, l, time.Duration(i)*time.Second)
		}
	}
	if l := all[5]; l.OK || l.Reason != "delay" || l.DelayMS <= 4000 {
		t.Errorf("reservation 6: %+v, want rejected for a delay over 4s", l)
	}
}
