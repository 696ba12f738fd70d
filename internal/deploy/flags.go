package deploy

import (
	"flag"
	"fmt"
	"strings"
	"time"
)

// Flags are the deploy flags of sluice serve (or the Envoy flags of sluice
// check) and what only the environment sets. Each flag is a row of the
// table (table.go) with the variables that stand for it. Create them with
// AddFlags or AddCheckFlags; then Apply the environment and Resolve the
// configuration file over them.
type Flags struct {
	envoyDir, counting, headers string
	shadow, merge, calendar     bool

	dynMeta, quota, requireDomain bool

	xds, xdsNode, xdsTLS string
	xdsForce             bool

	httpTLS, grpcTLS, adminTLS, redisTLS string

	metricsAddr, metricsPath string

	tracing                          bool
	tracingEndpoint, tracingProtocol string
	tracingRate                      float64

	maxInFlight, grpcMaxStreams  int
	requestTimeout, storeTimeout time.Duration
	grpcMaxAge, grpcMaxAgeGrace  time.Duration

	env env // what only the environment sets
}

// env is what only envoyproxy/ratelimit's environment sets.
type env struct {
	limitName, remainingName, resetName   string // LIMIT_*_HEADER
	nodeMetadata, headers                 map[string]string
	connectRetry, backoffInit, backoffMax time.Duration
	backoffRandom                         float64
	noJitter                              bool
	maxMessage                            int
	serviceName, namespace, instance      string

	// notes are what the environment asks for that sluice takes but does
	// otherwise, logged at start.
	notes []string
}

// AddFlags defines serve's deploy flags on fs: every flag of the table.
func AddFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{}
	for _, v := range f.table() {
		if v.declare != nil {
			v.declare(fs, v.Flag, v.usage)
		}
	}
	return f
}

// AddCheckFlags defines check's Envoy flags on fs: the directory, the
// counting and the merging of domains.
func AddCheckFlags(fs *flag.FlagSet) *Flags {
	f := &Flags{}
	for _, v := range f.table() {
		if v.declare != nil && v.checkUsage != "" {
			v.declare(fs, v.Flag, v.checkUsage)
		}
	}
	return f
}

// EnvoyDir is --envoy-config: the directory of envoyproxy/ratelimit
// configuration files, "" for none.
func (f *Flags) EnvoyDir() string { return f.envoyDir }

// Notes are what the environment asks for that sluice takes but does
// otherwise, for the log at start.
func (f *Flags) Notes() []string { return f.env.notes }

// The flags' declarations, each bound to its field.

func stringFlag(p *string, def string) func(fs *flag.FlagSet, name, usage string) {
	return func(fs *flag.FlagSet, name, usage string) { fs.StringVar(p, name, def, usage) }
}

func boolFlag(p *bool) func(fs *flag.FlagSet, name, usage string) {
	return func(fs *flag.FlagSet, name, usage string) { fs.BoolVar(p, name, false, usage) }
}

func intFlag(p *int) func(fs *flag.FlagSet, name, usage string) {
	return func(fs *flag.FlagSet, name, usage string) { fs.IntVar(p, name, 0, usage) }
}

func floatFlag(p *float64, def float64) func(fs *flag.FlagSet, name, usage string) {
	return func(fs *flag.FlagSet, name, usage string) { fs.Float64Var(p, name, def, usage) }
}

func durationFlag(p *time.Duration) func(fs *flag.FlagSet, name, usage string) {
	return func(fs *flag.FlagSet, name, usage string) { fs.DurationVar(p, name, 0, usage) }
}

// spec parses a flag's comma-separated key=value list, whose keys must be
// among valid; a bare key is "true".
func spec(flagName, s string, valid ...string) (map[string]string, error) {
	out := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			v = "true"
		}
		known := false
		for _, name := range valid {
			known = known || name == k
		}
		if !known {
			return nil, fmt.Errorf("--%s: unknown key %q in %q; use %s", flagName, k, s, strings.Join(valid, ", "))
		}
		out[k] = v
	}
	return out, nil
}
