package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestHelpListsEveryCommand checks that --help names every subcommand and
// that each one's -h prints its own usage line and exits 0.
func TestHelpListsEveryCommand(t *testing.T) {
	var out bytes.Buffer
	if code := run(context.Background(), []string{"--help"}, &out, &out); code != exitOK {
		t.Fatalf("sluice --help exited %d, want %d", code, exitOK)
	}
	for _, c := range commands() {
		if !strings.Contains(out.String(), "\n  "+c.name+" ") {
			t.Errorf("sluice --help does not list %q:\n%s", c.name, out.String())
		}
		var cout bytes.Buffer
		if code := run(context.Background(), []string{c.name, "-h"}, &cout, &cout); code != exitOK {
			t.Errorf("sluice %s -h exited %d, want %d", c.name, code, exitOK)
		}
		if !strings.HasPrefix(cout.String(), "usage: sluice "+c.name) {
			t.Errorf("sluice %s -h does not start with its usage line:\n%s", c.name, cout.String())
		}
	}
}
