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
// QuotaExceeded or Unavailable, or fill in the fields.
type Problem struct {
	// Type is a URI naming the kind of problem; "about:blank" when the
	// status code says it all.
	Type string `json:"type"`

	// Title is a short, fixed summary of the problem type.
	Title string `json:"title"`

	// Status is the HTTP status code.
	Status int `json:"status"`

	// Detail explains this occurrence.
	Detail string `json:"detail,omitempty"`

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
	for _, s := range d.Limits {
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
	}
}

// Write writes p as the response: Content-Type application/problem+json,
// the status code p.Status, and the JSON body.
func (p Problem) Write(w http.ResponseWriter) {
	body, err := json.Marshal(p)
	if err != nil {
		// A Problem holds only strings and an int; this cannot happen.
		body = []byte(`{"type":"about:blank","title":"Internal Server Error","status":500}`)
		p.Status = http.StatusInternalServerError
	}
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Del("Content-Length")
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(body, '\n'))
}
