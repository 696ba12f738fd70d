package demo_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/demo"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/storetest"
)

// run runs the demo on a memory store whose clock stands still, and
// returns its lines.
func run(t *testing.T) []demo.Line {
	t.Helper()
	c := storetest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	lim := sluice.NewLimiter(memstore.New(memstore.Config{Clock: c.Now}), sluice.Config{})
	var lines []demo.Line
	if err := demo.Run(context.Background(), lim, func(l demo.Line) error { lines = append(lines, l); return nil }); err != nil {
		t.Fatal(err)
	}
	return lines
}

// TestRun (the scenario that sluice demo prints): of the 16 notifications 10 are sent; the 4th "errors" and the
// 4th "warnings" hit their category cap, and the global cap of 10 stops
// everything after. A denial waits out the whole minute, the clock
// standing still.
func TestRun(t *testing.T) {
	t.Parallel()
	lines := run(t)
	if len(lines) != len(demo.Events) {
		t.Fatalf("got %d attempts, want %d", len(lines), len(demo.Events))
	}
	var deniedBy []string
	admitted := 0
	for i, l := range lines {
		if l.Attempt != i+1 || l.Category != demo.Events[i] {
			t.Errorf("line %d = %+v, want attempt %d of %s", i+1, l, i+1, demo.Events[i])
		}
		if l.Allowed {
			admitted++
			continue
		}
		deniedBy = append(deniedBy, l.DeniedBy)
		if l.RetryAfterMS != time.Minute.Milliseconds() {
			t.Errorf("line %d: retry after %dms, want a minute", i+1, l.RetryAfterMS)
		}
	}
	want := []string{"category", "category", "global", "global", "global", "global"}
	if admitted != 10 || !slices.Equal(deniedBy, want) {
		t.Errorf("admitted %d, denials %v; want 10 and %v", admitted, deniedBy, want)
	}
	if l := lines[3]; l.Allowed || l.DeniedBy != "category" || l.Category != "errors" || l.Remaining != 0 {
		t.Errorf("attempt 4 = %+v, want errors denied by category", l)
	}
}

// TestLineText: a line says what was sent or which cap denied it, what
// each cap has used, and when to retry.
func TestLineText(t *testing.T) {
	t.Parallel()
	lines := run(t)
	for i, want := range map[int]string{
		0:  "#1  errors    allowed   global  1/10  category 1/3",
		3:  "#4  errors    denied by category  global  3/10  category 3/3  retry in 1m0s",
		12: "#13 info      denied by global    global 10/10  category 2/3  retry in 1m0s",
	} {
		if got := lines[i].String(); got != want {
			t.Errorf("line %d:\n got %q\nwant %q", i+1, got, want)
		}
	}
	if got, want := demo.Header("memory"), "policy \"notify\" on memory: global 10, category 3, per 1m0s\n"; got != want {
		t.Errorf("Header = %q, want %q", got, want)
	}
}

// TestRunStops: Run stops at the first error of the callback and returns
// it.
func TestRunStops(t *testing.T) {
	t.Parallel()
	lim := sluice.NewLimiter(memstore.New(memstore.Config{}), sluice.Config{})
	stop, n := errors.New("stop"), 0
	err := demo.Run(context.Background(), lim, func(demo.Line) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Errorf("Run = %v after %d lines, want stop after 1", err, n)
	}
}
