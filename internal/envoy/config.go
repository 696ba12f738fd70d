// Package envoy is envoyproxy/ratelimit's model on sluice: it loads that service's YAML configuration
// unchanged (domains, nested descriptors with keys, values and wildcard values, rate limits with a unit and
// requests per unit, unlimited, replaces, shadow_mode and the rest) from a set of named documents (Parse),
// a directory's files (Load) or any other source, and matches each descriptor of a rate-limit request
// against its domain's tree as that service does (Config.Match). Package decide decides a request's
// matched limits with a sluice Limiter and builds Envoy's answers.
//
// Beyond the upstream format a file may give a limit any length (window:
// 90s, or unit_multiplier), several limits per descriptor (rate_limits: a
// list), an algorithm (algorithm: log, gcra or sliding-counter), and a
// budget (budget: 2s, slices leased as sluice.Rule.Budget's).
//
// docs/envoy.md lists every difference from envoyproxy/ratelimit.
package envoy

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/store"
)

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

	domains  map[string]*node
	calendar bool // LoadOptions.CalendarUnits
}

// LoadOptions configures loading. The zero value is envoyproxy/ratelimit's
// default.
type LoadOptions struct {
	// MergeDomains lets several files configure one domain, their
	// descriptors merged (MERGE_DOMAIN_CONFIG=true). Default: a domain
	// configured twice is an error.
	MergeDomains bool

	// CalendarUnits counts the units day, week, month and year as
	// calendar periods in UTC (sluice's SLUICE_CALENDAR_UNITS=true):
	// a month's count starts from 0 at midnight of the 1st, a week's on
	// Monday, a day's at midnight, a year's on 1 January, and a request
	// over the limit is told to come back when the next one starts.
	// Default: envoyproxy/ratelimit's, a sliding window of the unit's
	// length (a month is 30 days, a year 365). A descriptor's own limit
	// (sent in the request) follows the same rule.
	CalendarUnits bool
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
	metadata   *structpb.Struct // sent in the dynamic metadata when the descriptor passes

	children  map[string]*node // by "key" or "key_value"
	wildcards []string         // the children's keys that end in '*', in file order
	order     []string         // the children's keys in file order
	where     string           // file:line:column
}

// Limit is one limit of a descriptor. Unit and Multiplier are its window as
// Envoy reports it, Multiplier units (1 for a plain unit); a window that is
// not a whole number of seconds has Unit UNKNOWN.
type Limit struct {
	Name       string // rate_limit.name: what replaces refers to; may be empty
	Requests   uint32 // requests_per_unit: the most hits in any window; 0 blocks
	Unit       rlsv3.RateLimitResponse_RateLimit_Unit
	Multiplier uint32
	Window     time.Duration    // the length of the sliding window
	Algorithm  sluice.Algorithm // how the window counts (the exact log by default)
	Budget     time.Duration    // above 0: slices of each window are leased for at most this long (sluice.Rule.Budget)
	Replaces   []string         // the limits this one replaces when both match a request, by name
	Period     store.Period     // a calendar period in UTC instead of a sliding Window (LoadOptions.CalendarUnits)
}

// calendarUnits are the units LoadOptions.CalendarUnits counts as
// calendar periods.
var calendarUnits = map[rlsv3.RateLimitResponse_RateLimit_Unit]store.Period{
	rlsv3.RateLimitResponse_RateLimit_DAY:   store.Day,
	rlsv3.RateLimitResponse_RateLimit_WEEK:  store.Week,
	rlsv3.RateLimitResponse_RateLimit_MONTH: store.Month,
	rlsv3.RateLimitResponse_RateLimit_YEAR:  store.Year,
}

// unitLimit is a limit of requests per one unit u: a calendar period when
// calendar is set and u is one of calendarUnits, else a window of the
// unit's length.
func unitLimit(u rlsv3.RateLimitResponse_RateLimit_Unit, requests uint32, calendar bool) Limit {
	l := Limit{Requests: requests, Unit: u, Multiplier: 1, Window: unitLengths[u]}
	if p, ok := calendarUnits[u]; ok && calendar {
		l.Period, l.Window = p, store.MaxPeriodLength
	}
	return l
}

// UnitLimit is a limit of requests per one unit u, as a descriptor of a
// request carries its own: counted as c's files count that unit
// (LoadOptions.CalendarUnits). ok reports whether u is one of
// envoyproxy/ratelimit's units, second to year; the limit of any other
// has no window.
func (c *Config) UnitLimit(u rlsv3.RateLimitResponse_RateLimit_Unit, requests uint32) (l Limit, ok bool) {
	_, ok = unitLengths[u]
	return unitLimit(u, requests, c.calendar), ok
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

// RuleLimit is a sluice rule's limit as Envoy names it: the rule's name,
// its limit (at most 2^32-1) and its window in Envoy's units (unitOf).
func RuleLimit(l *sluice.LimitStatus) Limit {
	u, m := unitOf(l.Window)
	return Limit{Name: l.Rule, Requests: uint32(min(max(l.Limit, 0), math.MaxUint32)), Unit: u, Multiplier: m, Window: l.Window}
}

// PolicyName is the sluice policy name of a domain's windows: part of every
// store key, and apart from the configuration file's policies (whose names
// cannot hold '/').
func PolicyName(domain string) string { return "envoy/" + domain }

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
					if l.Period != store.NoPeriod {
						extra = " calendar=utc"
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
