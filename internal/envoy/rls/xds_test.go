package rls

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicerate/sluice/internal/envoy"
	"github.com/sluicerate/sluice/internal/envoy/xds"
	"github.com/sluicerate/sluice/internal/front"
	"github.com/sluicerate/sluice/memstore"
)

// TestRLConfigNamesTheVersionShown: /rlconfig under a control plane names
// the version of the configuration it shows, though the client's status,
// updated once Apply has returned, still names the one before (as it does
// for a moment after each swap).
func TestRLConfigNamesTheVersionShown(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := front.New(memstore.New(memstore.Config{}), front.Options{Registry: reg})
	e := New(f, reg)
	status := xds.Status{Server: "cp:18001"}
	if err := e.UseXDS(Options{}, false, func() xds.Status { return status }); err != nil {
		t.Fatal(err)
	}
	rlconfig := func() string {
		rec := httptest.NewRecorder()
		e.handleRLConfig(rec, httptest.NewRequest(http.MethodGet, "/rlconfig", nil))
		return rec.Body.String()
	}
	if got := rlconfig(); got != "# xDS control plane cp:18001: no version applied yet\n" {
		t.Errorf("before the first version: %q", got)
	}
	for _, v := range []struct{ version, limit string }{{"1", "10"}, {"2", "20"}} {
		doc := envoy.Source{Name: xds.SourceName("r"), Data: []byte("domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: " + v.limit + "}\n")}
		if err := e.Apply(v.version, []envoy.Source{doc}); err != nil {
			t.Fatal(err)
		}
		got := rlconfig()
		if !strings.HasPrefix(got, "# xDS control plane cp:18001: version "+v.version+", 1 resources, applied ") ||
			!strings.Contains(got, "d.k: unit=MINUTE requests_per_unit="+v.limit+",") {
			t.Errorf("after version %s was applied (the client's status at %q):\n%s", v.version, status.Version, got)
		}
		status.Version = v.version // the client's status, a moment later
	}
}
