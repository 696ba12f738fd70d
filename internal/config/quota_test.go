package config

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
)

// TestParseQuotas reads an API plan (10 a second, 100,000 a month in
// Berlin with a year of history, credits for the overage renewed to 500
// each month) and a weekly quota starting on Monday.
func TestParseQuotas(t *testing.T) {
	t.Parallel()
	c, err := Parse("f.yaml", []byte(`policies:
  - name: api
    limits:
      - {name: per-second, by: [key], limit: 10, window: 1s}
      - {name: monthly, by: [key], period: month, timezone: Europe/Berlin, limit: 100000, history: 12}
      - {name: overage, by: [key], credits: 500, refill: {to: 500, every: month}, timezone: Europe/Berlin, covers: monthly}
  - name: weekly
    limits:
      - {name: w, period: week, week_start: monday, limit: 7}
      - {name: rollover, credits: 0, refill: {add: 100, every: day}}
`))
	if err != nil {
		t.Fatal(err)
	}
	berlin, _ := time.LoadLocation("Europe/Berlin")
	api := c.Policy("api")
	m, o := api.Rules[1], api.Rules[2]
	if m.Period != sluice.Month || m.Location.String() != berlin.String() || m.Limit != 100000 || m.History != 12 || m.Window != 0 {
		t.Errorf("monthly: got %+v", m)
	}
	if o.Algorithm != sluice.Credits || o.Limit != 500 || o.Refill != (sluice.Refill{To: 500, Every: sluice.Month}) || o.Covers != "monthly" || o.Location.String() != berlin.String() {
		t.Errorf("overage: got %+v", o)
	}
	w := c.Policy("weekly")
	if got := w.Rules[0]; got.Period != sluice.Week || got.WeekStart != time.Monday || got.Location != nil {
		t.Errorf("weekly: got %+v", got)
	}
	if got := w.Rules[1]; got.Algorithm != sluice.Credits || got.Limit != 0 || got.Refill != (sluice.Refill{Add: 100, Every: sluice.Day}) {
		t.Errorf("rollover: got %+v", got)
	}
}

// TestParseQuotaErrors checks that each field of calendar quotas and
// credits rules that cannot hold is reported at its line with a fix.
func TestParseQuotaErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ rule, want string }{
		{"{name: r, period: month, timezone: Europe/Berlln, limit: 1}", `f.yaml:4:42: timezone "Europe/Berlln" is not a time zone the time zone database knows; give an IANA name`},
		{"{name: r, period: month, timezone: Local, limit: 1}", `f.yaml:4:42: timezone "Local"`},
		{"{name: r, period: fortnight, limit: 1}", `f.yaml:4:25: period is "fortnight"; use day, week, month or year`},
		{"{name: r, period: month}", `f.yaml:4:7: rule "r" of policy "p" has no limit; add limit: followed by the most cost per month`},
		{"{name: r, period: month, limit: 1, window: 1m}", `a calendar quota takes no window (it has 1m0s): its period, month, is its window; leave window out`},
		{"{name: r, period: month, limit: 1, algorithm: gcra}", `a calendar quota counts per period and takes no algorithm`},
		{"{name: r, period: month, limit: 1, history: 1001}", `history is 1001; keep 0 to 1000 periods`},
		{"{name: r, period: month, limit: 1, week_start: monday}", `a week start is for period week`},
		{"{name: r, period: week, limit: 1, week_start: mon}", `week_start is "mon"; use monday`},
		{"{name: r, limit: 1, window: 1m, timezone: UTC, history: 3}", `a time zone, week start or history is for a calendar quota`},
		{"{name: r, credits: 5, limit: 5}", `has credits and a limit; a credits rule's balance starts at credits`},
		{"{name: r, credits: 5, window: 1m}", `a credits rule takes no window (it has 1m0s): a balance lasts until it is spent`},
		{"{name: r, credits: 5, refill: {to: 5, add: 1, every: day}}", `refill has both to and add`},
		{"{name: r, credits: 5, refill: {to: 5}}", `refill has no every; add every: the period of the refill`},
		{"{name: r, credits: 5, refill: {every: day}}", `refill has neither to nor add`},
		{"{name: r, limit: 5, window: 1m, refill: {to: 5, every: day}}", `refill is for a credits rule; add credits: N`},
		{"{name: r, credits: 5, covers: nope}", `covers "nope": no rule of that name comes before it in the policy`},
		{"{name: r, credits: -1}", `credits is -1; give the balance a key starts with`},
	} {
		_, err := Parse("f.yaml", []byte("policies:\n  - name: p\n    limits:\n    - "+tt.rule+"\n"))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.rule, err, tt.want)
		}
	}
	// Covers names a calendar quota before it, of the same key.
	for _, tt := range []struct{ limits, want string }{
		{"[{name: c, by: [k], credits: 5, covers: m}, {name: m, by: [k], period: month, limit: 1}]", `covers "m": no rule of that name comes before it`},
		{"[{name: m, by: [k], period: month, limit: 1}, {name: c, by: [j], credits: 5, covers: m}]", `give both the same by`},
		{"[{name: m, by: [k], limit: 1, window: 1m}, {name: c, by: [k], credits: 5, covers: m}]", `not a calendar quota`},
	} {
		_, err := Parse("f.yaml", []byte("policies:\n  - name: p\n    limits: "+tt.limits+"\n"))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.limits, err, tt.want)
		}
	}
	// A quota with a problem of its own is reported where it is, and the
	// credits rule covering it is not said to name no rule.
	_, err := Parse("f.yaml", []byte("policies:\n  - name: p\n    limits: [{name: m, by: [k], period: month, timezone: Europe/Berlln, limit: 1}, {name: c, by: [k], credits: 5, covers: m}]\n"))
	if err == nil || !strings.Contains(err.Error(), `timezone "Europe/Berlln"`) || strings.Contains(err.Error(), "no rule of that name") {
		t.Errorf("a quota with a bad time zone and credits covering it: error %v, want the time zone's alone", err)
	}
}
