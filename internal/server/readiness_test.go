package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicerate/sluice/internal/envoy/rls"
)

// TestRequireDomain: with RequireDomain (HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED)
// the server is unready while the Envoy configuration has no domain, and
// says so, and ready once one is configured.
func TestRequireDomain(t *testing.T) {
	ts := newTestServer(t, grpcConfig)
	dir := t.TempDir()
	if err := ts.srv.LoadEnvoyConfig(dir, rls.Options{RequireDomain: true}); err != nil {
		t.Fatal(err)
	}
	if w := ts.do("GET", "/healthcheck", ""); w.Code != 500 || !strings.Contains(w.Body.String(), "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED") {
		t.Errorf("/healthcheck with no domain: %d %s", w.Code, w.Body)
	}
	if w := ts.do("GET", "/readyz", ""); w.Code != 503 || !strings.Contains(w.Body.String(), "no domain") {
		t.Errorf("/readyz with no domain: %d %s", w.Code, w.Body)
	}
	if err := os.WriteFile(filepath.Join(dir, "d.yaml"), []byte("domain: d\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ts.srv.ReloadEnvoyConfig(); err != nil {
		t.Fatal(err)
	}
	if w := ts.do("GET", "/healthcheck", ""); w.Code != 200 {
		t.Errorf("/healthcheck with a domain: %d %s", w.Code, w.Body)
	}
}
