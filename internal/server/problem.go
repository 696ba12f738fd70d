package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/edge"
)

// The server answers errors with httplimit.Problem, RFC 9457 problem
// details whose code member names the class of problem for programs:
// malformed_json, unknown_policy, unknown_schedule, missing_attribute,
// invalid_attribute, invalid_cost, cost_exceeds_limit, bad_request,
// batch_too_large, body_too_large, not_found, method_not_allowed, unavailable, internal. The
// classes of sluice's errors for bad input are edge.Classify's.

// badRequest is a 400 problem.
func badRequest(code, format string, args ...any) *httplimit.Problem {
	return &httplimit.Problem{Status: http.StatusBadRequest, Code: code, Detail: fmt.Sprintf(format, args...)}
}

// outcomeProblem is the problem that answers o instead of a decision, or
// nil when o has a decision to answer with (allowed, denied, or decided by
// the failure policy): bad input with its class and error, 500 when the
// Limiter failed.
func outcomeProblem(o *edge.Outcome) *httplimit.Problem {
	switch o.Kind {
	case edge.BadInput:
		c := o.Class()
		return &httplimit.Problem{Status: c.Status, Code: c.Code, Detail: o.Err.Error()}
	case edge.Failed:
		return &httplimit.Problem{Status: http.StatusInternalServerError, Code: "internal"}
	}
	return nil
}

// inputProblem is the 400 problem of an error for bad input from the
// Limiter, or nil for any other error.
func inputProblem(err error) *httplimit.Problem {
	if c, ok := edge.Classify(err); ok {
		return &httplimit.Problem{Status: c.Status, Code: c.Code, Detail: err.Error()}
	}
	return nil
}

// errNoSchedules reports a store that keeps no schedules.
var errNoSchedules = errors.New("server: the store keeps no schedules")
