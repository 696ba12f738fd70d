package filecheck

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sluicerate/sluice/internal/envoy"
)

// TestSummarisesQuotas: a calendar quota is summarised by its period, time
// zone and history, a credits rule by its starting balance, refill and
// the quota it covers, and an Envoy limit of calendar units by its period.
func TestSummarisesQuotas(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := writeFile(t, dir, "plan.yaml", `policies:
  - name: plan
    limits:
      - {name: monthly, by: [key], period: month, timezone: Europe/Berlin, limit: 100000, history: 12}
      - {name: overage, by: [key], credits: 0, covers: monthly}
      - {name: weekly, by: [key], credits: 50, refill: {add: 10, every: week}, week_start: monday}
`)
	r, problems, out := check(t, file, "")
	squeezed := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{
		"(calendar 1, credits 2)",
		"rule monthly 100000 per month, calendar, by key, in Europe/Berlin, history 12",
		"rule overage 0 to start, credits, by key, covers monthly",
		"rule weekly 50 to start, credits, by key, refill adds 10 every week, weeks from Monday",
	} {
		if !r.OK() || !strings.Contains(squeezed, want) {
			t.Errorf("ok %v, want %q in:\n%s%s", r.OK(), want, out, problems)
		}
	}
	envoyDir := t.TempDir()
	writeFile(t, envoyDir, "a.yaml", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: month, requests_per_unit: 5}\n")
	for _, calendar := range []bool{false, true} {
		r := Check("", envoyDir, envoy.LoadOptions{CalendarUnits: calendar})
		var s bytes.Buffer
		r.WriteSummary(&s)
		want := "k 5 per 720h0m0s, log, descriptor k"
		if calendar {
			want = "k 5 per month, calendar in UTC, descriptor k"
		}
		if got := strings.Join(strings.Fields(s.String()), " "); !r.OK() || !strings.Contains(got, want) {
			t.Errorf("calendar units %v: want %q in:\n%s", calendar, want, s.String())
		}
	}
}
