package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/internal/deploy"
	"github.com/sluicerate/sluice/internal/envoy/rls"
	"github.com/sluicerate/sluice/internal/filecheck"
	"github.com/sluicerate/sluice/internal/launch"
	"github.com/sluicerate/sluice/internal/oneshot"
)

func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("check", stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, help("check")); fs.PrintDefaults() }
	var attrs attrFlag
	file := fs.String("config", "", "the configuration `file` to validate, or to decide a request against with --policy")
	policy := fs.String("policy", "", "decide one request against the policy of this `name`, with --attr (without it, validate the files)")
	fs.Var(&attrs, "attr", "an attribute `name=value`; repeat for several")
	cost := fs.Int64("cost", 1, "the request's cost")
	asJSON := fs.Bool("json", false, "print the decision as JSON")
	redisURL := fs.String("redis", "", "use Redis at this `URL` instead of the file's store")
	ef := deploy.AddCheckFlags(fs)
	var descs rls.Descriptors
	domain := fs.String("domain", "", "with --envoy-config: the request's `domain`")
	fs.Var(&descs, "descriptor", "with --envoy-config: a descriptor's entries, `k=v[,k2=v2]`; repeat for several")
	hits := fs.Uint("hits", 1, "with --envoy-config: the request's hits_addend")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	switch {
	case *policy == "" && *domain == "" && len(descs) == 0 && len(attrs.keys) == 0 && (*file != "" || ef.EnvoyDir() != ""):
		opts, err := ef.EnvoyOptions()
		if err != nil {
			return usageError(stderr, "check", "%v", err)
		}
		r := filecheck.Check(*file, ef.EnvoyDir(), opts.Load)
		r.Write(stdout, stderr, *asJSON)
		if !r.OK() {
			return exitUsage
		}
		return exitOK
	case ef.EnvoyDir() != "":
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

// peek decides one request of cost against cfg's policy named name on the
// store of cfg, or Redis at redisURL, without recording it.
func peek(ctx context.Context, cfg *config.Config, name, redisURL string, attrs map[string]string, cost int64) (*oneshot.Peek, error) {
	p, err := cfg.FindPolicy(name)
	if err != nil {
		return nil, err
	}
	store, err := launch.Open(cfg, redisURL)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	return oneshot.PeekPolicy(ctx, store.Store, store.Where, cfg, p, attrs, cost)
}
