package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/admin/redisinspect"
	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/internal/edge"
	"github.com/sluicerate/sluice/internal/inspect"
	"github.com/sluicerate/sluice/internal/launch"
)

const inspectUsage = `usage: sluice inspect --redis URL --policy P --attr k=v ... [--config FILE] [--prefix P] [--json]

Shows, changing nothing, the Redis windows that policy P keeps for the
given attributes: each key, its entries with their ages and costs, and its
time to live; for a concurrency rule, its leases alive, each by its token
with when it expires; for a budgeted rule, the slices leased from its
window (their units, and when each ends), counted in its use. With --config, the policy's rules name the keys
exactly and the counts in each window are shown (a concurrency rule's
leases alive of its most); without it, the keys are found with SCAN (every
window of P whose attribute values are among those given; the records of
leases are not windows, and are skipped). Redis is --redis, else the
file's store.
Exit status: 0 ok, 2 usage, configuration or store error.

flags:`

func runInspect(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("inspect", stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, inspectUsage); fs.PrintDefaults() }
	var attrs attrFlag
	file := fs.String("config", "", "the configuration `file` that defines the policy")
	policy := fs.String("policy", "", "the policy's `name` (required)")
	fs.Var(&attrs, "attr", "an attribute `name=value`; repeat for several")
	redisURL := fs.String("redis", "", "Redis at this `URL` (redis://host:port/db), instead of the file's store")
	asJSON := fs.Bool("json", false, "print JSON")
	prefix := fs.String("prefix", "", "the key `prefix` (default: the file's, else sluice)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	fail := func(format string, a ...any) int { return usageError(stderr, "inspect", format, a...) }
	switch {
	case *file == "" && *redisURL == "":
		return fail("--redis URL is required (or --config FILE with a Redis store)")
	case *policy == "":
		return fail("--policy NAME is required")
	}
	cfg := &config.Config{}
	var p *sluice.Policy
	if *file != "" {
		var err error
		if cfg, err = config.Load(*file); err != nil {
			fmt.Fprintln(stderr, err)
			return exitUsage
		}
		if p = cfg.Policy(*policy); p == nil {
			return fail("%v: %q is not in %s", edge.ErrUnknownPolicy, *policy, *file)
		}
	}
	if *prefix != "" {
		cfg.Store = cmp.Or(cfg.Store, &config.Store{})
		cfg.Store.Prefix = *prefix
	}
	store, err := launch.Open(cfg, *redisURL)
	if err != nil {
		return fail("%v", err)
	}
	defer store.Close()
	if store.Redis == nil {
		return fail("the file has no Redis store and --redis is not set; inspect reads Redis")
	}
	rep, err := inspectRedis(ctx, redisinspect.Inspector{Store: store.Redis, Client: store.Client}, store.Where, *policy, p, attrs.values)
	if err != nil {
		return fail("%v", err)
	}
	if *asJSON {
		err = json.NewEncoder(stdout).Encode(rep)
	} else {
		err = inspect.WriteText(stdout, &rep)
	}
	if err != nil {
		return exitUsage
	}
	return exitOK
}

// inspectRedis reads the windows that the policy named name keeps in
// Redis for attrs: with p, its definition, a peek's figures and each
// rule's window; without, the windows SCAN finds.
func inspectRedis(ctx context.Context, insp redisinspect.Inspector, where, name string, p *sluice.Policy, attrs map[string]string) (inspect.Report, error) {
	if p == nil {
		windows, now, err := insp.Scan(ctx, name, attrs, time.Now())
		return inspect.Stored(name, where, windows, now), err
	}
	lim := sluice.NewLimiter(insp.Store, sluice.Config{Timeout: 5 * time.Second})
	defer lim.Close()
	rep, err := inspect.Source{Limiter: lim, Inspector: insp, Store: where}.Policy(ctx, p, attrs, time.Now())
	if err == nil && rep.Error != "" {
		err = errors.New(rep.Error)
	}
	return rep, err
}
