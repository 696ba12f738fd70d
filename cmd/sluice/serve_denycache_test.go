package main

import (
	"strings"
	"testing"

	"github.com/sluicerate/sluice/internal/redistest"
)

// TestServeDenyCache: sluice serve caches denials by default, on Redis:
// a key over its limit is denied without a Redis call until it has room,
// and --deny-cache 0 turns that off.
func TestServeDenyCache(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	const policy = `
policies:
  - name: edge
    limits:
      - {name: per-ip, by: [ip], limit: 1, window: 1m}
`
	for _, tc := range []struct {
		name string
		args []string
		hits string
	}{
		{"default", nil, "sluice_deny_cache_hits_total 3"},
		{"off", []string{"--deny-cache", "0"}, "sluice_deny_cache_hits_total 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := writeFile(t, t.TempDir(), "sluice.yaml", redisSection(rs.Addr(), "deny-"+tc.name)+policy)
			p := startServe(t, file, tc.args...)
			var d struct {
				Allowed  bool
				DeniedBy string `json:"denied_by"`
			}
			for i := range 5 {
				p.post("/v1/decide", `{"policy":"edge","attributes":{"ip":"203.0.113.7"}}`, &d)
				if d.Allowed != (i == 0) || !d.Allowed && d.DeniedBy != "per-ip" {
					t.Fatalf("request %d: %+v", i+1, d)
				}
			}
			m := string(p.do("GET", "/metrics", "").Body)
			if !strings.Contains(m, tc.hits+"\n") || !strings.Contains(m, `sluice_decisions_total{outcome="denied",policy="edge",rule="per-ip"} 4`) {
				t.Errorf("/metrics lacks %q or the 4 denials:\n%s", tc.hits, m)
			}
		})
	}
	if code, _, errOut := runCLI(t, "serve", "--config", "x.yaml", "--deny-cache", "-1"); code != exitUsage || !strings.Contains(errOut, "--deny-cache -1") {
		t.Errorf("--deny-cache -1: %d %s", code, errOut)
	}
}
