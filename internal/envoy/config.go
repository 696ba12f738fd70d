// Package envoy serves envoyproxy/ratelimit's model on sluice: it loads a
// directory of that service's YAML configuration files unchanged (domains,
// nested descriptors with keys, values and wildcard values, rate limits with
// a unit and requests per unit, unlimited, replaces, shadow_mode and the
// rest), matches each descriptor of a rate-limit request against its
// domain's tree as that service does, and decides all the matched limits of
// a request in one call to sluice.Limiter.Decide: exact sliding windows,
// recorded in all of them or in none.
//
// Beyond the upstream format a file may give a limit any length (window:
// 90s, or unit_multiplier), several limits per descriptor (rate_limits: a
// list), and an algorithm (algorithm: log, gcra or sliding-counter).
//
// docs/envoy.md lists every difference from envoyproxy/ratelimit.
package envoy

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/config"
)

// MaxFileSize is the largest configuration file Load reads.
const MaxFileSize = 4 << 20

// Config is a loaded, validated directory of envoyproxy/ratelimit
// configuration files. It is never modified once loaded and is safe for
// concurrent use.
type Config struct {
	// Dir is the directory as given to Load ("" for Parse).
	Dir string

	// Files are the files read, in the order they were loaded.
	Files []string

	// Notes are what the files ask for that sluice reads but does not
	// honour as envoyproxy/ratelimit does, one line each with its place in
	// the file (value_to_metric, say, which only changes metric names).
	Notes []string

	domains map[string]*node
}

// LoadOptions configures loading. The zero value is envoyproxy/ratelimit's
// default.
type LoadOptions struct {
	// MergeDomains lets several files configure one domain, their
	// descriptors merged (MERGE_DOMAIN_CONFIG=true). Default: a domain
	// configured twice is an error.
	MergeDomains bool
}

// node is one descriptor of a domain's tree, or the domain itself (its
// root, with no key).
type node struct {
	key, value string // value "" matches by key only; a value ending in '*' is a prefix
	path       string // Envoy's key of the node below the domain: "foo.bar_x"
	limits     []Limit
	unlimited  bool // rate_limit: {unlimited: true}
	limited    bool // a rate_limit block is present (unlimited or not)
	shadow     bool
	quota      bool
	detailed   bool
	toMetric   bool
	share      bool

	children  map[string]*node // by "key" or "key_value"
	wildcards []string         // the children's keys that end in '*', in file order
	order     []string         // the children's keys in file order
	where     string           // file:line:column
}

// Limit is one limit of a descriptor.
type Limit struct {
	// Name is rate_limit.name: what replaces refers to; may be empty.
	Name string

	// Requests is requests_per_unit: the most hits in any window. 0 blocks.
	Requests uint32

	// Unit and Multiplier are the window as Envoy reports it: Multiplier
	// units (Multiplier is 1 for a plain unit). A window that is not a
	// whole number of seconds has Unit UNKNOWN.
	Unit       rlsv3.RateLimitResponse_RateLimit_Unit
	Multiplier uint32

	// Window is the length of the sliding window.
	Window time.Duration

	// Algorithm is how the window counts (the exact log by default).
	Algorithm sluice.Algorithm

	// Replaces names the limits this one replaces when both match a
	// request.
	Replaces []string
}

// unitLengths are the lengths of Envoy's units, as envoyproxy/ratelimit
// counts them (a month is 30 days, a year 365).
var unitLengths = map[rlsv3.RateLimitResponse_RateLimit_Unit]time.Duration{
	rlsv3.RateLimitResponse_RateLimit_SECOND: time.Second,
	rlsv3.RateLimitResponse_RateLimit_MINUTE: time.Minute,
	rlsv3.RateLimitResponse_RateLimit_HOUR:   time.Hour,
	rlsv3.RateLimitResponse_RateLimit_DAY:    24 * time.Hour,
	rlsv3.RateLimitResponse_RateLimit_WEEK:   7 * 24 * time.Hour,
	rlsv3.RateLimitResponse_RateLimit_MONTH:  30 * 24 * time.Hour,
	rlsv3.RateLimitResponse_RateLimit_YEAR:   365 * 24 * time.Hour,
}

