package main

import (
	"bytes"
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
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sluicerate/sluice/internal/overrides"
)

// overrideUsage is sluice override's help.
const overrideUsage = `usage: sluice override set --policy P | --domain D --rule R [--value V ...] (--limit N | --blocked) [flags]
       sluice override list [--json]
       sluice override get ID [--json]
       sluice override delete ID | --policy P | --domain D --rule R [--value V ...]

Changes limits at runtime, through a running sluice serve's admin listener
(--admin, default http://127.0.0.1:9464, with the token in
$SLUICE_ADMIN_TOKEN or --token). Overrides live in the store, so every
instance on it applies a change within its --override-poll (250 ms by
default), and they outlast restarts.

set gives one window of a rule other figures: --value gives the values of
the rule's attributes in its by order (for an Envoy domain, the
descriptor's values in entry order), each the value or a prefix followed
by '*'. A runtime override comes before the rule's file overrides, which
come before the rule. --for or --until ends it; --reason says why.

  sluice override set --policy api --rule per-user --value acme --limit 5000 --for 24h --reason "launch"
  sluice override set --policy api --rule per-user --value 'premium_*' --limit 1000
  sluice override set --domain rl --rule user --value bot_7 --blocked --for 1h
  sluice override delete api:per-user:acme

Exit status: 0 done, 1 no such override (get, delete), 2 usage or failure.`

func runOverride(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprintln(stderr, overrideUsage)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	sub, args := args[0], args[1:]
	c := &overrideClient{stdout: stdout, stderr: stderr}
	fs := newFlagSet("override "+sub, stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "%s\n\nflags of sluice override %s:\n", overrideUsage, sub)
		fs.PrintDefaults()
	}
	fs.StringVar(&c.admin, "admin", cmp.Or(os.Getenv("SLUICE_ADMIN_URL"), "http://127.0.0.1:9464"), "the admin listener's `URL` (default: $SLUICE_ADMIN_URL, else http://127.0.0.1:9464)")
	fs.StringVar(&c.token, "token", os.Getenv(adminTokenEnv), "the admin `token` (default: $"+adminTokenEnv+")")
	fs.BoolVar(&c.json, "json", false, "print the server's JSON answer")
	switch sub {
	case "set":
		return c.set(ctx, fs, args)
	case "list":
		if code, ok := parseFlags(fs, args); !ok {
			return code
		}
		return c.list(ctx)
	case "get", "delete":
		return c.one(ctx, sub, fs, args)
	}
	return usageError(stderr, "override", "unknown subcommand %q; use set, list, get or delete", sub)
}

// overrideClient calls a server's /api/v1/overrides.
type overrideClient struct {
	admin, token   string
	json           bool
	stdout, stderr io.Writer
}

// target are the flags that name a window: its policy or domain, rule and
// values.
type target struct {
	policy, domain, rule *string
	values               valuesFlag
}

func addTarget(fs *flag.FlagSet) *target {
	t := &target{
		policy: fs.String("policy", "", "the `policy` of the rule"),
		domain: fs.String("domain", "", "or the Envoy `domain`"),
		rule:   fs.String("rule", "", "the `rule` (for a domain, the limit's descriptor path, as the admin view names it)"),
	}
	fs.Var(&t.values, "value", "a `value` of the window, or a prefix followed by '*'; one per attribute of the rule, in order")
	return t
}

// valuesFlag collects repeated --value flags, in order.
type valuesFlag []string

func (v *valuesFlag) String() string     { return strings.Join(*v, ",") }
func (v *valuesFlag) Set(s string) error { *v = append(*v, s); return nil }

