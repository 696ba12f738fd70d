package admin_test

import (
	"testing"

	"github.com/sluicerate/sluice/internal/admin"
	"github.com/sluicerate/sluice/internal/server"
)

// TestDeniedCountsCachedDenials: 40 requests from two clients over two
// policies behind the deny cache. Every denial is counted in "Denied now"
// and in the rates, whether the store or the cache answered it; the view
// says how many the cache answered, and the figures are the server's
// counters: sluice_decisions_total's denials and
// sluice_deny_cache_hits_total.
func TestDeniedCountsCachedDenials(t *testing.T) {
	t.Parallel()
	as := newAdminServerWith(t, testConfig, "", server.Options{DenyCache: 100})
	reg := as.reg
	for range 20 {
		as.do("POST", "/v1/decide", `{"policy":"notify","attributes":{"category":"alerts"}}`)
		as.do("POST", "/v1/decide", `{"policy":"edge","attributes":{"ip":"203.0.113.9","user":"ann"}}`)
	}
	denials := counterValues(t, reg, "sluice_decisions_total", "policy", "rule", "outcome")
	hits := counterValues(t, reg, "sluice_deny_cache_hits_total")[""]
	if denials["notify|category|denied"] != 18 || denials["edge|per-ip|denied"] != 18 || hits != 34 {
		t.Fatalf("counters: %v, %v cache hits; want 18 denials on each policy, 34 answered by the cache", denials, hits)
	}
	var d admin.DeniedJSON
	as.getJSON("/api/v1/denied", &d)
	var cached int64
	for _, want := range []struct{ policy, rule, key string }{{"notify", "category", "alerts"}, {"edge", "per-ip", "203.0.113.9"}} {
		found := false
		for _, r := range d.Rules {
			if r.Policy != want.policy || r.Rule != want.rule {
				continue
			}
			found = true
			if len(r.Keys) != 1 || r.Keys[0].Values[0] != want.key || r.Keys[0].Count != 18 || r.Denials != 18 || r.Keys[0].Cached != r.Cached || r.Cached != 17 {
				t.Errorf("%s/%s: %+v, want %s denied 18 times, 17 of them by the cache", want.policy, want.rule, r, want.key)
			}
			cached += r.Cached
		}
		if !found {
			t.Errorf("no table for %s/%s in %+v", want.policy, want.rule, d.Rules)
		}
	}
	if float64(cached) != hits {
		t.Errorf("the view says the cache answered %d, the counter %v", cached, hits)
	}
	var r admin.RatesJSON
	as.getJSON("/api/v1/rates?seconds=60", &r)
	for _, s := range r.Series {
		if s.Outcome == "denied" && float64(s.Total) != denials[s.Policy+"|"+s.Rule+"|denied"] {
			t.Errorf("rates %s/%s: %d denials, the counter %v", s.Policy, s.Rule, s.Total, denials[s.Policy+"|"+s.Rule+"|denied"])
		}
	}
}
