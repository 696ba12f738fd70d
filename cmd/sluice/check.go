package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/internal/deploy"
	"github.com/sluicerate/sluice/internal/edge"
	"github.com/sluicerate/sluice/internal/envoy/rls"
	"github.com/sluicerate/sluice/internal/launch"
	"github.com/sluicerate/sluice/internal/wire"
)

// checkOutput is what `sluice check --json` prints: the decision as the
// HTTP API returns it, with the policy and the store.
type checkOutput struct {
	Policy string `json:"policy"`
	Store  string `json:"store"`
	wire.DecisionJSON
}

func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("check", stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: sluice check --config FILE [--envoy-config DIR] [--json]
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

flags:`)
		fs.PrintDefaults()
	}
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
	if *policy == "" && *domain == "" && len(descs) == 0 && len(attrs.keys) == 0 && (*file != "" || ef.EnvoyDir() != "") {
		opts, err := ef.EnvoyOptions()
		if err != nil {
			return usageError(stderr, "check", "%v", err)
		}
		return checkFiles(*file, ef.EnvoyDir(), opts.Load, *asJSON, stdout, stderr)
	}
	if ef.EnvoyDir() != "" {
		return checkEnvoy(ctx, ef, *domain, descs, uint32(*hits), *redisURL, *asJSON, stdout, stderr)
	}
	fail := func(format string, a ...any) int { return usageError(stderr, "check", format, a...) }
	switch {
	case *file == "":
		return fail("--config FILE is required")
	case *policy == "":
		return fail("--policy NAME is required")
	}
	cfg, err := config.Load(*file)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	p := cfg.Policy(*policy)
	if p == nil {
		var names []string
		for _, q := range cfg.Policies {
			names = append(names, q.Name)
		}
		return fail("%v: %q is not in %s (policies: %s)", edge.ErrUnknownPolicy, *policy, *file, strings.Join(names, ", "))
	}
	store, err := launch.Open(cfg, *redisURL)
	if err != nil {
		return fail("%v", err)
	}
	defer store.Close()
	lc := sluice.Config{}
	if cfg.Store != nil {
		lc.OnError = cfg.Store.OnError
	}
	d, err := sluice.NewLimiter(store.Store, lc).Peek(ctx, p, attrs.values, *cost)
	if err != nil {
		return fail("%v", err)
	}
	out := checkOutput{Policy: p.Name, Store: store.Where, DecisionJSON: wire.NewDecisionJSON(&d)}
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(out); err != nil {
			return exitUsage
		}
	} else {
		switch {
		case d.Unlimited:
			fmt.Fprintf(stdout, "policy %q on %s: allowed with no limit: no rule applies to these attributes\n", p.Name, store.Where)
		case d.Allowed:
			fmt.Fprintf(stdout, "policy %q on %s: allowed (cost %d, remaining %d)\n", p.Name, store.Where, *cost, d.Remaining)
		default:
			fmt.Fprintf(stdout, "policy %q on %s: denied by %s (%s; cost %d, remaining %d)\n", p.Name, store.Where, d.DeniedBy, d.Cause, *cost, d.Remaining)
		}
		for _, l := range d.Limits() {
			if r := ruleNamed(p, l.Rule); r != nil && r.Algorithm == sluice.GCRA {
				fmt.Fprintf(stdout, "  %-16s %d of a burst of %d used (gcra, %d per %v)", l.Rule, l.Used, l.Used+l.Remaining, l.Limit, l.Window)
			} else {
				fmt.Fprintf(stdout, "  %-16s %d/%d used per %v", l.Rule, l.Used, l.Limit, l.Window)
			}
			if r := ruleNamed(p, l.Rule); r != nil && r.Spread > 1 {
				fmt.Fprintf(stdout, " in one of %d sub-windows", r.Spread)
			}
			switch {
			case l.Limit == 0:
				fmt.Fprint(stdout, "  blocked: a limit of 0 admits nothing")
			case !l.Fits && l.Shadow:
				fmt.Fprintf(stdout, "  would deny (%s; shadow); retry in %v", l.Cause, l.RetryAfter.Round(1e6))
			case !l.Fits:
				fmt.Fprintf(stdout, "  does not fit (%s); retry in %v", l.Cause, l.RetryAfter.Round(1e6))
			}
			fmt.Fprintln(stdout)
		}
	}
	if !d.Allowed {
		return exitDenied
	}
	return exitOK
}

// ruleNamed returns p's rule named name, or nil.
func ruleNamed(p *sluice.Policy, name string) *sluice.Rule {
	for i := range p.Rules {
		if p.Rules[i].Name == name {
			return &p.Rules[i]
		}
	}
	return nil
}
