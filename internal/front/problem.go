package front

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/edge"
)

// The fronts answer errors with httplimit.Problem, RFC 9457 problem
// details whose code member names the class of problem for programs:
// malformed_json, unknown_policy, unknown_schedule, missing_attribute,
// invalid_attribute, invalid_cost, cost_exceeds_limit, invalid_lease, bad_request,
// batch_too_large, body_too_large, not_found, method_not_allowed,
// unavailable, internal. The classes of sluice's errors for bad input are
// edge.Classify's. Over gRPC a problem is a status (GRPCError).

// Valid bodies, quoted in the messages about bad ones.
const (
	DecideExample  = `{"policy":"notify","attributes":{"category":"errors"},"cost":1}`
	ReserveExample = `{"schedule":"carrier","attributes":{"carrier":"45"},"cost":1}`
	CancelExample  = `{"schedule":"carrier","attributes":{"carrier":"45"},"id":"…"}`
	LeaseExample   = `{"lease":"…"}`
	SettleExample  = `{"lease":"…","cost":1840}`
)

// BadRequest is a 400 problem.
func BadRequest(code, format string, args ...any) *httplimit.Problem {
	return &httplimit.Problem{Status: http.StatusBadRequest, Code: code, Detail: fmt.Sprintf(format, args...)}
}

// Internal is the 500 problem, which says nothing of what failed.
func Internal() *httplimit.Problem {
	return &httplimit.Problem{Status: http.StatusInternalServerError, Code: "internal"}
}

// OutcomeProblem is the problem that answers o instead of a decision, or
// nil when o has a decision to answer with (allowed, denied, or decided by
// the failure policy): bad input with its class and error, 500 when the
// Limiter failed.
func OutcomeProblem(o *edge.Outcome) *httplimit.Problem {
	switch o.Kind {
	case edge.BadInput:
		c := o.Class()
		return &httplimit.Problem{Status: c.Status, Code: c.Code, Detail: o.Err.Error()}
	case edge.Failed:
		return Internal()
	}
	return nil
}

// LeaseOnly is p with a detail that names how a caller of a front takes
// a lease, how (e.g. "POST /v1/acquire with the same body"), when p answers
// a decide or record on a policy with a concurrency rule: the library's
// own text names Limiter.Acquire, which a caller over the network has no
// use for. Otherwise it is p.
func LeaseOnly(p *httplimit.Problem, err error, how string) *httplimit.Problem {
	var lo interface{ LeaseOnly() (policy, rule string) }
	if p == nil || !errors.As(err, &lo) {
		return p
	}
	policy, rule := lo.LeaseOnly()
	q := *p
	q.Detail = fmt.Sprintf("policy %q rule %q limits the leases alive at once, which decide and record do not take: %s", policy, rule, how)
	return &q
}

// InputProblem is the 400 problem of an error for bad input from the
// Limiter, or nil for any other error.
func InputProblem(err error) *httplimit.Problem {
	if c, ok := edge.Classify(err); ok {
		return &httplimit.Problem{Status: c.Status, Code: c.Code, Detail: err.Error()}
	}
	return nil
}

// GRPCError is a problem as a gRPC status: INVALID_ARGUMENT for bad input,
// UNAVAILABLE or INTERNAL otherwise.
func GRPCError(p *httplimit.Problem) error {
	switch p.Status {
	case http.StatusBadRequest:
		return status.Error(codes.InvalidArgument, p.Detail)
	case http.StatusServiceUnavailable:
		return status.Error(codes.Unavailable, p.Detail)
	}
	return status.Error(codes.Internal, "internal error")
}

// StatusProblem is a gRPC status as a problem, for a front that answers
// over HTTP what a gRPC service answered: 400 bad_request for
// INVALID_ARGUMENT, 503 unavailable for UNAVAILABLE, else 500 internal,
// the status's message as the detail.
func StatusProblem(err error) *httplimit.Problem {
	st := status.Convert(err)
	p := &httplimit.Problem{Status: http.StatusInternalServerError, Code: "internal", Detail: st.Message()}
	switch st.Code() {
	case codes.InvalidArgument:
		p.Status, p.Code = http.StatusBadRequest, "bad_request"
	case codes.Unavailable:
		p.Status, p.Code = http.StatusServiceUnavailable, "unavailable"
	}
	return p
}

// StatusCode is an HTTP status as Answered's code.
func StatusCode(status int) string { return strconv.Itoa(status) }
