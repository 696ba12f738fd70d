package decide_test

import (
	"context"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicerate/sluice/internal/envoy"
	"github.com/sluicerate/sluice/internal/envoy/decide"
)

// TestCalendarMonth: 2 a calendar month in UTC, from the last second of
// January: two hits pass, the third is over until February starts, to the
// second, and February's count starts from 0; without the option the
// month is 30 days from the first hit.
func TestCalendarMonth(t *testing.T) {
	file := "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: month, requests_per_unit: 2}\n"
	for _, calendar := range []bool{true, false} {
		cfg, err := envoy.Parse([]envoy.Source{{Name: "a.yaml", Data: []byte(file)}}, envoy.LoadOptions{CalendarUnits: calendar})
		if err != nil {
			t.Fatal(err)
		}
		lim, clk := setup(t)
		clk.Set(time.Date(2026, 1, 31, 23, 59, 59, 0, time.UTC))
		r := req("d", 1, [][2]string{{"k", "v"}})
		ask := func() *rlsv3.RateLimitResponse_DescriptorStatus {
			t.Helper()
			res, err := decide.Decide(context.Background(), cfg, lim, r, decide.Options{})
			if err != nil {
				t.Fatal(err)
			}
			return res.Response.Statuses[0]
		}
		ask()
		ask()
		st := ask()
		reset := int64(1)
		if !calendar {
			reset = 30 * 24 * 3600
		}
		if st.Code != rlsv3.RateLimitResponse_OVER_LIMIT || st.DurationUntilReset.GetSeconds() != reset || st.CurrentLimit.Unit != rlsv3.RateLimitResponse_RateLimit_MONTH {
			t.Errorf("calendar %v: third hit: %v, want OVER_LIMIT for %ds of MONTH", calendar, st, reset)
		}
		clk.Advance(time.Second)
		st = ask()
		if want := calendar; (st.Code == rlsv3.RateLimitResponse_OK) != want {
			t.Errorf("calendar %v: on 1 February: %v", calendar, st.Code)
		}
		if calendar && st.LimitRemaining != 1 {
			t.Errorf("calendar: February's first hit leaves %d, want 1", st.LimitRemaining)
		}
	}
}