// unitOf returns Envoy's unit and multiplier for a window: the largest of
// second, minute, hour, day and week it is a whole number of, and UNKNOWN
// with multiplier 1 for a window that is not a whole number of seconds.
func unitOf(w time.Duration) (rlsv3.RateLimitResponse_RateLimit_Unit, uint32) {
	for _, u := range []rlsv3.RateLimitResponse_RateLimit_Unit{
		rlsv3.RateLimitResponse_RateLimit_WEEK, rlsv3.RateLimitResponse_RateLimit_DAY,
		rlsv3.RateLimitResponse_RateLimit_HOUR, rlsv3.RateLimitResponse_RateLimit_MINUTE,
		rlsv3.RateLimitResponse_RateLimit_SECOND,
	} {
		l := unitLengths[u]
		if w%l == 0 && w/l <= 1<<32-1 {
			return u, uint32(w / l)
		}
	}
	return rlsv3.RateLimitResponse_RateLimit_UNKNOWN, 1
}

// Domains returns the names of the configured domains, sorted.
func (c *Config) Domains() []string {
	names := make([]string, 0, len(c.domains))
	for d := range c.domains {
		names = append(names, d)
	}
	sort.Strings(names)
	return names
}

// HasDomain reports whether domain is configured.
func (c *Config) HasDomain(domain string) bool {
	return c != nil && c.domains[domain] != nil
}

// Load reads every *.yaml and *.yml file in dir and its subdirectories
// (names starting with '.' are skipped), in lexical order, and validates
// them together. Every problem found is reported in the returned ErrorList
// with its file, line and column.
func Load(dir string, opts LoadOptions) (*Config, error) {
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("envoy: %w; give the directory of envoyproxy/ratelimit configuration files", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("envoy: %s is not a directory; give the directory that holds the *.yaml files (RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config)", dir)
	}
	var files []string
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if path != dir && strings.HasPrefix(name, ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.IsDir() && (strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")) {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("envoy: reading %s: %w", dir, err)
	}
	sort.Strings(files)
	srcs := make([]Source, 0, len(files))
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			return nil, fmt.Errorf("envoy: %w", err)
		}
		if st.Size() > MaxFileSize {
			return nil, ErrorList{{File: f, Msg: fmt.Sprintf("the file is %d bytes; the limit is %d", st.Size(), MaxFileSize)}}
		}
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("envoy: %w", err)
		}
		srcs = append(srcs, Source{Name: f, Data: b})
	}
	c, err := Parse(srcs, opts)
	if err != nil {
		return nil, err
	}
	c.Dir = dir
	return c, nil
}

// Source is one configuration file's name and contents.
type Source struct {
	Name string
	Data []byte
}

// Parse validates the files given, as Load does.
func Parse(files []Source, opts LoadOptions) (*Config, error) {
	c := &Config{domains: map[string]*node{}}
	var errs ErrorList
	for _, f := range files {
		d := &decoder{file: f.Name, cfg: c, opts: opts}
		d.decode(f.Data)
		errs = append(errs, d.errs...)
		c.Files = append(c.Files, f.Name)
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return c, nil
}

// Error is one problem found in a configuration file, with where it is;
// ErrorList is every problem found, in file order. They are the native
// configuration's, so both kinds of file report alike.
type (
	Error     = config.Error
	ErrorList = config.ErrorList
)

// Dump returns the configuration as /rlconfig shows it: one line per
// descriptor that has a rate limit, "domain.key_value...: unit=... requests_per_unit=...",
// sorted.
func (c *Config) Dump() string {
	var lines []string
	var walk func(prefix string, n *node)
	walk = func(prefix string, n *node) {
		for _, k := range n.order {
			ch := n.children[k]
			full := prefix + "." + k
			switch {
			case ch.unlimited:
				lines = append(lines, fmt.Sprintf("%s: unlimited, shadow_mode: %t, quota_mode: %t", full, ch.shadow, ch.quota))
			case len(ch.limits) > 0:
				for _, l := range ch.limits {
					var extra string
					if l.Multiplier > 1 {
						extra = fmt.Sprintf(" unit_multiplier=%d", l.Multiplier)
					}
					if l.Unit == rlsv3.RateLimitResponse_RateLimit_UNKNOWN {
						extra = fmt.Sprintf(" window=%v", l.Window)
					}
					lines = append(lines, fmt.Sprintf("%s: unit=%s requests_per_unit=%d%s, shadow_mode: %t, quota_mode: %t",
						full, l.Unit, l.Requests, extra, ch.shadow, ch.quota))
				}
			}
			walk(full, ch)
		}
	}
	for _, d := range c.Domains() {
		walk(d, c.domains[d])
	}
	slices.Sort(lines)
	if len(lines) == 0 {
		return ""
	}
	return strings.Join(lines, "\n") + "\n"
}
