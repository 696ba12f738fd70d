package filecheck

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicerate/sluice/internal/envoy"
)

func writeFile(t *testing.T, dir, name, data string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// check checks file and dir as sluice check does: the report, its
// problems as text and its summary as text.
func check(t *testing.T, file, dir string) (r *Report, problems, summary string) {
	t.Helper()
	r = Check(file, dir, envoy.LoadOptions{})
	var p, s bytes.Buffer
	r.WriteProblems(&p)
	r.WriteSummary(&s)
	return r, p.String(), s.String()
}

// TestSummarisesBudget: a budgeted rule's budget is in its summary, as
// text and as JSON.
func TestSummarisesBudget(t *testing.T) {
	t.Parallel()
	file := writeFile(t, t.TempDir(), "budget.yaml", `policies:
  - name: notify
    limits:
      - {name: global, limit: 100000, window: 1m, budget: 2s}
      - {name: per-category, by: [category], limit: 10, window: 30m}
`)
	r, problems, out := check(t, file, "")
	squeezed := strings.Join(strings.Fields(out), " ")
	if !r.OK() || !strings.Contains(squeezed, "rule global 100000 per 1m0s, log, budget 2s") ||
		strings.Contains(squeezed, "per-category 10 per 30m0s, log, by category, budget") {
		t.Errorf("ok %v, want the global rule summarised with its budget and no other:\n%s%s", r.OK(), out, problems)
	}
	b, _ := json.Marshal(r)
	var sum Report
	if err := json.Unmarshal(b, &sum); !r.OK() || err != nil || sum.Config == nil ||
		sum.Config.Policies[0].Rules[0].Detail != "budget 2s" || sum.Config.Policies[0].Rules[1].Detail != "" {
		t.Errorf("JSON: ok %v, %v, %s", r.OK(), err, b)
	}
}

// TestSummarisesEnvoy: the Envoy summary lists each limit's descriptor as
// key=value entries (the limit's name apart, not as an attribute),
// shadow_mode, and unlimited descriptors.
func TestSummarisesEnvoy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "a.yaml", `domain: rl
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 10, name: per-user}
    shadow_mode: true
  - key: user
    value: vip
    rate_limit: {unlimited: true}
  - key: path
    descriptors:
      - key: method
        value: POST
        rate_limit: {unit: second, requests_per_unit: 5}
`)
	r, problems, out := check(t, "", dir)
	squeezed := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{
		`user 10 per 1m0s, log, descriptor user, name "per-user", shadow_mode`,
		"user_vip unlimited, descriptor user=vip",
		"path.method_POST 5 per 1s, log, descriptor path, method=POST",
	} {
		if !r.OK() || !strings.Contains(squeezed, want) {
			t.Errorf("ok %v, the summary lacks %q:\n%s%s", r.OK(), want, out, problems)
		}
	}
}

// TestProblemsOfEachFile: each file that fails is reported with its
// problems and their count, the one that loads with its summary, and the
// report is not OK.
func TestProblemsOfEachFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := writeFile(t, dir, "bad.yaml", "policies:\n  - name: api\n    limits:\n      - {name: g, limit: -1, window: 0s}\n")
	envoyDir := filepath.Join(dir, "envoy")
	if err := os.Mkdir(envoyDir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, envoyDir, "a.yaml", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n")
	r, problems, out := check(t, bad, envoyDir)
	if r.OK() || out != "" || len(r.Problems) != 3 || r.Config != nil || r.Envoy != nil {
		t.Fatalf("ok %v, summary %q, problems %+v; want 3 problems and no summary", r.OK(), out, r.Problems)
	}
	for _, want := range []string{bad + ":4:", bad + ": 2 problems\n", filepath.Join(envoyDir, "a.yaml") + ":4:24:", envoyDir + ": 1 problem\n"} {
		if !strings.Contains(problems, want) {
			t.Errorf("the problems lack %q:\n%s", want, problems)
		}
	}
	if p := r.Problems[0]; p.File != bad || p.Line != 4 || p.Column == 0 || p.Message == "" {
		t.Errorf("problem 1 = %+v, want %s at line 4 with a column and a message", p, bad)
	}

	r, problems, out = check(t, filepath.Join(dir, "missing.yaml"), "")
	if r.OK() || out != "" || len(r.Problems) != 1 || r.Problems[0].Line != 0 || !strings.HasSuffix(problems, "missing.yaml: 1 problem\n") {
		t.Errorf("a missing file: ok %v, %+v, %q; want 1 problem without a line", r.OK(), r.Problems, problems)
	}
}

// TestWrite: as text the problems go to stderr and the summaries to
// stdout; as JSON the whole report goes to stdout, in one line.
func TestWrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := writeFile(t, dir, "good.yaml", "policies:\n  - name: api\n    limits:\n      - {name: g, limit: 1, window: 1s}\n")
	bad := writeFile(t, dir, "bad.yaml", "policies:\n  - name: api\n    limits:\n      - {name: g, limit: 1, window: 0s}\n")
	for _, file := range []string{good, bad} {
		r := Check(file, "", envoy.LoadOptions{})
		var stdout, stderr bytes.Buffer
		r.Write(&stdout, &stderr, false)
		if r.OK() != (file == good) || r.OK() != strings.HasPrefix(stdout.String(), file+": ok\n") || r.OK() != (stderr.Len() == 0) {
			t.Errorf("%s as text: ok %v, stdout %q, stderr %q", file, r.OK(), stdout.String(), stderr.String())
		}
		stdout.Reset()
		stderr.Reset()
		r.Write(&stdout, &stderr, true)
		var got Report
		if err := json.Unmarshal(stdout.Bytes(), &got); err != nil || stderr.Len() != 0 || strings.Count(stdout.String(), "\n") != 1 ||
			len(got.Problems) != len(r.Problems) || (got.Config != nil) != r.OK() {
			t.Errorf("%s as JSON: %v, stdout %q, stderr %q", file, err, stdout.String(), stderr.String())
		}
	}
}
