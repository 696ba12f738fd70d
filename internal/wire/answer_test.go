package wire

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/httplimit"
)

// answerStrings are strings every escape of encoding/json applies to.
var answerStrings = []string{"", "category", `a"b\c`, "<&>", "\x00\x01\b\f\n\r\t\x1f\x7f", "\u2028\u2029", "é€😀", "\xff\xfe", "a\xc3", "\ufffd", "\xed\xa0\x80"}

// FuzzDecisionAnswer checks that the hand encoder writes a decision as
// json.Marshal(NewDecisionJSON(d)) does, byte for byte.
func FuzzDecisionAnswer(f *testing.F) {
	for i, s := range answerStrings {
		f.Add(i%2 == 0, int64(i), int64(i)*1_000_001, int64(-i), s, answerStrings[(i+3)%len(answerStrings)], i%3 == 0, i%5 == 1, i%4 == 0, uint8(i%4), s+"x", int64(1)<<62)
	}
	f.Fuzz(func(t *testing.T, allowed bool, remaining, retry, reset int64, deniedBy, cause string, shadowed, local, degraded bool, n uint8, rule string, big int64) {
		d := sluice.Decision{Allowed: allowed, Remaining: remaining, RetryAfter: time.Duration(retry), ResetAfter: time.Duration(reset),
			DeniedBy: deniedBy, Cause: sluice.Cause(cause), Shadowed: shadowed, Local: local, Degraded: degraded}
		for i := range int(n % 4) {
			d.SetLimits(append(d.Limits(), sluice.LimitStatus{Rule: rule + strings.Repeat(deniedBy, i), Limit: big - int64(i), Used: remaining * int64(i),
				Remaining: -remaining, Window: time.Duration(big), RetryAfter: time.Duration(retry * int64(i)), Cause: sluice.Cause(cause)}))
		}
		want, err := json.Marshal(NewDecisionJSON(&d))
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendDecision(nil, &d); !bytes.Equal(got, want) {
			t.Fatalf("AppendDecision:\n got %s\nwant %s", got, want)
		}
	})
}

// FuzzProblemAnswer checks that the hand encoder writes a problem as
// httplimit.Problem.Write does: the same status, headers and body.
func FuzzProblemAnswer(f *testing.F) {
	for i, s := range answerStrings {
		f.Add("", s, 400+i, s+" detail", "invalid_attribute", "")
		f.Add(httplimit.QuotaExceededType, "", 429, "", "", "global,"+s)
	}
	f.Add("about:blank", "", 999, "", "", ",")
	f.Fuzz(func(t *testing.T, typ, title string, status int, detail, code, violated string) {
		if status < 100 || status > 999 {
			return // WriteHeader takes three digits
		}
		p := httplimit.Problem{Type: typ, Title: title, Status: status, Detail: detail, Code: code}
		if violated != "" {
			p.ViolatedPolicies = strings.Split(violated, ",")
		}
		want := httptest.NewRecorder()
		p.Write(want)
		got := httptest.NewRecorder()
		WriteProblem(got, &p, append(AppendProblem(nil, &p), '\n'))
		if got.Code != want.Code || !reflect.DeepEqual(got.Header(), want.Header()) || !bytes.Equal(got.Body.Bytes(), want.Body.Bytes()) {
			t.Fatalf("WriteProblem:\n got %d %v %s\nwant %d %v %s", got.Code, got.Header(), got.Body, want.Code, want.Header(), want.Body)
		}
	})
}

func TestDecisionAnswer(t *testing.T) {
	d := sluice.Decision{Allowed: false, Remaining: 0, RetryAfter: 1799320500 * time.Microsecond, ResetAfter: 30 * time.Minute,
		DeniedBy: "category", Cause: sluice.CauseLimit}
	d.SetLimits([]sluice.LimitStatus{
		{Rule: "global", Limit: 100, Used: 10, Remaining: 90, Window: 30 * time.Minute},
		{Rule: "category", Limit: 10, Used: 10, Window: 30 * time.Minute, RetryAfter: 1799320500 * time.Microsecond, Cause: sluice.CauseLimit},
	})
	const want = `{"allowed":false,"remaining":0,"retry_after_ms":1799321,"reset_after_ms":1800000,"denied_by":"category","cause":"limit","degraded":false,` +
		`"limits":[{"name":"global","limit":100,"used":10,"remaining":90,"window_ms":1800000,"retry_after_ms":0,"cause":""},` +
		`{"name":"category","limit":10,"used":10,"remaining":0,"window_ms":1800000,"retry_after_ms":1799321,"cause":"limit"}]}`
	if got := string(AppendDecision(nil, &d)); got != want {
		t.Errorf("AppendDecision:\n got %s\nwant %s", got, want)
	}
	if got := string(AppendDecision(nil, &sluice.Decision{Allowed: true, Shadowed: true})); !strings.Contains(got, `"shadowed":true,"degraded":false,"limits":[]}`) {
		t.Errorf("AppendDecision of a shadowed decision without limits: %s", got)
	}
	if got := string(AppendDecision(nil, &sluice.Decision{Allowed: true, Local: true})); !strings.Contains(got, `"cause":"","local":true,"degraded":false,`) {
		t.Errorf("AppendDecision of a decision answered from slices: %s", got)
	}
}

func TestContentLength(t *testing.T) {
	for _, n := range []int{0, 9, 10, 99, 100, 4095, 4096, 1 << 20} {
		for range 2 { // made, then cached
			if got := contentLength(n); len(got) != 1 || got[0] != strings.TrimSpace(string(mustJSON(n))) {
				t.Errorf("contentLength(%d) = %q", n, got)
			}
		}
	}
}
