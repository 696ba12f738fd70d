package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/internal/envoy"
)

// sluice check without a request, as `promtool check config` or `nginx -t`:
// load the files, report every problem with its file, line and column, and
// print a summary of what they configure.

// fileSummary is what `sluice check --json` prints without a request: the
// problems found, and the summary of each file that has none.
type fileSummary struct {
	Problems []problemJSON  `json:"problems"`
	Config   *configSummary `json:"config,omitempty"`
	Envoy    *envoySummary  `json:"envoy,omitempty"`
}

// problemJSON is one problem of a file; Line and Column are 0 when unknown.
type problemJSON struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Message string `json:"message"`
}

type configSummary struct {
	File          string            `json:"file"`
	Store         string            `json:"store"`
	Policies      []policySummary   `json:"policies"`
	Schedules     []scheduleSummary `json:"schedules"`
	Rules         int               `json:"rules"`
	Algorithms    map[string]int    `json:"algorithms"` // rules by algorithm
	FileOverrides int               `json:"file_overrides"`
}

type policySummary struct {
	Name  string        `json:"name"`
	Modes []string      `json:"modes,omitempty"` // penalize, shadow, no deny cache
	Rules []ruleSummary `json:"rules"`
}

type ruleSummary struct {
	Name      string   `json:"name"`
	By        []string `json:"by"`
	Limit     int64    `json:"limit"`
	Window    string   `json:"window,omitempty"`
	Algorithm string   `json:"algorithm,omitempty"`
	// Descriptor is an Envoy limit's descriptor (key=value entries, a key
	// alone for any value), and Unlimited one that has no limit.
	Descriptor string `json:"descriptor,omitempty"`
	Unlimited  bool   `json:"unlimited,omitempty"`
	// Concurrency and Lease are a concurrency rule's, which has no limit,
	// window or algorithm.
	Concurrency int64    `json:"concurrency,omitempty"`
	Lease       string   `json:"lease,omitempty"`
	Detail      string   `json:"detail,omitempty"`
	Overrides   []string `json:"overrides,omitempty"`
}

type scheduleSummary struct {
	Name   string   `json:"name"`
	By     []string `json:"by"`
	Detail string   `json:"detail"`
}

type envoySummary struct {
	Dir     string               `json:"dir"`
	Files   int                  `json:"files"`
	Domains []envoyDomainSummary `json:"domains"`
	Notes   []string             `json:"notes,omitempty"`
}

type envoyDomainSummary struct {
	Domain string        `json:"domain"`
	Limits []ruleSummary `json:"limits"`
}

// checkFiles loads the configuration file and the Envoy directory that are
// given, prints every problem of each and how many there are to stderr, and
// when both are valid a summary to stdout: exit 0, else 2. With asJSON, it
// prints the problems and the summaries as one JSON object to stdout.
func checkFiles(file, envoyDir string, envoyOpts envoy.LoadOptions, asJSON bool, stdout, stderr io.Writer) int {
	out := fileSummary{Problems: []problemJSON{}}
	if file != "" {
		if cfg, err := config.Load(file); err != nil {
			out.Problems = append(out.Problems, reportProblems(stderr, file, err, asJSON)...)
		} else {
			out.Config = summarizeConfig(cfg)
		}
	}
	if envoyDir != "" {
		if cfg, err := envoy.Load(envoyDir, envoyOpts); err != nil {
			out.Problems = append(out.Problems, reportProblems(stderr, envoyDir, err, asJSON)...)
		} else {
			out.Envoy = summarizeEnvoy(cfg)
		}
	}
	code := exitOK
	if len(out.Problems) > 0 {
		code = exitUsage
	}
	if asJSON {
		b, _ := json.Marshal(out)
		fmt.Fprintln(stdout, string(b))
		return code
	}
	if out.Config != nil {
		printConfig(stdout, out.Config)
	}
	if out.Envoy != nil {
		printEnvoy(stdout, out.Envoy)
	}
	return code
}

// reportProblems returns the problems of err, the error of loading what,
// after printing them one a line and how many there are, unless asJSON.
func reportProblems(w io.Writer, what string, err error, asJSON bool) []problemJSON {
	var problems []problemJSON
	if l, ok := err.(config.ErrorList); ok {
		for _, e := range l {
			problems = append(problems, problemJSON{File: e.File, Line: e.Line, Column: e.Column, Message: e.Msg})
		}
	} else {
		problems = append(problems, problemJSON{File: what, Message: err.Error()})
	}
	if !asJSON {
		fmt.Fprintln(w, err)
		fmt.Fprintf(w, "%s: %s\n", what, count(len(problems), "problem", "problems"))
	}
	return problems
}

