package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/sluicerate/sluice/internal/cliflag"
	"github.com/sluicerate/sluice/internal/overrides"
)

func runOverride(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, help("override"))
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	sub, args := args[0], args[1:]
	c := &overrideCmd{stdout: stdout, stderr: stderr}
	fs := newFlagSet("override "+sub, stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "%s\n\nflags of sluice override %s:\n", help("override"), sub)
		fs.PrintDefaults()
	}
	fs.StringVar(&c.client.Admin, "admin", cmp.Or(os.Getenv("SLUICE_ADMIN_URL"), "http://127.0.0.1:9464"), "the admin listener's `URL` (default: $SLUICE_ADMIN_URL, else http://127.0.0.1:9464)")
	fs.StringVar(&c.client.Token, "token", os.Getenv(adminTokenEnv), "the admin `token` (default: $"+adminTokenEnv+")")
	fs.BoolVar(&c.json, "json", false, "print the server's JSON answer")
	switch sub {
	case "set":
		return c.set(ctx, fs, args)
	case "list":
		if code, ok := parseFlags(fs, args); !ok {
			return code
		}
		var l overrides.Listing
		if code := c.call(ctx, http.MethodGet, "", nil, &l); code != exitOK || c.json {
			return code
		}
		l.WriteText(stdout)
		return exitOK
	case "get", "delete":
		return c.one(ctx, sub, fs, args)
	}
	return usageError(stderr, "override", "unknown subcommand %q; use set, list, get or delete", sub)
}

// overrideCmd is sluice override: a client of a server's
// /api/v1/overrides, and where it prints.
type overrideCmd struct {
	client         overrides.Client
	json           bool
	stdout, stderr io.Writer
}

// addTarget binds to o the flags that name a window: its policy or
// domain, rule and values.
func addTarget(fs *flag.FlagSet, o *overrides.Override) {
	fs.StringVar(&o.Policy, "policy", "", "the `policy` of the rule")
	fs.StringVar(&o.Domain, "domain", "", "or the Envoy `domain`")
	fs.StringVar(&o.Rule, "rule", "", "the `rule` (for a domain, the limit's descriptor path, as the admin view names it)")
	fs.Var((*cliflag.List)(&o.Values), "value", "a `value` of the window, or a prefix followed by '*'; one per attribute of the rule, in order")
}

func (c *overrideCmd) set(ctx context.Context, fs *flag.FlagSet, args []string) int {
	var o overrides.Override
	addTarget(fs, &o)
	var limit cliflag.OptionalInt
	fs.Var(&limit, "limit", "the window's new `limit`")
	fs.BoolVar(&o.Blocked, "blocked", false, "block the window: a limit of 0")
	fs.DurationVar((*time.Duration)(&o.Window), "window", 0, "the window's new `length` (default: the rule's)")
	fs.Int64Var(&o.Burst, "burst", 0, "the new `burst` of a gcra rule (default: the rule's)")
	fs.DurationVar((*time.Duration)(&o.MinGap), "min-gap", 0, "the new minimum `gap` of a log rule (default: the rule's)")
	fs.DurationVar((*time.Duration)(&o.For), "for", 0, "end the override this `long` from now")
	until := fs.String("until", "", "end the override at this `time` (RFC 3339)")
	fs.StringVar(&o.Reason, "reason", "", "why, for the next operator")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if n, ok := limit.Int(); ok {
		o.Limit = &n
	}
	if *until != "" {
		u, err := time.Parse(time.RFC3339, *until)
		if err != nil {
			return usageError(c.stderr, "override set", "--until %q: write a time as RFC 3339, such as 2026-05-01T18:00:00Z", *until)
		}
		o.Until = &u
	}
	body, err := json.Marshal(&o)
	if err != nil {
		return usageError(c.stderr, "override set", "%v", err)
	}
	var set overrides.Override
	if code := c.call(ctx, http.MethodPut, "", body, &set); code != exitOK || c.json {
		return code
	}
	fmt.Fprintf(c.stdout, "set %s: %s\n", set.ID, set.Summary())
	return exitOK
}

// one gets or deletes the override named by the argument, or by the
// target flags.
func (c *overrideCmd) one(ctx context.Context, sub string, fs *flag.FlagSet, args []string) int {
	var t overrides.Override
	addTarget(fs, &t)
	var id string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		id, args = args[0], args[1:]
	}
	if code, ok := parseArgs(fs, args); !ok {
		return code
	}
	switch rest := fs.Args(); {
	case len(rest) == 1 && id == "":
		id = rest[0] // the ID after the flags
	case len(rest) > 0:
		return usageError(c.stderr, "override "+sub, "unexpected argument %q; give one ID", rest[len(rest)-1])
	}
	switch {
	case id == "" && t.Rule != "" && (t.Policy == "") != (t.Domain == ""):
		id = overrides.ID(t.PolicyOf(), t.Rule, t.Values)
	case id == "":
		return usageError(c.stderr, "override "+sub, "name the override by its ID (sluice override list shows them), or by --policy or --domain, --rule and --value")
	}
	method := map[string]string{"get": http.MethodGet, "delete": http.MethodDelete}[sub]
	var o overrides.Override
	if code := c.call(ctx, method, "/"+url.PathEscape(id), nil, &o); code != exitOK || c.json {
		return code
	}
	if sub == "delete" {
		fmt.Fprintf(c.stdout, "deleted %s\n", id)
	} else {
		fmt.Fprintf(c.stdout, "%s: %s\n", o.ID, o.Summary())
	}
	return exitOK
}

// call calls the API and decodes its answer into v, or prints it as it
// came with --json. No such override is exit 1, any other failure exit 2.
func (c *overrideCmd) call(ctx context.Context, method, path string, body []byte, v any) int {
	b, err := c.client.Do(ctx, method, path, body)
	var apiErr *overrides.APIError
	switch {
	case errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusNotFound:
		fmt.Fprintf(c.stderr, "sluice override: %v\n", err)
		return exitDenied
	case err != nil:
		return usageError(c.stderr, "override", "%v", err)
	case c.json:
		c.stdout.Write(b)
		return exitOK
	}
	if err := json.Unmarshal(b, v); err != nil {
		return usageError(c.stderr, "override", "the server's answer: %v", err)
	}
	return exitOK
}
