package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicerate/sluice/internal/filecheck"
)

// TestCheckValidatesFiles: sluice check without a request is a CI step. A
// valid file exits 0 with a summary of what it configures; a file with
// three problems exits 2 and names each with its file, line and column;
// an Envoy directory is summarized by domain.
func TestCheckValidatesFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := writeFile(t, dir, "good.yaml", `policies:
  - name: api
    limits:
      - {name: per-user, by: [user], limit: 100, window: 1m, overrides: [{match: {user: acme}, limit: 1000}]}
      - {name: global, limit: 5000, window: 1h, algorithm: gcra, burst: 50}
  - name: push
    shadow: true
    limits:
      - {name: per-device, by: [device], limit: 3, window: 1m, min_gap: 10s}
schedules:
  - {name: carrier, by: [carrier], rate: 4/s, max_delay: 2s}
`)
	code, out, errOut := runCLI(t, "check", "--config", good)
	if code != exitOK {
		t.Fatalf("check of a valid file: exit %d\n%s%s", code, out, errOut)
	}
	squeezed := strings.Join(strings.Fields(out), " ") // the summary aligns with spaces
	for _, want := range []string{
		good + ": ok",
		"store: memory (this process only)",
		"2 policies, 3 rules (gcra 1, log 2), 1 schedule, 1 file override",
		"policy push (shadow)",
		"rule per-user 100 per 1m0s, log, by user; overrides: user=acme: 1000",
		"rule global 5000 per 1h0m0s, gcra, burst 50",
		"rule per-device 3 per 1m0s, log, by device, min gap 10s",
		"schedule carrier by [carrier]: 4/1s, max delay 2s",
	} {
		if !strings.Contains(squeezed, want) {
			t.Errorf("the summary lacks %q:\n%s", want, out)
		}
	}
	t.Logf("sluice check --config good.yaml, exit %d:\n%s", code, out)

	code, out, _ = runCLI(t, "check", "--config", good, "--json")
	var sum filecheck.Report
	if err := json.Unmarshal([]byte(out), &sum); code != exitOK || err != nil || sum.Config == nil ||
		len(sum.Config.Policies) != 2 || sum.Config.Rules != 3 || sum.Config.FileOverrides != 1 {
		t.Errorf("check --json: exit %d, %v, %s", code, err, out)
	}

	bad := writeFile(t, dir, "bad.yaml", `policies:
  - name: api
    limits:
      - {name: per-user, by: [user], limit: -3, window: 1m}
      - {name: global, limit: 5000, window: 30}
      - {name: other, limit: 5, window: 1m, algorithm: bogus}
`)
	code, out, errOut = runCLI(t, "check", "--config", bad)
	if code != exitUsage || out != "" {
		t.Errorf("check of a file with three problems: exit %d, stdout %q; want 2 and nothing", code, out)
	}
	for _, want := range []string{bad + ":4:45: limit is -3", bad + ":5:45: window: duration \"30\" has no unit",
		bad + ":6:56: algorithm is \"bogus\"", bad + ": 3 problems"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("the report lacks %q:\n%s", want, errOut)
		}
	}
	t.Logf("sluice check --config bad.yaml, exit %d:\n%s", code, errOut)

	envoyDir := copyDir(t, "examples/config")
	code, out, errOut = runCLI(t, "check", "--envoy-config", envoyDir)
	if code != exitOK || !strings.Contains(out, envoyDir+": ok") || !strings.Contains(out, "domain rl") {
		t.Errorf("check --envoy-config: exit %d\n%s%s", code, out, errOut)
	}
	writeFile(t, envoyDir, "broken.yaml", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n")
	code, _, errOut = runCLI(t, "check", "--envoy-config", envoyDir)
	if want := filepath.Join(envoyDir, "broken.yaml") + ":4:24:"; code != exitUsage || !strings.Contains(errOut, want) {
		t.Errorf("check --envoy-config of a broken file: exit %d, %q; want 2 and %s", code, errOut, want)
	}
}