func summarizeConfig(cfg *config.Config) *configSummary {
	s := &configSummary{File: cfg.File, Store: "memory (this process only)", Policies: []policySummary{}, Schedules: []scheduleSummary{},
		Algorithms: map[string]int{}}
	if st := cfg.Store; st != nil {
		s.Store = storeSummary(st)
	}
	for i := range cfg.Policies {
		p := &cfg.Policies[i]
		ps := policySummary{Name: p.Name}
		for mode, on := range map[string]bool{"penalize": p.Penalize, "shadow": p.Shadow, "no deny cache": !p.CacheDenials} {
			if on {
				ps.Modes = append(ps.Modes, mode)
			}
		}
		slices.Sort(ps.Modes)
		for j := range p.Rules {
			r := &p.Rules[j]
			ps.Rules = append(ps.Rules, summarizeRule(r))
			s.Rules++
			if r.Concurrency > 0 {
				s.Algorithms["concurrency"]++
			} else {
				s.Algorithms[r.Algorithm.String()]++
			}
			s.FileOverrides += len(r.Overrides)
		}
		s.Policies = append(s.Policies, ps)
	}
	for i := range cfg.Schedules {
		sc := &cfg.Schedules[i]
		d := fmt.Sprintf("%v, max delay %v", sc.Rate, sc.MaxDelay)
		if sc.MaxQueue > 0 {
			d += fmt.Sprintf(", max queue %d", sc.MaxQueue)
		}
		s.Schedules = append(s.Schedules, scheduleSummary{Name: sc.Name, By: nonNil(sc.By), Detail: d})
	}
	return s
}

func storeSummary(st *config.Store) string {
	where := "memory (this process only)"
	if r := st.Redis; r != nil {
		where = fmt.Sprintf("redis %s at %s", r.Mode, strings.Join(r.Addrs, ","))
	}
	onError := map[sluice.OnError]string{sluice.Deny: "deny", sluice.Allow: "allow"}[st.OnError]
	if st.Fallback {
		onError = fmt.Sprintf("fallback to memory on 1/%d of each limit", st.FallbackShare)
	}
	timeout := "the default timeout"
	if st.Timeout > 0 {
		timeout = "timeout " + st.Timeout.String()
	}
	return fmt.Sprintf("%s, prefix %s, %s, on error %s", where, st.Prefix, timeout, onError)
}

func summarizeRule(r *sluice.Rule) ruleSummary {
	rs := ruleSummary{Name: r.Name, By: nonNil(r.By), Limit: r.Limit, Window: r.Window.String(), Algorithm: r.Algorithm.String()}
	if r.Concurrency > 0 {
		rs = ruleSummary{Name: r.Name, By: nonNil(r.By), Concurrency: r.Concurrency, Lease: r.Lease.String()}
	}
	var d []string
	if r.Burst > 0 {
		d = append(d, fmt.Sprintf("burst %d", r.Burst))
	}
	if r.MinGap > 0 {
		d = append(d, "min gap "+r.MinGap.String())
	}
	if r.Spread > 1 {
		d = append(d, fmt.Sprintf("spread over %d", r.Spread))
	}
	if r.Budget > 0 {
		d = append(d, "budget "+r.Budget.String())
	}
	if r.Shadow {
		d = append(d, "shadow")
	}
	if r.Optional {
		d = append(d, "optional")
	}
	if len(r.Match) > 0 {
		d = append(d, "when "+matchText(r.Match))
	}
	if len(r.Unless) > 0 {
		d = append(d, "unless "+strings.Join(r.Unless, ", "))
	}
	rs.Detail = strings.Join(d, ", ")
	for _, o := range r.Overrides {
		v := fmt.Sprint(o.Limit)
		if o.Unlimited {
			v = "unlimited"
		}
		rs.Overrides = append(rs.Overrides, matchText(o.Match)+": "+v)
	}
	return rs
}

