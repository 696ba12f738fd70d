package server

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sluicerate/sluice/memstore"
)

// deployDir holds the Grafana dashboard and the Prometheus alert rules.
const deployDir = "../../deploy"

var metricName = regexp.MustCompile(`\bsluice_[a-z0-9_]+`)

// dashboardExprs returns every query of the Grafana dashboard.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployDir, "grafana", "sluice.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("deploy/grafana/sluice.json is not JSON: %v", err)
	}
	var out []string
	var walk func(any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && (k == "expr" || k == "definition") {
					out = append(out, s)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(v)
	return out
}

// alertExprs returns every expression of the alert rules.
func alertExprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployDir, "prometheus", "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Groups []struct {
			Rules []struct {
				Alert string `yaml:"alert"`
				Expr  string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("deploy/prometheus/alerts.yml: %v", err)
	}
	var out []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			out = append(out, r.Expr)
		}
	}
	return out
}

// TestDeployQueriesExist checks that every metric the Grafana dashboard and
// the alert rules query is one the server exports at /metrics, after
// traffic that gives every family a series.
func TestDeployQueriesExist(t *testing.T) {
	t.Parallel()
	st := memstore.New(memstore.Config{})
	ts := testServerFor(t, st, testConfig, Options{})
	srv := ts.srv
	for range 3 {
		ts.do("POST", "/v1/decide", `{"policy":"notify","attributes":{"category":"a"}}`)
		ts.do("POST", "/v1/decide", `{"policy":"shadowed"}`)
	}
	ts.do("POST", "/v1/reserve", `{"schedule":"carrier","attributes":{"carrier":"1"}}`)
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.yaml"), filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(good, []byte(testConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("policies: [\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := srv.ReloadFile(good); err != nil {
		t.Fatal(err)
	}
	_ = srv.ReloadFile(bad)
	st.Close() // the store fails from now on: degraded decisions and store errors
	ts.do("POST", "/v1/decide", `{"policy":"notify","attributes":{"category":"b"}}`)

	w := ts.do("GET", "/metrics", "")
	if w.Code != 200 {
		t.Fatalf("/metrics = %d", w.Code)
	}
	exported := map[string]bool{}
	for line := range strings.Lines(w.Body.String()) {
		f := strings.Fields(line)
		if len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			exported[f[2]] = true
			if f[3] == "histogram" {
				for _, sfx := range []string{"_bucket", "_sum", "_count"} {
					exported[f[2]+sfx] = true
				}
			}
		}
	}
	for _, src := range []struct {
		name  string
		exprs []string
	}{
		{"deploy/grafana/sluice.json", dashboardExprs(t)},
		{"deploy/prometheus/alerts.yml", alertExprs(t)},
	} {
		if len(src.exprs) == 0 {
			t.Errorf("%s: no queries found", src.name)
		}
		var used []string
		for _, e := range src.exprs {
			for _, m := range metricName.FindAllString(e, -1) {
				if !slices.Contains(used, m) {
					used = append(used, m)
				}
				if !exported[m] {
					t.Errorf("%s queries %s, which sluice serve does not export; it exports %v", src.name, m, keys(exported))
				}
			}
		}
		t.Logf("%s queries %d metrics: %v", src.name, len(used), used)
	}
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		if strings.HasPrefix(k, "sluice_") {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}
