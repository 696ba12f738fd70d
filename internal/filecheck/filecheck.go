// Package filecheck validates sluice's configuration file and a directory
// of envoyproxy/ratelimit files without running anything, as `promtool
// check config` or `nginx -t` do: it reports every problem with its file,
// line and column, and summarizes what valid files configure. It is what
// `sluice check` prints without a request.
package filecheck

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/internal/envoy"
)

// Report is the result of Check, and what `sluice check --json` prints
// without a request: the problems found, and the summary of each file that
// has none. The zero value is a report of nothing checked.
type Report struct {
	Problems []Problem `json:"problems"`
	Config   *Config   `json:"config,omitempty"`
	Envoy    *Envoy    `json:"envoy,omitempty"`

	// failures are the loads that failed, in order, for WriteProblems.
	failures []failure
}

// Problem is one problem of a file; Line and Column are 0 when unknown.
type Problem struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Message string `json:"message"`
}

// failure is the error of loading what, and how many problems it holds.
type failure struct {
	what     string
	err      error
	problems int
}

// Check loads the configuration file and the Envoy directory that are
// given ("" for neither) and returns their problems, or their summaries.
func Check(file, envoyDir string, envoyOpts envoy.LoadOptions) *Report {
	r := &Report{Problems: []Problem{}}
	if file != "" {
		if cfg, err := config.Load(file); err != nil {
			r.fail(file, err)
		} else {
			r.Config = SummarizeConfig(cfg)
		}
	}
	if envoyDir != "" {
		if cfg, err := envoy.Load(envoyDir, envoyOpts); err != nil {
			r.fail(envoyDir, err)
		} else {
			r.Envoy = SummarizeEnvoy(cfg)
		}
	}
	return r
}

// OK reports whether the files checked have no problem.
func (r *Report) OK() bool { return len(r.Problems) == 0 }

// fail adds the problems of err, the error of loading what: each of a
// config.ErrorList, else err as one problem of what.
func (r *Report) fail(what string, err error) {
	n := len(r.Problems)
	if l, ok := err.(config.ErrorList); ok {
		for _, e := range l {
			r.Problems = append(r.Problems, Problem{File: e.File, Line: e.Line, Column: e.Column, Message: e.Msg})
		}
	} else {
		r.Problems = append(r.Problems, Problem{File: what, Message: err.Error()})
	}
	r.failures = append(r.failures, failure{what: what, err: err, problems: len(r.Problems) - n})
}

// Write writes the report as sluice check does: the problems to stderr
// and the summaries to stdout, or with asJSON the report as one JSON
// object to stdout.
func (r *Report) Write(stdout, stderr io.Writer, asJSON bool) {
	if asJSON {
		b, _ := json.Marshal(r)
		fmt.Fprintln(stdout, string(b))
		return
	}
	r.WriteProblems(stderr)
	r.WriteSummary(stdout)
}

// WriteProblems writes, for each file that failed to load, its problems
// one a line and how many there are.
func (r *Report) WriteProblems(w io.Writer) {
	for _, f := range r.failures {
		fmt.Fprintln(w, f.err)
		fmt.Fprintf(w, "%s: %s\n", f.what, count(f.problems, "problem", "problems"))
	}
}

// WriteSummary writes the summary of each file that loaded.
func (r *Report) WriteSummary(w io.Writer) {
	if r.Config != nil {
		r.Config.write(w)
	}
	if r.Envoy != nil {
		r.Envoy.write(w)
	}
}

// count is "1 rule" or "n rules".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// nonNil is s, or an empty list for nil (JSON [] rather than null).
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
