package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"path/filepath"
	"strconv"
	"strings"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/envoy"
	"github.com/sluicerate/sluice/internal/launch"
	"github.com/sluicerate/sluice/internal/server"
)

// envoyFlags are the flags of serve and check for envoyproxy/ratelimit's
// configuration directory.
type envoyFlags struct {
	dir      *string
	counting *string
	headers  *string
	shadow   *bool
	merge    *bool

	// header names from LIMIT_*_HEADER
	limitName, remainingName, resetName string
}

// addEnvoyFlags defines the Envoy flags on fs; serve has them all, check
// the directory and the counting.
// envoyConfigHelp is --envoy-config's help for serve (true) and check.
var envoyConfigHelp = map[bool]string{
	true:  "serve this `directory` of envoyproxy/ratelimit configuration files (its *.yaml files, as they are) on Envoy's rate-limit service and /json",
	false: "validate this `directory` of envoyproxy/ratelimit configuration files (its *.yaml files), or decide a request against it with --domain",
}

func addEnvoyFlags(fs *flag.FlagSet, serve bool) *envoyFlags {
	f := &envoyFlags{
		dir: fs.String("envoy-config", "", envoyConfigHelp[serve]),
		counting: fs.String("envoy-counting", "all-or-nothing",
			"what a request's hits count in: all-or-nothing (every matched limit or none) or per-descriptor (envoyproxy/ratelimit's: every matched limit, over or not)"),
		merge: fs.Bool("envoy-merge-domains", false, "let several files configure one domain (MERGE_DOMAIN_CONFIG)"),
	}
	if serve {
		f.headers = fs.String("envoy-headers", "", "response headers for Envoy to add: ratelimit (IETF RateLimit), x-ratelimit (x-ratelimit-limit, -remaining, -reset), or both, comma-separated (default none)")
		f.shadow = fs.Bool("envoy-shadow-mode", false, "answer OK to every request whatever its limits say, reporting them still (SHADOW_MODE)")
	} else {
		f.headers, f.shadow = new(string), new(bool)
	}
	return f
}

// options returns the server's Envoy options from the flags.
func (f *envoyFlags) options() (server.EnvoyOptions, error) {
	o := server.EnvoyOptions{Load: envoy.LoadOptions{MergeDomains: *f.merge}}
	switch *f.counting {
	case "all-or-nothing":
	case "per-descriptor":
		o.Decide.Counting = envoy.PerDescriptor
	default:
		return o, fmt.Errorf("--envoy-counting %q: use all-or-nothing or per-descriptor", *f.counting)
	}
	for _, h := range strings.Split(*f.headers, ",") {
		switch strings.TrimSpace(strings.ToLower(h)) {
		case "", "none":
		case "ratelimit":
			o.Decide.Headers.RateLimit = true
		case "x-ratelimit":
			o.Decide.Headers.XRateLimit = true
		case "both":
			o.Decide.Headers.RateLimit, o.Decide.Headers.XRateLimit = true, true
		default:
			return o, fmt.Errorf("--envoy-headers %q: use ratelimit, x-ratelimit or both", h)
		}
	}
	o.Decide.Headers.LimitName, o.Decide.Headers.RemainingName, o.Decide.Headers.ResetName = f.limitName, f.remainingName, f.resetName
	o.Decide.ShadowMode = *f.shadow
	return o, nil
}

