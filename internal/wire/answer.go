package wire

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/httplimit"
)

// DecisionJSON is a Decision as the HTTP API returns it (and sluice check
// --json prints it): durations in whole milliseconds, rounded up.
type DecisionJSON struct {
	Allowed      bool        `json:"allowed"`
	Remaining    int64       `json:"remaining"`
	RetryAfterMS int64       `json:"retry_after_ms"`
	ResetAfterMS int64       `json:"reset_after_ms"`
	DeniedBy     string      `json:"denied_by"`
	Cause        string      `json:"cause"`
	Shadowed     bool        `json:"shadowed,omitempty"`
	Local        bool        `json:"local,omitempty"` // answered from this server's slices of budgeted rules
	Degraded     bool        `json:"degraded"`
	Limits       []LimitJSON `json:"limits"`
}

// LimitJSON is one rule's status in a DecisionJSON.
type LimitJSON struct {
	Name         string `json:"name"`
	Limit        int64  `json:"limit"`
	Used         int64  `json:"used"`
	Remaining    int64  `json:"remaining"`
	WindowMS     int64  `json:"window_ms"`
	RetryAfterMS int64  `json:"retry_after_ms"`
	Cause        string `json:"cause"`
}

// Millis returns d in whole milliseconds, rounded up so that a client
// that waits that long never retries too early: every duration of the
// API's JSON.
func Millis(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// NewDecisionJSON returns the JSON form of d.
func NewDecisionJSON(d *sluice.Decision) DecisionJSON {
	out := DecisionJSON{
		Allowed:      d.Allowed,
		Remaining:    d.Remaining,
		RetryAfterMS: Millis(d.RetryAfter),
		ResetAfterMS: Millis(d.ResetAfter),
		DeniedBy:     d.DeniedBy,
		Cause:        string(d.Cause),
		Shadowed:     d.Shadowed,
		Local:        d.Local,
		Degraded:     d.Degraded,
		Limits:       make([]LimitJSON, len(d.Limits())),
	}
	for i, l := range d.Limits() {
		out.Limits[i] = LimitJSON{Name: l.Rule, Limit: l.Limit, Used: l.Used, Remaining: l.Remaining,
			WindowMS: Millis(l.Window), RetryAfterMS: Millis(l.RetryAfter), Cause: string(l.Cause)}
	}
	return out
}

// The answers of /v1/decide, /v1/peek and /v1/record are encoded by hand,
// appended to a buffer reused between requests: a decision as
// json.Marshal(NewDecisionJSON(d)) writes it, a problem as
// httplimit.Problem.Write does, byte for byte (answer_test.go compares
// them on fuzzed values).

// Header values shared by every answer; net/http only reads them.
var (
	jsonContentType    = []string{"application/json"}
	problemContentType = []string{"application/problem+json"}
	noSniff            = []string{"nosniff"}
)

// WriteDecision writes body, a JSON answer that ends in a newline, as
// writeJSON does: status 200, Content-Type application/json and the length.
func WriteDecision(w http.ResponseWriter, body []byte) {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h["Content-Length"] = contentLength(len(body))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// contentLengths are the Content-Length values of the lengths of most
// answers, made on first use.
var contentLengths [4096]atomic.Pointer[[1]string]

// contentLength returns the Content-Length value of a body of n bytes.
func contentLength(n int) []string {
	if n >= len(contentLengths) {
		return []string{strconv.Itoa(n)}
	}
	v := contentLengths[n].Load()
	if v == nil {
		v = &[1]string{strconv.Itoa(n)}
		contentLengths[n].Store(v)
	}
	return v[:]
}

// WriteProblem writes body, AppendProblem's encoding of p followed by a
// newline, with the headers of httplimit.Problem.Write.
func WriteProblem(w http.ResponseWriter, p *httplimit.Problem, body []byte) {
	h := w.Header()
	h["Content-Type"] = problemContentType
	h["X-Content-Type-Options"] = noSniff
	delete(h, "Content-Length")
	w.WriteHeader(p.Status)
	_, _ = w.Write(body)
}

// AppendDecision appends d as json.Marshal(NewDecisionJSON(d)) encodes it.
func AppendDecision(b []byte, d *sluice.Decision) []byte {
	b = append(b, `{"allowed":`...)
	b = strconv.AppendBool(b, d.Allowed)
	b = append(b, `,"remaining":`...)
	b = strconv.AppendInt(b, d.Remaining, 10)
	b = append(b, `,"retry_after_ms":`...)
	b = strconv.AppendInt(b, Millis(d.RetryAfter), 10)
	b = append(b, `,"reset_after_ms":`...)
	b = strconv.AppendInt(b, Millis(d.ResetAfter), 10)
	b = append(b, `,"denied_by":`...)
	b = appendString(b, d.DeniedBy)
	b = append(b, `,"cause":`...)
	b = appendString(b, string(d.Cause))
	if d.Shadowed {
		b = append(b, `,"shadowed":true`...)
	}
	if d.Local {
		b = append(b, `,"local":true`...)
	}
	b = append(b, `,"degraded":`...)
	b = strconv.AppendBool(b, d.Degraded)
	b = append(b, `,"limits":[`...)
	for i := range d.Limits() {
		l := &d.Limits()[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = appendString(b, l.Rule)
		b = append(b, `,"limit":`...)
		b = strconv.AppendInt(b, l.Limit, 10)
		b = append(b, `,"used":`...)
		b = strconv.AppendInt(b, l.Used, 10)
		b = append(b, `,"remaining":`...)
		b = strconv.AppendInt(b, l.Remaining, 10)
		b = append(b, `,"window_ms":`...)
		b = strconv.AppendInt(b, Millis(l.Window), 10)
		b = append(b, `,"retry_after_ms":`...)
		b = strconv.AppendInt(b, Millis(l.RetryAfter), 10)
		b = append(b, `,"cause":`...)
		b = appendString(b, string(l.Cause))
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

// AppendProblem appends p as httplimit.Problem.Write encodes it, with an
// empty Type written as "about:blank" and an empty Title as the status
// code's text.
func AppendProblem(b []byte, p *httplimit.Problem) []byte {
	typ, title := p.Type, p.Title
	if typ == "" {
		typ = "about:blank"
	}
	if title == "" {
		title = http.StatusText(p.Status)
	}
	b = append(b, `{"type":`...)
	b = appendString(b, typ)
	b = append(b, `,"title":`...)
	b = appendString(b, title)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(p.Status), 10)
	if p.Detail != "" {
		b = append(b, `,"detail":`...)
		b = appendString(b, p.Detail)
	}
	if p.Code != "" {
		b = append(b, `,"code":`...)
		b = appendString(b, p.Code)
	}
	if len(p.ViolatedPolicies) > 0 {
		b = append(b, `,"violated-policies":[`...)
		for i, v := range p.ViolatedPolicies {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, v)
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// appendString appends s as a JSON string as encoding/json writes it:
// ", \ and control characters escaped (\b, \f, \n, \r, \t by name), <, >
// and & escaped for HTML, U+2028 and U+2029 escaped, and each byte that is
// not UTF-8 written as \ufffd.
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			i += n
			continue
		}
		i += n
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
