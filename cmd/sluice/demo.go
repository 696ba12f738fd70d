package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/internal/demo"
	"github.com/sluicerate/sluice/internal/launch"
)

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("demo", stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, help("demo")); fs.PrintDefaults() }
	redisURL := fs.String("redis", "", "run on Redis at this URL (redis://host:port/db); default: in memory")
	asJSON := fs.Bool("json", false, "print one JSON object per attempt")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	// On Redis every run writes under a prefix of its own, so a run is not
	// denied by the windows an earlier run left behind (they expire with
	// their window).
	cfg := &config.Config{Store: &config.Store{Prefix: fmt.Sprintf("sluice-demo-%d", time.Now().UnixNano())}}
	store, err := launch.Open(cfg, *redisURL)
	if err != nil {
		fmt.Fprintf(stderr, "sluice demo: %v\n", err)
		return exitUsage
	}
	defer store.Close()
	// A demo waits for a cold connection rather than showing degraded answers.
	lim := sluice.NewLimiter(store.Store, sluice.Config{Timeout: 2 * time.Second})
	enc := json.NewEncoder(stdout)
	emit := func(l demo.Line) error { return enc.Encode(l) }
	if !*asJSON {
		emit = func(l demo.Line) error { fmt.Fprintln(stdout, l); return nil }
		fmt.Fprintln(stdout, demo.Header(store.Where))
	}
	if err := demo.Run(ctx, lim, emit); err != nil {
		fmt.Fprintf(stderr, "sluice demo: %v\n", err)
		return exitUsage
	}
	return exitOK
}