// applyEnvoyEnv gives the flags of serve that the command line leaves out
// the values of envoyproxy/ratelimit's environment variables, so that a
// deployment of that service runs sluice unchanged:
//
//	RUNTIME_ROOT, RUNTIME_SUBDIRECTORY, RUNTIME_APPDIRECTORY  --envoy-config ROOT/SUB/APP (APP default "config")
//	PORT, HOST                                                --http HOST:PORT
//	GRPC_PORT, GRPC_HOST                                      --grpc HOST:PORT
//	LOG_LEVEL, LOG_FORMAT                                     --log-level, --log-format
//	REDIS_URL, REDIS_SOCKET_TYPE, REDIS_TYPE, REDIS_AUTH,
//	REDIS_TLS                                                 --redis
//	SHADOW_MODE                                               --envoy-shadow-mode
//	STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT                   --envoy-counting (false: per-descriptor)
//	MERGE_DOMAIN_CONFIG                                       --envoy-merge-domains
//	LIMIT_RESPONSE_HEADERS_ENABLED, LIMIT_LIMIT_HEADER,
//	LIMIT_REMAINING_HEADER, LIMIT_RESET_HEADER                --envoy-headers x-ratelimit, with those names
//
// A flag given on the command line wins over its variable.
func applyEnvoyEnv(fs *flag.FlagSet, f *envoyFlags, getenv func(string) string) error {
	given := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	set := func(name, value string) error {
		if given[name] || value == "" {
			return nil
		}
		if err := fs.Set(name, value); err != nil {
			return fmt.Errorf("--%s from the environment: %v", name, err)
		}
		return nil
	}
	boolean := func(name string) (bool, bool, error) {
		v := getenv(name)
		if v == "" {
			return false, false, nil
		}
		b, err := strconv.ParseBool(v)
		if err != nil {
			return false, false, fmt.Errorf("%s=%q: use true or false", name, v)
		}
		return b, true, nil
	}
	// With CONFIG_TYPE=GRPC_XDS_SOTW the configuration comes from a
	// control plane (applyDeployEnv), and RUNTIME_ROOT, which Envoy
	// Gateway sets all the same, names no directory to read.
	if root := getenv("RUNTIME_ROOT"); root != "" && !strings.EqualFold(getenv("CONFIG_TYPE"), "GRPC_XDS_SOTW") {
		app := getenv("RUNTIME_APPDIRECTORY")
		if app == "" {
			app = "config"
		}
		if err := set("envoy-config", filepath.Join(root, getenv("RUNTIME_SUBDIRECTORY"), app)); err != nil {
			return err
		}
	}
	if p := getenv("PORT"); p != "" {
		if err := set("http", net.JoinHostPort(getenv("HOST"), p)); err != nil {
			return err
		}
	}
	if p := getenv("GRPC_PORT"); p != "" {
		if err := set("grpc", net.JoinHostPort(getenv("GRPC_HOST"), p)); err != nil {
			return err
		}
	}
	if lv := strings.ToLower(getenv("LOG_LEVEL")); lv != "" {
		switch lv {
		case "trace":
			lv = "debug"
		case "warning":
			lv = "warn"
		case "fatal", "panic":
			lv = "error"
		}
		if err := set("log-level", lv); err != nil {
			return err
		}
	}
	if lf := strings.ToLower(getenv("LOG_FORMAT")); lf != "" {
		if err := set("log-format", lf); err != nil {
			return err
		}
	}
	if u := getenv("REDIS_URL"); u != "" {
		url, err := envoyRedisURL(u, getenv)
		if err != nil {
			return err
		}
		if err := set("redis", url); err != nil {
			return err
		}
	}
	if b, ok, err := boolean("SHADOW_MODE"); err != nil {
		return err
	} else if ok && f.shadow != nil && !given["envoy-shadow-mode"] {
		*f.shadow = b
	}
	if b, ok, err := boolean("STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT"); err != nil {
		return err
	} else if ok && !b {
		if err := set("envoy-counting", "per-descriptor"); err != nil {
			return err
		}
	}
	if b, ok, err := boolean("MERGE_DOMAIN_CONFIG"); err != nil {
		return err
	} else if ok && !given["envoy-merge-domains"] {
		*f.merge = b
	}
	if b, ok, err := boolean("LIMIT_RESPONSE_HEADERS_ENABLED"); err != nil {
		return err
	} else if ok && b && f.headers != nil && !given["envoy-headers"] {
		*f.headers = "x-ratelimit"
		// envoyproxy/ratelimit's default names for these headers.
		f.limitName, f.remainingName, f.resetName = "RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"
		if v := getenv("LIMIT_LIMIT_HEADER"); v != "" {
			f.limitName = v
		}
		if v := getenv("LIMIT_REMAINING_HEADER"); v != "" {
			f.remainingName = v
		}
		if v := getenv("LIMIT_RESET_HEADER"); v != "" {
			f.resetName = v
		}
	}
	return nil
}

// envoyRedisURL turns envoyproxy/ratelimit's REDIS_URL ("host:port", a
// comma-separated list for a cluster, "master,host:port,..." for Sentinel,
// or a redis:// URL) with REDIS_SOCKET_TYPE, REDIS_TYPE, REDIS_AUTH and
// REDIS_TLS into sluice's --redis URL.
func envoyRedisURL(u string, getenv func(string) string) (string, error) {
	if strings.HasPrefix(u, "redis://") || strings.HasPrefix(u, "rediss://") {
		return u, nil
	}
	if st := strings.ToLower(getenv("REDIS_SOCKET_TYPE")); st != "" && st != "tcp" {
		return "", fmt.Errorf("REDIS_SOCKET_TYPE=%q: sluice connects to Redis over TCP; set REDIS_SOCKET_TYPE=tcp and REDIS_URL=host:port", st)
	}
	scheme := "redis"
	if tlsOn, _ := strconv.ParseBool(getenv("REDIS_TLS")); tlsOn {
		scheme = "rediss"
	}
	auth := ""
	if a := getenv("REDIS_AUTH"); a != "" {
		// REDIS_AUTH is "password" or "user:password".
		user, pass, ok := strings.Cut(a, ":")
		if !ok {
			user, pass = "", a
		}
		auth = urlUserinfo(user, pass) + "@"
	}
	parts := strings.Split(u, ",")
	switch t := strings.ToLower(getenv("REDIS_TYPE")); t {
	case "", "single":
		if len(parts) > 1 {
			return "", fmt.Errorf("REDIS_URL=%q names several servers; set REDIS_TYPE=cluster or sentinel", u)
		}
		return scheme + "://" + auth + u, nil
	case "cluster":
		url := scheme + "://" + auth + parts[0] + "?mode=cluster"
		for _, p := range parts[1:] {
			url += "&addr=" + p
		}
		return url, nil
	case "sentinel":
		if len(parts) < 2 {
			return "", fmt.Errorf("REDIS_URL=%q: with REDIS_TYPE=sentinel write master_name,host:port[,host:port...]", u)
		}
		url := scheme + "://" + auth + parts[1] + "?mode=sentinel&master=" + parts[0]
		for _, p := range parts[2:] {
			url += "&addr=" + p
		}
		return url, nil
	default:
		return "", fmt.Errorf("REDIS_TYPE=%q: use single, cluster or sentinel", t)
	}
}

