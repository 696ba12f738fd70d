package quota

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestCreditRequestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  CreditRequest
		want string // "" valid; else a word of the error, which names the field
	}{
		{"get", CreditRequest{Policy: "api", Op: "get"}, ""},
		{"add", CreditRequest{Policy: "api", Op: "add", Amount: 5, ID: "inv-1"}, ""},
		{"take away", CreditRequest{Policy: "api", Op: "add", Amount: -5}, ""},
		{"set 0", CreditRequest{Policy: "api", Op: "set"}, ""},
		{"no policy", CreditRequest{Op: "get"}, "policy"},
		{"no op", CreditRequest{Policy: "api"}, "op"},
		{"bad op", CreditRequest{Policy: "api", Op: "topup"}, "op"},
		{"get with amount", CreditRequest{Policy: "api", Op: "get", Amount: 3}, "amount"},
		{"add 0", CreditRequest{Policy: "api", Op: "add"}, "amount"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.req.Check()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Check() = %v, want nil", err)
			case tc.want != "" && (err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Check() = %v, want an ErrInvalid naming %s", err, tc.want)
			}
		})
	}
}

func TestParseUsageQuery(t *testing.T) {
	q, _ := url.ParseQuery("policy=api&rule=monthly&user=acme&region=eu&at=2027-01-01T00:00:00%2B01:00")
	got, err := ParseUsageQuery(q)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2027, 1, 1, 0, 0, 0, 0, time.FixedZone("", 3600))
	if got.Policy != "api" || got.Rule != "monthly" || !got.At.Equal(at) || len(got.Attributes) != 2 ||
		got.Attributes["user"] != "acme" || got.Attributes["region"] != "eu" {
		t.Errorf("ParseUsageQuery = %+v", got)
	}
	// UsageQuery is its inverse.
	back, err := ParseUsageQuery(UsageQuery(got.Policy, got.Rule, got.Attributes, got.At))
	if err != nil || back.Policy != got.Policy || back.Rule != got.Rule || !back.At.Equal(at) || len(back.Attributes) != 2 {
		t.Errorf("ParseUsageQuery(UsageQuery(...)) = %+v, %v", back, err)
	}
	for _, tc := range []struct{ query, want string }{
		{"rule=monthly&user=acme", "policy"},
		{"policy=api&at=yesterday", "at"},
		{"policy=api&at=1969-12-31T23:59:59Z", "before 1970"},
		{"policy=api&user=a&user=b", `"user"`},
	} {
		q, _ := url.ParseQuery(tc.query)
		if _, err := ParseUsageQuery(q); err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseUsageQuery(%s) = %v, want an ErrInvalid naming %s", tc.query, err, tc.want)
		}
	}
}

func TestUsageCSV(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	at := func(m time.Month) time.Time { return time.Date(2026, m, 1, 0, 0, 0, 0, berlin) }
	u := Usage{Policy: "api", Rule: "monthly", Period: "month", TimeZone: "Europe/Berlin", Limit: 100, Periods: []PeriodUsage{
		{Start: at(3), End: at(4), Used: 7, Limit: 100},
		{Start: at(2), End: at(3), Used: 0, Limit: 100},
	}}
	var b strings.Builder
	if err := u.Write(&b, CSV); err != nil {
		t.Fatal(err)
	}
	want := CSVHeader + "\n" +
		"2026-03-01T00:00:00+01:00,2026-04-01T00:00:00+02:00,7,100\n" +
		"2026-02-01T00:00:00+01:00,2026-03-01T00:00:00+01:00,0,100\n"
	if b.String() != want {
		t.Errorf("CSV:\n%s\nwant:\n%s", b.String(), want)
	}
}
