package wire

import (
	"testing"
	"time"

	"github.com/sluicerate/sluice"
)

// TestRuleJSON: GET /v1/policies and the admin view show each kind of rule
// as what it is: a concurrency rule's algorithm, limit and window are its
// leases, not a log of 0 per 0s.
func TestRuleJSON(t *testing.T) {
	p := &sluice.Policy{Name: "llm", Rules: []sluice.Rule{
		{Name: "tokens", By: []string{"user"}, Limit: 100000, Window: time.Minute},
		{Name: "calls", By: []string{"user"}, Concurrency: 4, Lease: 30 * time.Second},
	}}
	tests := []struct {
		rule                 int
		algorithm            string
		limit, window, lease int64
	}{
		{0, "log", 100000, 60000, 0},
		{1, "concurrency", 4, 30000, 30000},
	}
	for _, tt := range tests {
		got := NewRuleJSON(p, &p.Rules[tt.rule])
		if got.Algorithm != tt.algorithm || got.Limit != tt.limit || got.WindowMS != tt.window || got.LeaseMS != tt.lease {
			t.Errorf("rule %s: algorithm %q limit %d window_ms %d lease_ms %d; want %q %d %d %d", got.Name,
				got.Algorithm, got.Limit, got.WindowMS, got.LeaseMS, tt.algorithm, tt.limit, tt.window, tt.lease)
		}
	}
}
