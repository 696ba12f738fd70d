package filecheck

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sluicerate/sluice/internal/envoy"
)

// Envoy summarizes a valid directory of envoyproxy/ratelimit files.
type Envoy struct {
	Dir     string   `json:"dir"`
	Files   int      `json:"files"`
	Domains []Domain `json:"domains"`
	Notes   []string `json:"notes,omitempty"`
}

// Domain is an Envoy domain's limits, and its unlimited descriptors.
type Domain struct {
	Domain string `json:"domain"`
	Limits []Rule `json:"limits"`
}

// SummarizeEnvoy summarizes cfg: its domains and their descriptors.
func SummarizeEnvoy(cfg *envoy.Config) *Envoy {
	s := &Envoy{Dir: cfg.Dir, Files: len(cfg.Files), Domains: []Domain{}, Notes: cfg.Notes}
	for _, r := range cfg.Descriptors() {
		if n := len(s.Domains); n == 0 || s.Domains[n-1].Domain != r.Domain {
			s.Domains = append(s.Domains, Domain{Domain: r.Domain})
		}
		d := &s.Domains[len(s.Domains)-1]
		d.Limits = append(d.Limits, summarizeDescriptor(r))
	}
	return s
}

// summarizeDescriptor is a limit of an Envoy domain, or an unlimited
// descriptor: its descriptor as key=value entries, the limit's name and
// its modes in the detail.
func summarizeDescriptor(r envoy.Rule) Rule {
	var entries, d []string
	for i, k := range r.Keys {
		if v := r.Values[i]; v != "" {
			k += "=" + v
		}
		entries = append(entries, k)
	}
	rs := Rule{Name: r.Name, By: nonNil(nil), Descriptor: strings.Join(entries, ", "), Unlimited: r.Unlimited}
	if !r.Unlimited {
		rs.Limit, rs.Window, rs.Algorithm = int64(r.Limit.Requests), r.Limit.Window.Round(time.Second).String(), r.Limit.Algorithm.String()
		if r.Limit.Period != 0 {
			rs.Window, rs.Algorithm = r.Limit.Period.String(), "calendar in UTC"
		}
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

func (s *Envoy) write(w io.Writer) {
	fmt.Fprintf(w, "%s: ok, %s, %s with limits\n", s.Dir, count(s.Files, "file", "files"), count(len(s.Domains), "domain", "domains"))
	for _, d := range s.Domains {
		fmt.Fprintf(w, "  domain %s\n", d.Domain)
		for _, r := range d.Limits {
			r.write(w, "    ")
		}
	}
	for _, n := range s.Notes {
		fmt.Fprintln(w, "  note:", n)
	}
}
