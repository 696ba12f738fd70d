package config

import (
	"strings"
	"testing"
	"time"
)

func TestParseBudget(t *testing.T) {
	c, err := Parse("f.yaml", []byte("policies:\n  - name: p\n    limits: [{name: global, limit: 1000, window: 1m, budget: 2s}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Policies[0].Rules[0].Budget; got != 2*time.Second {
		t.Errorf("budget: got %v, want 2s", got)
	}
	for _, tt := range []struct{ policy, want string }{
		{"limits: [{name: r, limit: 10, window: 1m, budget: 16s}]", `rule "r": budget 16s is longer than 15s, a quarter of the window`},
		{"limits: [{name: r, limit: 10, window: 1m, min_gap: 1s, budget: 1s}]", `rule "r": a min gap cannot be budgeted`},
		{"penalize: true\n    limits: [{name: r, limit: 10, window: 1m, budget: 1s}]", `rule "r": a penalize policy records denied attempts`},
		{"limits: [{name: r, concurrency: 2, lease: 1s, budget: 1s}]", `rule "r": a concurrency rule cannot be budgeted`},
	} {
		_, err := Parse("f.yaml", []byte("policies:\n  - name: p\n    "+tt.policy+"\n"))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.policy, err, tt.want)
		}
	}
}