// TestCheckReportsEveryProblem: a file with five problems across two
// policies (testdata/five-problems.yaml) has all five reported in one run,
// each at its own line and column, with a count, as text and as --json; a
// file with one problem has its count too; a YAML syntax error is at its
// own line and column; a concurrency rule is summarised as what it is.
func TestCheckReportsEveryProblem(t *testing.T) {
	t.Parallel()
	file := filepath.Join("testdata", "five-problems.yaml")
	want := []struct {
		File         string
		Line, Column int
		Message      string
	}{
		{file, 7, 9, `concurrency rules "calls" and "per-line" have leases of 30s and 1m0s`},
		{file, 8, 63, "lease is 500µs; a lease lives at least 1ms"},
		{file, 9, 9, `rule "per-carrier": a concurrency rule takes no min gap, algorithm or burst`},
		{file, 13, 9, `policy "api" has two rules named "per-user" (first on line 12)`},
		{file, 14, 45, "window is zero"},
	}
	code, out, errOut := runCLI(t, "check", "--config", file)
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if code != exitUsage || out != "" || len(lines) != len(want)+1 || lines[len(want)] != file+": 5 problems" {
		t.Fatalf("check: exit %d, stdout %q, stderr:\n%s\nwant 2, nothing, and 5 problems then their count", code, out, errOut)
	}
	for i, w := range want {
		if prefix := fmt.Sprintf("%s:%d:%d: ", w.File, w.Line, w.Column); !strings.HasPrefix(lines[i], prefix) || !strings.Contains(lines[i], w.Message) {
			t.Errorf("problem %d = %q, want %s...%s", i+1, lines[i], prefix, w.Message)
		}
	}

	code, out, errOut = runCLI(t, "check", "--config", file, "--json")
	var got filecheck.Report
	if err := json.Unmarshal([]byte(out), &got); code != exitUsage || err != nil || errOut != "" || len(got.Problems) != len(want) || got.Config != nil {
		t.Fatalf("check --json: exit %d, %v, stdout %q, stderr %q; want 2 and 5 problems on stdout", code, err, out, errOut)
	}
	for i, w := range want {
		if g := got.Problems[i]; g.File != w.File || g.Line != w.Line || g.Column != w.Column || !strings.Contains(g.Message, w.Message) {
			t.Errorf("--json problem %d = %+v, want %+v", i+1, g, w)
		}
	}

	dir := t.TempDir()
	for _, tt := range []struct{ name, data, want string }{
		{"one.yaml", "policies:\n  - name: api\n    limits:\n      - {name: g, limit: 1, window: 0s}\n", ":4:37: window is zero"},
		{"syntax.yaml", "policies:\n  - name: api\n    limits:\n      - {name: g, limit: 1, window: 1s}\n     bad: 1\n", ":5:6: YAML syntax: did not find expected key"},
	} {
		f := writeFile(t, dir, tt.name, tt.data)
		code, _, errOut := runCLI(t, "check", "--config", f)
		if code != exitUsage || !strings.HasPrefix(errOut, f+tt.want) || !strings.HasSuffix(errOut, f+": 1 problem\n") {
			t.Errorf("check %s: exit %d, %q; want 2, %s and 1 problem", tt.name, code, errOut, tt.want)
		}
	}

	f := writeFile(t, dir, "lease.yaml", "policies:\n  - name: dialer\n    limits:\n      - {name: calls, concurrency: 4, lease: 30s}\n")
	code, out, errOut = runCLI(t, "check", "--config", f)
	if squeezed := strings.Join(strings.Fields(out), " "); code != exitOK || !strings.Contains(squeezed, "rule calls 4 at once, lease 30s") ||
		!strings.Contains(squeezed, "1 rule (concurrency 1)") {
		t.Errorf("check of a concurrency rule: exit %d\n%s%s", code, out, errOut)
	}
}
