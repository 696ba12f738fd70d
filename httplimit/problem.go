package httplimit

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/sluicerate/sluice"
)

// QuotaExceededType is the problem type of a denied request, defined by the
// RateLimit header fields draft: the request exceeds one or more quota
// policies, listed in the "violated-policies" member.
const QuotaExceededType = "https://iana.org/assignments/http-problem-types#quota-exceeded"

// Problem is an RFC 9457 problem details object, written as
// application/problem+json. It is a plain value: build one with
// QuotaExceeded or Unavailable, or fill in the fields. sluice serve answers
// its errors with it too.
type Problem struct {
	// Type is a URI naming the kind of problem; "about:blank" when the
	// status code says it all. Write writes "about:blank" when it is empty.
	Type string `json:"type"`

	// Title is a short, fixed summary of the problem type. Write writes the
	// status code's text when it is empty.
	Title string `json:"title"`

	// Status is the HTTP status code.
	Status int `json:"status"`

	// Detail explains this occurrence.
	Detail string `json:"detail,omitempty"`

	// Code is an extension member that names the class of an about:blank
	// problem for programs: "missing_attribute", "invalid_attribute",
	// "invalid_cost", "unavailable", "internal", and the others of sluice
	// serve (docs/server.md). Empty, and left out, for a problem whose Type
	// names it, such as quota-exceeded.
	Code string `json:"code,omitempty"`

	// ViolatedPolicies names the quota policies (rules) a denied request
	// exceeded, as they appear in the RateLimit fields.
	ViolatedPolicies []string `json:"violated-policies,omitempty"`
}

// QuotaExceeded returns the problem of a denied decision: status 429, the
// draft's quota-exceeded type, and the rules that did not fit.
func QuotaExceeded(d sluice.Decision) Problem {
	p := Problem{
		Type:   QuotaExceededType,
		Title:  "Request cannot be satisfied as assigned quota has been exceeded",
		Status: http.StatusTooManyRequests,
	}
	for _, s := range d.Limits() {
		if !s.Fits {
			p.ViolatedPolicies = append(p.ViolatedPolicies, s.Rule)
		}
	}
	if n := Seconds(d.RetryAfter); n > 0 {
		p.Detail = fmt.Sprintf("Rate limit exceeded; retry in %d s.", n)
	} else {
		p.Detail = "Rate limit exceeded."
	}
	return p
}

// Unavailable is the problem of a request denied because the limiter's
// store failed: status 503. It says nothing about the failure itself.
func Unavailable() Problem {
	return Problem{
		Type:   "about:blank",
		Title:  "Service Unavailable",
		Status: http.StatusServiceUnavailable,
		Detail: "The rate limiter is unavailable; retry later.",
		Code:   "unavailable",
	}
}

// Write writes p as the response: Content-Type application/problem+json,
// the status code p.Status, and the JSON body, with an empty Type written
// as "about:blank" and an empty Title as the status code's text.
func (p Problem) Write(w http.ResponseWriter) {
	if p.Type == "" {
		p.Type = "about:blank"
	}
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	body, err := json.Marshal(p)
	if err != nil {
		// A Problem holds only strings and an int; this cannot happen.
		body = []byte(`{"type":"about:blank","title":"Internal Server Error","status":500,"code":"internal"}`)
		p.Status = http.StatusInternalServerError
	}
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Del("Content-Length")
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(body, '\n'))
}
