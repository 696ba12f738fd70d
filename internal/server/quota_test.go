package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sluicerate/sluice/internal/quota"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/storetest"
)

// quotaConfig is an API plan: 3 a month per key in Berlin with a year of
// history, and credits that pay for the overage, renewed to 2 each month.
const quotaConfig = `
policies:
  - name: api
    limits:
      - {name: monthly, by: [key], period: month, timezone: Europe/Berlin, limit: 3, history: 12}
      - {name: overage, by: [key], credits: 2, refill: {to: 2, every: month}, timezone: Europe/Berlin, covers: monthly}
`

// TestQuotaEndpoints drives a key's balance and its monthly usage through
// POST /v1/credits, /v1/decide and GET /v1/usage on a memory store whose
// clock the test moves: the balance's changes (an id applied once), the
// monthly counts (with the overage credits paid for), and each period's
// bounds in Berlin.
func TestQuotaEndpoints(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	clock := storetest.NewClock(time.Date(2026, 3, 10, 12, 0, 0, 0, berlin))
	st := memstore.New(memstore.Config{Clock: clock.Now})
	t.Cleanup(func() { st.Close() })
	ts := testServerFor(t, st, quotaConfig, Options{})
	admin := &testServer{t: t, srv: ts.srv, h: ts.srv.AdminHandler(AdminOptions{})} // no tokens: anyone, as on loopback

	credit := func(body string) quota.Balance {
		t.Helper()
		w := admin.do("POST", "/v1/credits", body)
		if w.Code != 200 {
			t.Fatalf("POST /v1/credits %s = %d %s", body, w.Code, w.Body)
		}
		var b quota.Balance
		if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil {
			t.Fatal(err)
		}
		return b
	}
	toApril := time.Date(2026, 4, 1, 0, 0, 0, 0, berlin).Sub(clock.Now()).Milliseconds()
	for _, tc := range []struct {
		body string
		want quota.Balance
	}{
		{`{"policy":"api","attributes":{"key":"k1"},"op":"get"}`, quota.Balance{Balance: 2, NextRefillMS: toApril}},
		{`{"policy":"api","attributes":{"key":"k1"},"op":"add","amount":10,"id":"inv-1"}`, quota.Balance{Balance: 12, Applied: true, NextRefillMS: toApril}},
		{`{"policy":"api","attributes":{"key":"k1"},"op":"add","amount":10,"id":"inv-1"}`, quota.Balance{Balance: 12, NextRefillMS: toApril}},
		{`{"policy":"api","rule":"overage","attributes":{"key":"k1"},"op":"set","amount":1}`, quota.Balance{Balance: 1, Applied: true, NextRefillMS: toApril}},
		{`{"policy":"api","attributes":{"key":"k2"},"op":"get"}`, quota.Balance{Balance: 2, NextRefillMS: toApril}},
	} {
		if got := credit(tc.body); got != tc.want {
			t.Errorf("POST /v1/credits %s = %+v, want %+v", tc.body, got, tc.want)
		}
	}

	// A key without its attribute, a rule of the wrong kind, an amount or
	// id out of range: 400s that name them, the balance unchanged.
	for body, want := range map[string]string{
		`{"policy":"api","op":"add","amount":5}`:                                                                   `needs attribute "key"`,
		`{"policy":"api","rule":"monthly","attributes":{"key":"k1"},"op":"add","amount":5}`:                        `policy "api" rule "monthly" is not a credits rule; its credits rules: overage`,
		`{"policy":"api","attributes":{"key":"k1"},"op":"set","amount":9007199254740993}`:                          "amount 9007199254740993 out of range",
		`{"policy":"api","attributes":{"key":"k1"},"op":"add","amount":1,"id":"` + strings.Repeat("x", 200) + `"}`: "an id of 200 bytes",
	} {
		if w := admin.do("POST", "/v1/credits", body); w.Code != 400 || !strings.Contains(problemDetail(t, w), want) {
			t.Errorf("POST /v1/credits %s = %d %s, want 400 with %q", body, w.Code, w.Body, want)
		}
	}
	if b := credit(`{"policy":"api","attributes":{"key":"k1"},"op":"get"}`); b.Balance != 1 {
		t.Errorf("after the refused changes the balance is %d, want 1", b.Balance)
	}

	// March: 3 in the quota, 1 paid with the credit, then denied.
	allowed := 0
	for range 6 {
		if ts.decide("/v1/decide", `{"policy":"api","attributes":{"key":"k1"}}`).Allowed {
			allowed++
		}
		clock.Advance(time.Hour)
	}
	if allowed != 4 {
		t.Errorf("March: %d allowed, want 3 in the quota and 1 on credit", allowed)
	}
	if b := credit(`{"policy":"api","attributes":{"key":"k1"},"op":"get"}`); b.Balance != 0 {
		t.Errorf("after the overage the balance is %d, want 0", b.Balance)
	}
	// May: 2. (April: nothing.)
	clock.Set(time.Date(2026, 5, 31, 23, 0, 0, 0, berlin))
	for range 2 {
		ts.decide("/v1/decide", `{"policy":"api","attributes":{"key":"k1"}}`)
	}

	w := admin.do("GET", "/v1/usage?policy=api&key=k1&at=2026-06-01T00:00:00%2B02:00", "")
	if w.Code != 200 {
		t.Fatalf("GET /v1/usage = %d %s", w.Code, w.Body)
	}
	var u quota.Usage
	if err := json.Unmarshal(w.Body.Bytes(), &u); err != nil {
		t.Fatal(err)
	}
	if u.Policy != "api" || u.Rule != "monthly" || u.Period != "month" || u.TimeZone != "Europe/Berlin" || u.Limit != 3 || len(u.Periods) != 13 {
		t.Fatalf("usage %+v, want api/monthly, month in Europe/Berlin, limit 3, 13 periods", u)
	}
	var got []string
	for _, p := range u.Periods[:4] {
		got = append(got, fmt.Sprintf("%s..%s:%d/%d", p.Start.Format(time.RFC3339), p.End.Format(time.RFC3339), p.Used, p.Limit))
	}
	want := []string{
		"2026-06-01T00:00:00+02:00..2026-07-01T00:00:00+02:00:0/3",
		"2026-05-01T00:00:00+02:00..2026-06-01T00:00:00+02:00:2/3",
		"2026-04-01T00:00:00+02:00..2026-05-01T00:00:00+02:00:0/3",
		"2026-03-01T00:00:00+01:00..2026-04-01T00:00:00+02:00:4/3",
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("periods:\n got %q\nwant %q", got, want)
	}
	// The times are written in the rule's zone, as RFC 3339.
	if !strings.Contains(w.Body.String(), `"start":"2026-03-01T00:00:00+01:00"`) {
		t.Errorf("the answer does not write March's start in Berlin: %s", w.Body)
	}
}
