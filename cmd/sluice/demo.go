package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/internal/launch"
	"github.com/sluicerate/sluice/store"
)

// demoPolicy is the notifier demo: a global cap of 10 over a cap of 3 per
// category, both per 60 seconds.
var demoPolicy = sluice.Policy{Name: "notify", Rules: []sluice.Rule{
	{Name: "global", Limit: 10, Window: time.Minute},
	{Name: "category", Limit: 3, Window: time.Minute, By: []string{"category"}},
}}

// demoEvents is the stream of notifications the demo sends: errors burst
// first, then the other categories share what the global cap leaves.
var demoEvents = []string{
	"errors", "errors", "errors", "errors", "warnings", "info", "warnings", "debug",
	"info", "warnings", "warnings", "debug", "info", "debug", "info", "audit",
}

// demoLine is one attempt of the demo, as printed with --json.
type demoLine struct {
	Attempt      int              `json:"attempt"`
	Category     string           `json:"category"`
	Allowed      bool             `json:"allowed"`
	DeniedBy     string           `json:"denied_by"`
	Remaining    int64            `json:"remaining"`
	RetryAfterMS int64            `json:"retry_after_ms"`
	Limits       map[string]int64 `json:"used"`
}

func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("demo", stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: sluice demo [--redis URL] [--json]

Runs the notifier scenario: a global cap of 10 notifications over a cap of 3
per category, both per minute, with a burst of "errors" first. Each attempt
is printed with whether it was sent and which limit denied it. The store is
memory, or Redis at --redis.

flags:`)
		fs.PrintDefaults()
	}
	redisURL := fs.String("redis", "", "run on Redis at this URL (redis://host:port/db); default: in memory")
	asJSON := fs.Bool("json", false, "print one JSON object per attempt")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	store, where, err := openDemoStore(*redisURL)
	if err != nil {
		fmt.Fprintf(stderr, "sluice demo: %v\n", err)
		return exitUsage
	}
	defer store.Close()
	// A demo waits for a cold connection rather than showing degraded answers.
	lim := sluice.NewLimiter(store, sluice.Config{Timeout: 2 * time.Second})

	if !*asJSON {
		fmt.Fprintf(stdout, "policy %q on %s: global %d, category %d, per %v\n\n",
			demoPolicy.Name, where, demoPolicy.Rules[0].Limit, demoPolicy.Rules[1].Limit, demoPolicy.Rules[0].Window)
	}
	enc := json.NewEncoder(stdout)
	for i, c := range demoEvents {
		d, err := lim.Allow(ctx, &demoPolicy, map[string]string{"category": c})
		if err != nil {
			fmt.Fprintf(stderr, "sluice demo: %v\n", err)
			return exitUsage
		}
		line := demoLine{Attempt: i + 1, Category: c, Allowed: d.Allowed, DeniedBy: d.DeniedBy,
			Remaining: d.Remaining, RetryAfterMS: d.RetryAfter.Milliseconds(), Limits: map[string]int64{}}
		for _, s := range d.Limits() {
			line.Limits[s.Rule] = s.Used
		}
		if *asJSON {
			if err := enc.Encode(line); err != nil {
				return exitUsage
			}
			continue
		}
		fmt.Fprintln(stdout, formatDemoLine(line))
	}
	return exitOK
}

func formatDemoLine(l demoLine) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%-2d %-9s ", l.Attempt, l.Category)
	if l.Allowed {
		b.WriteString("allowed  ")
	} else {
		fmt.Fprintf(&b, "denied by %-8s ", l.DeniedBy)
	}
	fmt.Fprintf(&b, " global %2d/%d  category %d/%d", l.Limits["global"], demoPolicy.Rules[0].Limit,
		l.Limits["category"], demoPolicy.Rules[1].Limit)
	if !l.Allowed {
		fmt.Fprintf(&b, "  retry in %v", (time.Duration(l.RetryAfterMS) * time.Millisecond).Round(time.Second))
	}
	return b.String()
}

// openDemoStore opens the in-memory store, or Redis when url is set. On
// Redis every run writes under a prefix of its own, so a run is not denied by
// the windows an earlier run left behind (they expire with their window).
func openDemoStore(url string) (store.Store, string, error) {
	cfg := &config.Config{Store: &config.Store{Prefix: fmt.Sprintf("sluice-demo-%d", time.Now().UnixNano())}}
	s, err := launch.Open(cfg, url)
	if err != nil {
		return nil, "", err
	}
	return s, s.Where, nil
}