// urlUserinfo escapes a user and password for a URL.
func urlUserinfo(user, pass string) string {
	esc := func(s string) string {
		var b strings.Builder
		for i := 0; i < len(s); i++ {
			c := s[i]
			if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0 {
				b.WriteByte(c)
			} else {
				fmt.Fprintf(&b, "%%%02X", c)
			}
		}
		return b.String()
	}
	return esc(user) + ":" + esc(pass)
}

// descriptorFlag collects repeated --descriptor k=v[,k2=v2] flags.
type descriptorFlag [][][2]string

func (d *descriptorFlag) String() string { return fmt.Sprint(*d) }

func (d *descriptorFlag) Set(s string) error {
	var entries [][2]string
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return fmt.Errorf("entry %q is not KEY=VALUE; write a descriptor as k=v[,k2=v2]", kv)
		}
		entries = append(entries, [2]string{k, v})
	}
	*d = append(*d, entries)
	return nil
}

// checkEnvoy is sluice check --envoy-config: the statuses of one request,
// decided without recording.
func checkEnvoy(ctx context.Context, ef *envoyFlags, domain string, descs descriptorFlag, hits uint32, redisURL string, asJSON bool, stdout, stderr io.Writer) int {
	fail := func(format string, a ...any) int { return usageError(stderr, "check", format, a...) }
	switch {
	case domain == "":
		return fail("--domain D is required with --envoy-config")
	case len(descs) == 0:
		return fail("--descriptor k=v[,k2=v2] is required with --envoy-config; repeat it for several descriptors")
	}
	opts, err := ef.options()
	if err != nil {
		return fail("%v", err)
	}
	cfg, err := envoy.Load(*ef.dir, opts.Load)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	for _, n := range cfg.Notes {
		fmt.Fprintln(stderr, "note:", n)
	}
	st, err := launch.Open(nil, redisURL)
	if err != nil {
		return fail("%v", err)
	}
	defer st.Close()
	opts.Decide.DryRun = true
	step := envoyRequest(domain, descs, hits)
	res, err := cfg.Decide(ctx, sluice.NewLimiter(st.Store, sluice.Config{}), step, opts.Decide)
	if err != nil {
		return fail("%v", err)
	}
	out := res.Response
	if asJSON {
		b, err := protojson.Marshal(out)
		if err != nil {
			return fail("%v", err)
		}
		fmt.Fprintln(stdout, string(b))
	} else {
		fmt.Fprintf(stdout, "domain %q on %s: %s\n", domain, st.Where, out.GetOverallCode())
		for i, s := range out.GetStatuses() {
			var kv []string
			for _, e := range descs[i] {
				kv = append(kv, e[0]+"="+e[1])
			}
			fmt.Fprintf(stdout, "  %-32s %s", strings.Join(kv, ","), s.GetCode())
			switch l := s.GetCurrentLimit(); {
			case l != nil:
				unit := l.GetUnit().String()
				if m := l.GetUnitMultiplier().GetValue(); m > 1 {
					unit = fmt.Sprintf("%d %s", m, unit)
				}
				fmt.Fprintf(stdout, "  %d per %s, %d remaining, reset in %ds", l.GetRequestsPerUnit(), unit, s.GetLimitRemaining(), s.GetDurationUntilReset().GetSeconds())
				if l.GetName() != "" {
					fmt.Fprintf(stdout, " (%s)", l.GetName())
				}
			case s.GetLimitRemaining() == math.MaxUint32:
				fmt.Fprint(stdout, "  unlimited")
			default:
				fmt.Fprint(stdout, "  no limit applies")
			}
			fmt.Fprintln(stdout)
		}
	}
	if out.GetOverallCode() == rlsv3.RateLimitResponse_OVER_LIMIT {
		return exitDenied
	}
	return exitOK
}

// envoyRequest builds a request of descriptors.
func envoyRequest(domain string, descs descriptorFlag, hits uint32) *rlsv3.RateLimitRequest {
	req := &rlsv3.RateLimitRequest{Domain: domain, HitsAddend: hits}
	for _, d := range descs {
		desc := &ratelimitv3.RateLimitDescriptor{}
		for _, e := range d {
			desc.Entries = append(desc.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: e[0], Value: e[1]})
		}
		req.Descriptors = append(req.Descriptors, desc)
	}
	return req
}