func matchText(m map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, " ")
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func printConfig(w io.Writer, s *configSummary) {
	fmt.Fprintf(w, "%s: ok\n  store: %s\n", s.File, s.Store)
	var algs []string
	for _, a := range slices.Sorted(maps.Keys(s.Algorithms)) {
		algs = append(algs, fmt.Sprintf("%s %d", a, s.Algorithms[a]))
	}
	fmt.Fprintf(w, "  %s, %s (%s), %s, %s\n", count(len(s.Policies), "policy", "policies"), count(s.Rules, "rule", "rules"),
		strings.Join(algs, ", "), count(len(s.Schedules), "schedule", "schedules"), count(s.FileOverrides, "file override", "file overrides"))
	for _, p := range s.Policies {
		fmt.Fprintf(w, "  policy %s", p.Name)
		if len(p.Modes) > 0 {
			fmt.Fprintf(w, " (%s)", strings.Join(p.Modes, ", "))
		}
		fmt.Fprintln(w)
		for _, r := range p.Rules {
			printRule(w, "    rule ", r)
		}
	}
	for _, sc := range s.Schedules {
		fmt.Fprintf(w, "  schedule %s by %v: %s\n", sc.Name, sc.By, sc.Detail)
	}
	fmt.Fprintln(w, "  runtime overrides: kept in the store and applied over these rules; sluice override list shows them")
}

// count is "1 rule" or "n rules".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

func printRule(w io.Writer, prefix string, r ruleSummary) {
	switch {
	case r.Unlimited:
		fmt.Fprintf(w, "%s%-16s unlimited", prefix, r.Name)
	case r.Concurrency > 0:
		fmt.Fprintf(w, "%s%-16s %d at once, lease %s", prefix, r.Name, r.Concurrency, r.Lease)
	default:
		fmt.Fprintf(w, "%s%-16s %d per %s, %s", prefix, r.Name, r.Limit, r.Window, r.Algorithm)
	}
	if len(r.By) > 0 {
		fmt.Fprintf(w, ", by %s", strings.Join(r.By, ", "))
	}
	if r.Descriptor != "" {
		fmt.Fprintf(w, ", descriptor %s", r.Descriptor)
	}
	if r.Detail != "" {
		fmt.Fprintf(w, ", %s", r.Detail)
	}
	if len(r.Overrides) > 0 {
		fmt.Fprintf(w, "; overrides: %s", strings.Join(r.Overrides, "; "))
	}
	fmt.Fprintln(w)
}

func summarizeEnvoy(cfg *envoy.Config) *envoySummary {
	s := &envoySummary{Dir: cfg.Dir, Files: len(cfg.Files), Domains: []envoyDomainSummary{}, Notes: cfg.Notes}
	for _, r := range cfg.Descriptors() {
		if n := len(s.Domains); n == 0 || s.Domains[n-1].Domain != r.Domain {
			s.Domains = append(s.Domains, envoyDomainSummary{Domain: r.Domain})
		}
		d := &s.Domains[len(s.Domains)-1]
		d.Limits = append(d.Limits, summarizeDescriptor(r))
	}
	return s
}

// summarizeDescriptor is a limit of an Envoy domain, or an unlimited
// descriptor: its descriptor as key=value entries, the limit's name and
// its modes in the detail.
func summarizeDescriptor(r envoy.Rule) ruleSummary {
	var entries, d []string
	for i, k := range r.Keys {
		if v := r.Values[i]; v != "" {
			k += "=" + v
		}
		entries = append(entries, k)
	}
	rs := ruleSummary{Name: r.Name, By: nonNil(nil), Descriptor: strings.Join(entries, ", "), Unlimited: r.Unlimited}
	if !r.Unlimited {
		rs.Limit, rs.Window, rs.Algorithm = int64(r.Limit.Requests), r.Limit.Window.Round(time.Second).String(), r.Limit.Algorithm.String()
	}
	if r.Limit.Name != "" {
		d = append(d, fmt.Sprintf("name %q", r.Limit.Name))
	}
	if r.Shadow {
		d = append(d, "shadow_mode")
	}
	rs.Detail = strings.Join(d, ", ")
	return rs
}

func printEnvoy(w io.Writer, s *envoySummary) {
	fmt.Fprintf(w, "%s: ok, %s, %s with limits\n", s.Dir, count(s.Files, "file", "files"), count(len(s.Domains), "domain", "domains"))
	for _, d := range s.Domains {
		fmt.Fprintf(w, "  domain %s\n", d.Domain)
		for _, r := range d.Limits {
			printRule(w, "    ", r)
		}
	}
	for _, n := range s.Notes {
		fmt.Fprintln(w, "  note:", n)
	}
}
