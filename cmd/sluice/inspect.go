package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/config"
)

// inspectOutput is what `sluice inspect --json` prints.
type inspectOutput struct {
	Policy  string          `json:"policy"`
	Store   string          `json:"store"`
	Now     time.Time       `json:"now"`
	Windows []inspectWindow `json:"windows"`
}

type inspectWindow struct {
	Rule     string         `json:"rule"`
	Key      string         `json:"key"`
	Limit    int64          `json:"limit"`
	WindowMS int64          `json:"window_ms"`
	Used     int64          `json:"used"`
	TTLMS    int64          `json:"ttl_ms"` // -1: no expiry; 0: no key
	Entries  []inspectEntry `json:"entries"`
}

type inspectEntry struct {
	Time   time.Time `json:"time"`
	AgeMS  int64     `json:"age_ms"`
	Cost   int64     `json:"cost"`
	Counts bool      `json:"counts"` // inside the window now
}

func runInspect(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("inspect", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: sluice inspect --config FILE --policy P --attr k=v ... [--redis URL] [--json]

Shows, changing nothing, the Redis windows that policy P's rules keep for
the given attributes: each key, its entries with their ages and costs, and
its time to live. The policy's rules come from FILE; Redis is --redis, else
the file's store.
Exit status: 0 ok, 2 usage, configuration or store error.

flags:`)
		fs.PrintDefaults()
	}
	var attrs reserveAttrs
	file := fs.String("config", "", "the configuration `file` that defines the policy (required)")
	policy := fs.String("policy", "", "the policy's `name` (required)")
	fs.Var(&attrs, "attr", "an attribute `name=value`; repeat for several")
	redisURL := fs.String("redis", "", "Redis at this `URL` (redis://host:port/db), instead of the file's store")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "sluice inspect: "+format+"\n", a...)
		return exitUsage
	}
	switch {
	case fs.NArg() > 0:
		return fail("unexpected argument %q", fs.Arg(0))
	case *file == "":
		return fail("--config FILE is required: the rules of the policy name the keys")
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
		return fail("%v: %q is not in %s", sluice.ErrUnknownPolicy, *policy, *file)
	}
	store, err := openConfiguredStore(cfg, *redisURL)
	if err != nil {
		return fail("%v", err)
	}
	defer store.Close()
	if store.Redis == nil {
		return fail("the file has no Redis store and --redis is not set; inspect reads Redis")
	}
	windows, now, err := store.Redis.Inspect(ctx, p, attrs.values)
	if err != nil {
		return fail("%v", err)
	}
	out := inspectOutput{Policy: p.Name, Store: store.Where, Now: now.UTC(), Windows: []inspectWindow{}}
	for i, w := range windows {
		r := &p.Rules[i]
		iw := inspectWindow{Rule: w.Rule, Key: w.Key, Limit: r.Limit, WindowMS: r.Window.Milliseconds(),
			TTLMS: w.TTL.Milliseconds(), Entries: []inspectEntry{}}
		if w.TTL < 0 {
			iw.TTLMS = -1
		}
		for _, e := range w.Entries {
			age := now.Sub(e.Time)
			counts := age < r.Window
			if counts {
				iw.Used += e.Cost
			}
			iw.Entries = append(iw.Entries, inspectEntry{Time: e.Time.UTC(), AgeMS: age.Milliseconds(), Cost: e.Cost, Counts: counts})
		}
		out.Windows = append(out.Windows, iw)
	}
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(out); err != nil {
			return exitUsage
		}
		return exitOK
	}
	fmt.Fprintf(stdout, "policy %q on %s, server time %s\n", p.Name, store.Where, now.UTC().Format(time.RFC3339Nano))
	for _, w := range out.Windows {
		ttl := "no key"
		switch {
		case w.TTLMS < 0:
			ttl = "no expiry"
		case w.TTLMS > 0:
			ttl = "expires in " + (time.Duration(w.TTLMS) * time.Millisecond).String()
		}
		fmt.Fprintf(stdout, "\nrule %s: %d/%d used per %v; %d entries; %s\n  key %s\n", w.Rule, w.Used, w.Limit,
			time.Duration(w.WindowMS)*time.Millisecond, len(w.Entries), ttl, w.Key)
		for j, e := range w.Entries {
			note := ""
			if !e.Counts {
				note = "  (outside the window; kept for the min gap)"
			}
			fmt.Fprintf(stdout, "  #%-4d age %-12v cost %d%s\n", j+1, (time.Duration(e.AgeMS) * time.Millisecond).String(), e.Cost, note)
		}
	}
	return exitOK
}
