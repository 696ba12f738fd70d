package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/internal/envoy"
	"github.com/sluicerate/sluice/internal/filecheck"
	"github.com/sluicerate/sluice/internal/oneshot"
)

const checkUsage = `usage: sluice check --config FILE [--envoy-config DIR] [--json]
       sluice check --config FILE --policy P --attr k=v ... [--cost N] [--json] [--redis URL]
       sluice check --envoy-config DIR --domain D --descriptor k=v[,k2=v2] ... [--hits N] [--json] [--redis URL]

Without a request, validates FILE and DIR, as a CI step before shipping
them: every problem is printed with its file, line and column, and a valid
file's summary (store, policies, rules and their algorithms, schedules,
file overrides; the Envoy domains and their limits). It reads no store.
Exit status: 0 valid, 2 a problem.

With --policy, loads FILE (reporting every problem in it) and decides one
request against policy P without recording it: what /v1/peek would answer.
The store is Redis at --redis, else the file's store, else memory (where
every window is empty, so check validates the file and the request).
Exit status: 0 allowed, 1 denied, 2 usage, configuration or store error.

sluice check --envoy-config DIR --domain D --descriptor k=v[,k2=v2] ...
loads a directory of envoyproxy/ratelimit configuration files (reporting
every problem) and prints the status of each descriptor of one request,
recording nothing.

flags:`

func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("check", stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, checkUsage); fs.PrintDefaults() }
	var attrs attrFlag
	file := fs.String("config", "", "the configuration `file` to validate, or to decide a request against with --policy")
	policy := fs.String("policy", "", "decide one request against the policy of this `name`, with --attr (without it, validate the files)")
	fs.Var(&attrs, "attr", "an attribute `name=value`; repeat for several")
	cost := fs.Int64("cost", 1, "the request's cost")
	asJSON := fs.Bool("json", false, "print the decision as JSON")
	redisURL := fs.String("redis", "", "use Redis at this `URL` instead of the file's store")
	ef := addEnvoyFlags(fs, false)
	var descs descriptorFlag
	domain := fs.String("domain", "", "with --envoy-config: the request's `domain`")
	fs.Var(&descs, "descriptor", "with --envoy-config: a descriptor's entries, `k=v[,k2=v2]`; repeat for several")
	hits := fs.Uint("hits", 1, "with --envoy-config: the request's hits_addend")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	switch {
	case *policy == "" && *domain == "" && len(descs) == 0 && len(attrs.keys) == 0 && (*file != "" || *ef.dir != ""):
		opts, err := ef.options()
		if err != nil {
			return usageError(stderr, "check", "%v", err)
		}
		return checkFiles(*file, *ef.dir, opts.Load, *asJSON, stdout, stderr)
	case *ef.dir != "":
		return checkEnvoy(ctx, ef, *domain, descs, uint32(*hits), *redisURL, *asJSON, stdout, stderr)
	case *file == "":
		return usageError(stderr, "check", "--config FILE is required")
	case *policy == "":
		return usageError(stderr, "check", "--policy NAME is required")
	}
	cfg, err := config.Load(*file)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	pk, err := peek(ctx, cfg, *policy, *redisURL, attrs.values, *cost)
	if err != nil {
		return usageError(stderr, "check", "%v", err)
	}
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(pk); err != nil {
			return exitUsage
		}
	} else {
		pk.WriteText(stdout)
	}
	if !pk.Allowed() {
		return exitDenied
	}
	return exitOK
}

// checkFiles prints the problems of the configuration file and the Envoy
// directory that are given to stderr, and when both are valid their
// summary to stdout: exit 0, else 2. With asJSON, it prints the problems
// and the summaries as one JSON object to stdout.
func checkFiles(file, envoyDir string, envoyOpts envoy.LoadOptions, asJSON bool, stdout, stderr io.Writer) int {
	r := filecheck.Check(file, envoyDir, envoyOpts)
	if asJSON {
		b, _ := json.Marshal(r)
		fmt.Fprintln(stdout, string(b))
	} else {
		r.WriteProblems(stderr)
		r.WriteSummary(stdout)
	}
	if !r.OK() {
		return exitUsage
	}
	return exitOK
}

// peek decides one request of cost against cfg's policy named name on the
// store of cfg, or Redis at redisURL, without recording it.
func peek(ctx context.Context, cfg *config.Config, name, redisURL string, attrs map[string]string, cost int64) (*oneshot.Peek, error) {
	p, err := cfg.FindPolicy(name)
	if err != nil {
		return nil, err
	}
	store, err := openConfiguredStore(cfg, redisURL)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	return oneshot.PeekPolicy(ctx, store.Store, store.Where, cfg, p, attrs, cost)
}
