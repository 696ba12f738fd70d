package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/sluicerate/sluice"
)

// problem is an RFC 9457 problem details object. Code is an extension
// member that names the class of problem for programs: malformed_json,
// unknown_policy, unknown_schedule, missing_attribute, invalid_cost,
// cost_exceeds_limit, bad_request, body_too_large, not_found,
// method_not_allowed, unavailable, internal.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	Code   string `json:"code"`
}

// writeProblem writes p as application/problem+json.
func writeProblem(w http.ResponseWriter, p problem) {
	if p.Type == "" {
		p.Type = "about:blank"
	}
	if p.Title == "" {
		p.Title = http.StatusText(p.Status)
	}
	body, _ := json.Marshal(p)
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(body, '\n'))
}

// badRequest is a 400 problem.
func badRequest(code, format string, args ...any) *problem {
	return &problem{Status: http.StatusBadRequest, Code: code, Detail: fmt.Sprintf(format, args...)}
}

// isBadInput reports whether err is an error for bad input, which changes
// nothing and is the client's to fix.
func isBadInput(err error) bool {
	return inputProblem(err) != nil
}

// inputProblem maps an error for bad input from the Limiter to its 400
// problem, or returns nil for any other error.
func inputProblem(err error) *problem {
	for _, c := range inputErrors {
		if errors.Is(err, c.err) {
			return &problem{Status: http.StatusBadRequest, Code: c.code, Detail: err.Error()}
		}
	}
	return nil
}

var inputErrors = []struct {
	err  error
	code string
}{
	{sluice.ErrUnknownPolicy, "unknown_policy"},
	{sluice.ErrMissingAttribute, "missing_attribute"},
	{sluice.ErrInvalidCost, "invalid_cost"},
	{sluice.ErrCostExceedsLimit, "cost_exceeds_limit"},
	{sluice.ErrInvalidPolicy, "bad_request"},
	{sluice.ErrEmptyPolicy, "bad_request"},
	{sluice.ErrUnknownSchedule, "unknown_schedule"},
	{sluice.ErrInvalidSchedule, "bad_request"},
}

// errNoSchedules reports a store that keeps no schedules.
var errNoSchedules = errors.New("server: the store keeps no schedules")
