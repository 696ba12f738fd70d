// Command sluice is sluice's command line: a demo of hierarchical limits, and
// the tools to run and inspect a sluice deployment. "sluice --help" lists the
// commands and "sluice COMMAND -h" a command's flags (docs/cli.md has them
// all). Started under the name ratelimit (the container image's
// /bin/ratelimit, envoyproxy/ratelimit's command), sluice is sluice serve.
//
// Exit codes: 0 ok, 1 denied (check), 2 usage or configuration error.
package main

import (
	"context"
	"embed"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
)

// command is one subcommand of sluice.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// Exit codes.
const (
	exitOK     = 0
	exitDenied = 1
	exitUsage  = 2
)

func commands() []command {
	return []command{
		{"demo", "run the notifier scenario: a global cap of 10 over a per-category cap of 3 per minute", runDemo},
		{"serve", "serve a configuration file's policies over HTTP, gRPC and Envoy's rate-limit API", runServe},
		{"check", "validate a configuration file, or decide one request against it without recording it", runCheck},
		{"inspect", "show a policy's Redis windows: entries, ages and time to live", runInspect},
		{"reserve", "reserve slots on a schedule and print each one's delay", runReserve},
		{"override", "set, list, get or delete runtime overrides of limits on a running sluice serve", runOverride},
		{"credits", "get, add to or set a credits rule's balance for a key, idempotently", runCredits},
		{"usage", "print a calendar quota's totals by period for a key, as a table or CSV", runUsage},
		{"bench", "drive a store or a server with a workload; print throughput and a latency histogram", runBench},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	args := os.Args[1:]
	if filepath.Base(os.Args[0]) == "ratelimit" {
		// envoyproxy/ratelimit's command, as its deployments start it
		// (the container image's /bin/ratelimit): sluice serve, from its
		// environment.
		args = append([]string{"serve"}, args...)
	}
	code := run(ctx, args, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "sluice: unknown command %q\n\n", args[0])
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: sluice <command> [flags]\n\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'sluice <command> -h' for a command's flags.")
}

// helpFiles are the help texts of the commands that keep theirs in a file.
//
//go:embed help
var helpFiles embed.FS

// help is the help text of command name, help/NAME.txt, without its last
// newline. TestHelpListsEveryCommand checks that each command's is there.
func help(name string) string {
	b, _ := helpFiles.ReadFile("help/" + name + ".txt")
	return strings.TrimSuffix(string(b), "\n")
}
