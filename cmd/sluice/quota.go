package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/sluicerate/sluice/internal/launch"
	"github.com/sluicerate/sluice/internal/quota"
)

// quotaFlags binds the flags sluice credits and usage share, the key and
// where to read it, to w, t and attrs; --json sets f.
func quotaFlags(fs *flag.FlagSet, w *quota.Where, t *quota.UsageTarget, attrs *attrFlag, f *quota.Format) {
	fs.StringVar(&t.Policy, "policy", "", "the policy's `name` (required)")
	fs.StringVar(&t.Rule, "rule", "", "the rule's `name` (default: the policy's only one of its kind)")
	fs.Var(attrs, "attr", "an attribute `name=value` of the key; repeat for several")
	fs.StringVar(&w.Client.Server, "server", "", "call a sluice serve at this `URL` (its public or admin listener), instead of the store")
	fs.StringVar(&w.Client.Token, "token", os.Getenv(adminTokenEnv), "with --server, the admin `token` (default: $"+adminTokenEnv+")")
	fs.StringVar(&w.File, "config", "", "without --server, the configuration `file` that defines the policy")
	fs.StringVar(&w.Redis, "redis", "", "without --server, use Redis at this `URL` instead of the file's store")
	fs.BoolFunc("json", "print the answer as JSON", func(string) error { *f = quota.JSON; return nil })
	w.Open = launch.OpenStore
}

func runCredits(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	sub := ""
	if len(args) > 0 && args[0] != "-h" && args[0] != "--help" {
		sub, args = args[0], args[1:]
	}
	fs := newFlagSet("credits "+sub, stderr)
	fs.Usage = func() { fmt.Fprintf(stderr, "%s\n\nflags:\n", help("credits")); fs.PrintDefaults() }
	var w quota.Where
	var t quota.UsageTarget
	var attrs attrFlag
	var f quota.Format
	quotaFlags(fs, &w, &t, &attrs, &f)
	req := quota.CreditRequest{Op: sub}
	fs.Int64Var(&req.Amount, "amount", 0, "add and set: the `amount` to add (below 0: to take away) or to set")
	fs.StringVar(&req.ID, "id", "", "add and set: the change's `id`, such as an invoice number: a change with an id applied before changes nothing")
	switch {
	case sub == "" && len(args) == 0:
		fs.Usage()
		return exitUsage
	case sub == "":
		fs.Usage()
		return exitOK
	case sub != quota.OpGet && sub != quota.OpAdd && sub != quota.OpSet:
		return usageError(stderr, "credits", "unknown subcommand %q; use get, add or set", sub)
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	req.Policy, req.Rule, req.Attributes = t.Policy, t.Rule, attrs.values
	b, err := w.Credit(ctx, &req)
	if err == nil {
		err = b.Write(stdout, &req, f)
	}
	if err != nil {
		return usageError(stderr, "credits "+sub, "%v", err)
	}
	return exitOK
}

func runUsage(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("usage", stderr)
	fs.Usage = func() { fmt.Fprintf(stderr, "%s\n\nflags:\n", help("usage")); fs.PrintDefaults() }
	var w quota.Where
	var t quota.UsageTarget
	var attrs attrFlag
	var f quota.Format
	quotaFlags(fs, &w, &t, &attrs, &f)
	var at quota.TimeFlag
	fs.Var(&at, "at", "make the period of this `time` (RFC 3339) the current one (default: now)")
	fs.BoolFunc("csv", "print CSV: period_start,period_end,used,limit", func(string) error { f = quota.CSV; return nil })
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	t.Attributes, t.At = attrs.values, at.T
	u, err := w.Usage(ctx, t)
	if err == nil {
		err = u.Write(stdout, f)
	}
	if err != nil {
		return usageError(stderr, "usage", "%v", err)
	}
	return exitOK
}
