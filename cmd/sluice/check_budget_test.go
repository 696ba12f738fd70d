package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestCheckSummarisesBudget: sluice check names a budgeted rule's budget
// in its summary, as text and as JSON.
func TestCheckSummarisesBudget(t *testing.T) {
	t.Parallel()
	file := writeFile(t, t.TempDir(), "budget.yaml", `policies:
  - name: notify
    limits:
      - {name: global, limit: 100000, window: 1m, budget: 2s}
      - {name: per-category, by: [category], limit: 10, window: 30m}
`)
	code, out, errOut := runCLI(t, "check", "--config", file)
	squeezed := strings.Join(strings.Fields(out), " ")
	if code != exitOK || !strings.Contains(squeezed, "rule global 100000 per 1m0s, log, budget 2s") ||
		strings.Contains(squeezed, "per-category 10 per 30m0s, log, by category, budget") {
		t.Errorf("check: exit %d, want the global rule summarised with its budget and no other:\n%s%s", code, out, errOut)
	}
	code, out, _ = runCLI(t, "check", "--config", file, "--json")
	var sum fileSummary
	if err := json.Unmarshal([]byte(out), &sum); code != exitOK || err != nil || sum.Config == nil ||
		sum.Config.Policies[0].Rules[0].Detail != "budget 2s" || sum.Config.Policies[0].Rules[1].Detail != "" {
		t.Errorf("check --json: exit %d, %v, %s", code, err, out)
	}
}
