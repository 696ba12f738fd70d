package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/sluicerate/sluice/internal/load"
)

const benchUsage = `usage: sluice bench [--redis URL | --server URL] [flags]

Drives a store or a running sluice server with a workload: --goroutines
callers decide as fast as they can, each walking --keys keys from its own
offset, for --duration. The store is the in-memory store, or Redis at
--redis, deciding a policy of --rules rules of --limit per --window, each by
the key, through a Limiter as make bench drives sluice: no deadline per
store call unless --timeout gives one, no circuit breaker. The defaults
are make bench's workload. With --server, requests go to URL/v1/decide for the configured
--policy, the key in attribute --attr. A progress bar goes to stderr; the
decisions per second, a latency histogram of the decisions, and the calls
that failed (errors, never counted as decisions) to stdout. With --budget,
each rule is budgeted (leased in slices, answered in memory; see
docs/budgets.md) and the run counts the decisions answered from slices, as
it counts those a server marks "local" with --server.

flags:`

// runBench drives the target of its flags with internal/load's driver and
// prints what the run measured.
func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("bench", stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, benchUsage)
		fs.PrintDefaults()
	}
	var o load.Options
	fs.StringVar(&o.RedisURL, "redis", "", "decide on Redis at this `URL` (redis://host:port[/db])")
	fs.StringVar(&o.ServerURL, "server", "", "decide through a sluice server at this base `URL` (http://host:port)")
	fs.StringVar(&o.Policy, "policy", "bench", "with --server: the configured policy's `name`")
	fs.StringVar(&o.Attr, "attr", "key", "with --server: the `attribute` that carries the key")
	fs.IntVar(&o.Goroutines, "goroutines", 64, "callers deciding at once")
	fs.IntVar(&o.Keys, "keys", 10_000, "distinct keys")
	fs.Int64Var(&o.Limit, "limit", 100, "each rule's limit")
	fs.DurationVar(&o.Window, "window", time.Minute, "each rule's window")
	fs.IntVar(&o.Rules, "rules", 1, "rules in the policy (each by key)")
	fs.DurationVar(&o.Duration, "duration", 10*time.Second, "how long to run")
	fs.DurationVar(&o.Budget, "budget", 0, "budget each rule by this `duration` (rule budget: D), answering from leased slices (not with --server: the budget is the server's configuration)")
	fs.DurationVar(&o.Timeout, "timeout", 0, "deadline of each store call (0: none, as make bench decides; sluice.Config's default is 50ms)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	t, err := o.Open()
	if err != nil {
		return usageError(stderr, "bench", "%v", err)
	}
	defer t.Close()
	fmt.Fprintln(stdout, o.Header(t))
	res := load.Run(ctx, o.Workload(func(p load.Progress) { p.Draw(stderr) }), t.NewDecide)
	load.ClearProgress(stderr)
	res.Print(stdout, o.CountsLocal())
	if res.Decisions == 0 {
		return exitUsage
	}
	return exitOK
}