func (c *overrideClient) set(ctx context.Context, fs *flag.FlagSet, args []string) int {
	t := addTarget(fs)
	var limit optionalInt
	fs.Var(&limit, "limit", "the window's new `limit`")
	blocked := fs.Bool("blocked", false, "block the window: a limit of 0")
	window := fs.Duration("window", 0, "the window's new `length` (default: the rule's)")
	burst := fs.Int64("burst", 0, "the new `burst` of a gcra rule (default: the rule's)")
	minGap := fs.Duration("min-gap", 0, "the new minimum `gap` of a log rule (default: the rule's)")
	forD := fs.Duration("for", 0, "end the override this `long` from now")
	until := fs.String("until", "", "end the override at this `time` (RFC 3339)")
	reason := fs.String("reason", "", "why, for the next operator")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	o := overrides.Override{Policy: *t.policy, Domain: *t.domain, Rule: *t.rule, Values: []string(t.values), Blocked: *blocked,
		Window: overrides.Duration(*window), Burst: *burst, MinGap: overrides.Duration(*minGap), For: overrides.Duration(*forD), Reason: *reason}
	if limit.set {
		o.Limit = &limit.n
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
	if code := c.call(ctx, http.MethodPut, "", body, &set); code != exitOK {
		return code
	}
	if !c.json {
		fmt.Fprintf(c.stdout, "set %s: %s\n", set.ID, summary(&set))
	}
	return exitOK
}

// summary is one line of what o does.
func summary(o *overrides.Override) string {
	var b strings.Builder
	if o.Limit != nil && *o.Limit == 0 {
		b.WriteString("blocked")
	} else if o.Limit != nil {
		fmt.Fprintf(&b, "limit %d", *o.Limit)
	}
	if o.Window > 0 {
		fmt.Fprintf(&b, " per %v", time.Duration(o.Window))
	}
	if o.Burst > 0 {
		fmt.Fprintf(&b, ", burst %d", o.Burst)
	}
	if o.MinGap > 0 {
		fmt.Fprintf(&b, ", min gap %v", time.Duration(o.MinGap))
	}
	if o.Until != nil {
		fmt.Fprintf(&b, ", until %s", o.Until.UTC().Format(time.RFC3339))
	}
	if o.SetBy != "" {
		fmt.Fprintf(&b, "; set by %s at %s", o.SetBy, o.SetAt.UTC().Format(time.RFC3339))
	}
	if o.Reason != "" {
		fmt.Fprintf(&b, " (%s)", o.Reason)
	}
	return b.String()
}

func (c *overrideClient) list(ctx context.Context) int {
	var l struct {
		overrides.Listing
		Overrides []struct {
			overrides.Override
			Problem string `json:"problem"`
			Active  bool   `json:"active"`
			Expired bool   `json:"expired"`
		} `json:"overrides"`
	}
	if code := c.call(ctx, http.MethodGet, "", nil, &l); code != exitOK || c.json {
		return code
	}
	if l.Stale {
		fmt.Fprintf(c.stdout, "the store does not answer (%s); the server applies the set it read last\n", l.Error)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATE\tOVERRIDE")
	for _, o := range l.Overrides {
		state := "active"
		switch {
		case o.Problem != "":
			state = "not applied: " + o.Problem
		case o.Expired:
			state = "ended"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", o.ID, state, summary(&o.Override))
	}
	tw.Flush()
	fmt.Fprintf(c.stdout, "%d overrides (this server holds up to %d)\n", len(l.Overrides), l.Max)
	return exitOK
}

// one gets or deletes the override named by the argument, or by the
// target flags.
func (c *overrideClient) one(ctx context.Context, sub string, fs *flag.FlagSet, args []string) int {
	t := addTarget(fs)
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
	case id == "" && *t.rule != "" && (*t.policy == "") != (*t.domain == ""):
		o := overrides.Override{Policy: *t.policy, Domain: *t.domain}
		id = overrides.ID(o.PolicyOf(), *t.rule, t.values)
	case id == "":
		return usageError(c.stderr, "override "+sub, "name the override by its ID (sluice override list shows them), or by --policy or --domain, --rule and --value")
	}
	method := http.MethodGet
	if sub == "delete" {
		method = http.MethodDelete
	}
	var o overrides.Override
	if code := c.call(ctx, method, "/"+url.PathEscape(id), nil, &o); code != exitOK || c.json {
		return code
	}
	if sub == "delete" {
		fmt.Fprintf(c.stdout, "deleted %s\n", id)
	} else {
		fmt.Fprintf(c.stdout, "%s: %s\n", o.ID, summary(&o))
	}
	return exitOK
}

// call sends a request to /api/v1/overrides+path and decodes a 200 answer
// into v (printing it as it came with --json). A 404 is exit 1, any other
// failure exit 2, with the server's problem.
func (c *overrideClient) call(ctx context.Context, method, path string, body []byte, v any) int {
	base := c.admin
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(base, "/")+"/api/v1/overrides"+path, bytes.NewReader(body))
	if err != nil {
		return usageError(c.stderr, "override", "--admin %q: %v", c.admin, err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		return usageError(c.stderr, "override", "%v; is sluice serve's admin listener at %s? (--admin URL)", err, c.admin)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if res.StatusCode != http.StatusOK {
		var p struct{ Detail string }
		if json.Unmarshal(b, &p) != nil || p.Detail == "" {
			p.Detail = strings.TrimSpace(string(b))
		}
		if res.StatusCode == http.StatusUnauthorized {
			p.Detail = "the admin listener requires a token: set SLUICE_ADMIN_TOKEN (or --token) to one of its tokens"
		}
		fmt.Fprintf(c.stderr, "sluice override: %s: %s\n", res.Status, p.Detail)
		if res.StatusCode == http.StatusNotFound {
			return exitDenied
		}
		return exitUsage
	}
	if c.json {
		c.stdout.Write(b)
		return exitOK
	}
	if err := json.Unmarshal(b, v); err != nil {
		return usageError(c.stderr, "override", "the server's answer: %v", err)
	}
	return exitOK
}

// optionalInt is a number flag that may be left out: no default to show.
type optionalInt struct {
	n   int64
	set bool
}

func (o *optionalInt) String() string {
	if o == nil || !o.set {
		return ""
	}
	return strconv.FormatInt(o.n, 10)
}

func (o *optionalInt) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return errors.New("not a whole number")
	}
	o.n, o.set = n, true
	return nil
}
