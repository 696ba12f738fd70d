package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestKeepResults: what is printed while the results are kept lands in a
// new file named by the date, time and sections; a second run in the same
// minute is refused rather than overwriting the first.
func TestKeepResults(t *testing.T) {
	dir := t.TempDir()
	at := time.Date(2026, 11, 29, 10, 42, 31, 0, time.UTC)
	path, done, err := keepResults(dir, "service,budgets", at)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("| contender | decisions/s |")
	done()
	if want := filepath.Join(dir, "2026-11-29-1042-service-budgets.md"); path != want {
		t.Errorf("path %s, want %s", path, want)
	}
	if got, err := os.ReadFile(path); err != nil || string(got) != "| contender | decisions/s |\n" {
		t.Errorf("file = %q, %v", got, err)
	}
	if _, _, err := keepResults(dir, "service,budgets", at.Add(20*time.Second)); err == nil {
		t.Error("a second run in the same minute overwrote the first")
	}
	p, d, err := keepResults(dir, defaultSections, at)
	if err != nil {
		t.Fatal(err)
	}
	d()
	if want := filepath.Join(dir, "2026-11-29-1042-bench.md"); p != want {
		t.Errorf("a run of every section keeps %s, want %s", p, want)
	}
}
