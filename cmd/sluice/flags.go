package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/sluicerate/sluice/internal/cliflag"
)

// newFlagSet returns the flag set of subcommand name, printing to stderr.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parseFlags parses a subcommand's args. It reports false, with the exit
// code, when the command must stop: -h (exit 0, the help printed), a bad
// flag or a stray argument (exit 2, one line printed).
func parseFlags(fs *flag.FlagSet, args []string) (int, bool) {
	if code, ok := parseArgs(fs, args); !ok {
		return code, false
	}
	if fs.NArg() > 0 {
		return usageError(fs.Output(), fs.Name(), "unexpected argument %q; see sluice %s -h", fs.Arg(0), fs.Name()), false
	}
	return exitOK, true
}

// parseArgs parses args, leaving the arguments after the flags in fs.Args.
// On -h it prints fs.Usage and reports exit 0; on a bad flag one line, the
// closest flag for an unknown one and where the help is, and exit 2.
func parseArgs(fs *flag.FlagSet, args []string) (int, bool) {
	switch err := cliflag.Parse(fs, args); {
	case err == nil:
		return exitOK, true
	case errors.Is(err, flag.ErrHelp):
		return exitOK, false
	default:
		return usageError(fs.Output(), fs.Name(), "%v", err), false
	}
}

// usageError prints "sluice NAME: message" and returns the usage exit code.
func usageError(stderr io.Writer, name, format string, a ...any) int {
	fmt.Fprintf(stderr, "sluice "+name+": "+format+"\n", a...)
	return exitUsage
}

// attrFlag collects repeated --attr name=value flags, in order.
type attrFlag struct {
	keys   []string
	values map[string]string
}

func (a *attrFlag) String() string {
	var parts []string
	for _, k := range a.keys {
		parts = append(parts, k+"="+a.values[k])
	}
	return strings.Join(parts, ",")
}

func (a *attrFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("attribute %q is not NAME=VALUE", s)
	}
	if a.values == nil {
		a.values = map[string]string{}
	}
	if _, dup := a.values[k]; dup {
		return fmt.Errorf("attribute %q given twice", k)
	}
	a.keys = append(a.keys, k)
	a.values[k] = v
	return nil
}
