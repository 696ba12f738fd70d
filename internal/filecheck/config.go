package filecheck

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/config"
)

// Config summarizes a valid configuration file.
type Config struct {
	File          string         `json:"file"`
	Store         string         `json:"store"`
	Policies      []Policy       `json:"policies"`
	Schedules     []Schedule     `json:"schedules"`
	Rules         int            `json:"rules"`
	Algorithms    map[string]int `json:"algorithms"` // rules by algorithm
	FileOverrides int            `json:"file_overrides"`
}

// Policy summarizes a policy of the file.
type Policy struct {
	Name  string   `json:"name"`
	Modes []string `json:"modes,omitempty"` // penalize, shadow, no deny cache
	Rules []Rule   `json:"rules"`
}

// Rule summarizes a rule of a policy, or a limit of an Envoy domain.
type Rule struct {
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

// Schedule summarizes a schedule of the file.
type Schedule struct {
	Name   string   `json:"name"`
	By     []string `json:"by"`
	Detail string   `json:"detail"`
}

// memoryStore is the store of a file without a store section.
const memoryStore = "memory (this process only)"

// SummarizeConfig summarizes cfg: its store, policies, rules and
// schedules.
func SummarizeConfig(cfg *config.Config) *Config {
	s := &Config{File: cfg.File, Store: memoryStore, Policies: []Policy{}, Schedules: []Schedule{}, Algorithms: map[string]int{}}
	if st := cfg.Store; st != nil {
		s.Store = summarizeStore(st)
	}
	for i := range cfg.Policies {
		p := &cfg.Policies[i]
		ps := Policy{Name: p.Name}
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
			switch {
			case r.Concurrency > 0:
				s.Algorithms["concurrency"]++
			case r.Period != 0:
				s.Algorithms["calendar"]++
			default:
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
		s.Schedules = append(s.Schedules, Schedule{Name: sc.Name, By: nonNil(sc.By), Detail: d})
	}
	return s
}

func summarizeStore(st *config.Store) string {
	where := memoryStore
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

func summarizeRule(r *sluice.Rule) Rule {
	rs := Rule{Name: r.Name, By: nonNil(r.By), Limit: r.Limit, Window: r.Window.String(), Algorithm: r.Algorithm.String()}
	if r.Concurrency > 0 {
		rs = Rule{Name: r.Name, By: nonNil(r.By), Concurrency: r.Concurrency, Lease: r.Lease.String()}
	}
	var d []string
	switch {
	case r.Period != 0:
		rs.Window, rs.Algorithm = r.Period.String(), "calendar"
		d = append(d, quotaDetail(r)...)
	case r.Algorithm == sluice.Credits:
		rs.Window = ""
		d = append(d, quotaDetail(r)...)
	}
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

// matchText is m as "k=v k2=v2", by key.
func matchText(m map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, k+"="+m[k])
	}
	return strings.Join(parts, " ")
}

func (s *Config) write(w io.Writer) {
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
			r.write(w, "    rule ")
		}
	}
	for _, sc := range s.Schedules {
		fmt.Fprintf(w, "  schedule %s by %v: %s\n", sc.Name, sc.By, sc.Detail)
	}
	fmt.Fprintln(w, "  runtime overrides: kept in the store and applied over these rules; sluice override list shows them")
}

func (r *Rule) write(w io.Writer, prefix string) {
	switch {
	case r.Unlimited:
		fmt.Fprintf(w, "%s%-16s unlimited", prefix, r.Name)
	case r.Concurrency > 0:
		fmt.Fprintf(w, "%s%-16s %d at once, lease %s", prefix, r.Name, r.Concurrency, r.Lease)
	case r.Algorithm == sluice.Credits.String():
		fmt.Fprintf(w, "%s%-16s %d to start, credits", prefix, r.Name, r.Limit)
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

// quotaDetail describes what a calendar quota or a credits rule r has
// beside its limit: its time zone, week start, history, refill, covers.
func quotaDetail(r *sluice.Rule) []string {
	var d []string
	if f := r.Refill; f.Every != 0 {
		if f.To > 0 {
			d = append(d, fmt.Sprintf("refill to %d every %v", f.To, f.Every))
		} else {
			d = append(d, fmt.Sprintf("refill adds %d every %v", f.Add, f.Every))
		}
	}
	if r.Location != nil {
		d = append(d, "in "+r.Location.String())
	}
	if r.WeekStart != 0 {
		d = append(d, "weeks from "+r.WeekStart.String())
	}
	if r.History > 0 {
		d = append(d, fmt.Sprintf("history %d", r.History))
	}
	if r.Covers != "" {
		d = append(d, "covers "+r.Covers)
	}
	return d
}
