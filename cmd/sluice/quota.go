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

// quotaCommand is what sluice credits and usage share: their flag set, with
// the flags that name the key (target and attrs) and where to read it
// (where), and the output format that --json sets.
type quotaCommand struct {
	fs     *flag.FlagSet
	where  quota.Where
	target quota.UsageTarget
	attrs  attrFlag
	format quota.Format
}

// newQuotaCommand returns the shared flags of the command name, whose -h
// prints the help text topic.
func newQuotaCommand(name, topic string, stderr io.Writer) *quotaCommand {
	q := &quotaCommand{fs: newFlagSet(name, stderr)}
	fs, w, t := q.fs, &q.where, &q.target
	fs.Usage = func() { fmt.Fprintf(stderr, "%s\n\nflags:\n", help(topic)); fs.PrintDefaults() }
	fs.StringVar(&t.Policy, "policy", "", "the policy's `name` (required)")
	fs.StringVar(&t.Rule, "rule", "", "the rule's `name` (default: the policy's only one of its kind)")
	fs.Var(&q.attrs, "attr", "an attribute `name=value` of the key; repeat for several")
	fs.StringVar(&w.Client.Server, "server", "", "call a sluice serve at this `URL` (its public or admin listener), instead of the store")
	fs.StringVar(&w.Client.Token, "token", os.Getenv(adminTokenEnv), "with --server, the admin `token` (default: $"+adminTokenEnv+")")
	fs.StringVar(&w.File, "config", "", "without --server, the configuration `file` that defines the policy")
	fs.StringVar(&w.Redis, "redis", "", "without --server, use Redis at this `URL` instead of the file's store")
	fs.BoolFunc("json", "print the answer as JSON", func(string) error { q.format = quota.JSON; return nil })
	w.Open = launch.OpenStore
	return q
}

func runCredits(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	sub := ""
	if len(args) > 0 && args[0] != "-h" && args[0] != "--help" {
		sub, args = args[0], args[1:]
	}
	q := newQuotaCommand("credits "+sub, "credits", stderr)
	req := quota.CreditRequest{Op: sub}
	q.fs.Int64Var(&req.Amount, "amount", 0, "add and set: the `amount` to add (below 0: to take away) or to set")
	q.fs.StringVar(&req.ID, "id", "", "add and set: the change's `id`, such as an invoice number: a change with an id applied before changes nothing")
	switch {
	case sub == "" && len(args) == 0:
		q.fs.Usage()
		return exitUsage
	case sub == "":
		q.fs.Usage()
		return exitOK
	case sub != quota.OpGet && sub != quota.OpAdd && sub != quota.OpSet:
		return usageError(stderr, "credits", "unknown subcommand %q; use get, add or set", sub)
	}
	if code, ok := parseFlags(q.fs, args); !ok {
		return code
	}
	req.Policy, req.Rule, req.Attributes = q.target.Policy, q.target.Rule, q.attrs.values
	b, err := q.where.Credit(ctx, &req)
	if err == nil {
		err = b.Write(stdout, &req, q.format)
	}
	if err != nil {
		return usageError(stderr, "credits "+sub, "%v", err)
	}
	return exitOK
}

func runUsage(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	q := newQuotaCommand("usage", "usage", stderr)
	var at quota.TimeFlag
	q.fs.Var(&at, "at", "make the period of this `time` (RFC 3339) the current one (default: now)")
	q.fs.BoolFunc("csv", "print CSV: period_start,period_end,used,limit", func(string) error { q.format = quota.CSV; return nil })
	if code, ok := parseFlags(q.fs, args); !ok {
		return code
	}
	q.target.Attributes, q.target.At = q.attrs.values, at.T
	u, err := q.where.Usage(ctx, q.target)
	if err == nil {
		err = u.Write(stdout, q.format)
	}
	if err != nil {
		return usageError(stderr, "usage", "%v", err)
	}
	return exitOK
}
