package httplimit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/edge"
)

// Config configures a Middleware. Limiter, Policies and Keys are required;
// every other field's zero value is its default.
type Config struct {
	// Limiter decides every request. Required.
	Limiter *sluice.Limiter

	// Policies are decided for each request, in order, each with cost 1.
	// The request is served only when every policy allows it; deciding
	// stops at the first policy that denies, so later policies record
	// nothing, while earlier ones have already recorded the request. Rules
	// that must be decided together belong in one policy. Shadow policies
	// never deny. At least one is required; policy names must be distinct,
	// and so must rule names across the policies, because the rule names
	// name the items of the RateLimit fields.
	Policies []*sluice.Policy

	// Keys maps each attribute a rule names (in By, Unless, Match or an
	// override's Match) to the function that reads it from a request.
	// Every such attribute needs one. A function that reports its
	// attribute absent (ErrMissingKey) leaves it out of the request's
	// attributes, and the Limiter decides whether a rule needs it (an
	// Optional rule does not); the value of one that is present must be
	// valid UTF-8.
	Keys map[string]KeyFunc

	// Lease holds a lease of each policy (sluice.Limiter.Acquire) while
	// the handler runs: a slot of each concurrency rule (at most N requests
	// in progress), and cost 1 recorded in the rate rules as an estimate.
	// When the handler returns, or panics, the leases are released; when
	// the handler called ReportCost, they are settled at the cost it
	// reported instead (the tokens a response took, say). Default off:
	// requests are decided (Limiter.AllowN), and a policy with a
	// concurrency rule is an error at each request.
	Lease bool

	// LegacyHeaders also writes X-RateLimit-Limit, X-RateLimit-Remaining
	// and X-RateLimit-Reset for the tightest rule. Default off: only the
	// standard RateLimit-Policy and RateLimit fields.
	LegacyHeaders bool

	// DenyHandler writes the response to a denied request. The rate-limit
	// headers, including Retry-After, are already set. Default: status 429
	// with the QuotaExceeded problem.
	DenyHandler func(w http.ResponseWriter, r *http.Request, d Denial)

	// ErrorHandler writes the response when no decision could be made or
	// the failure policy denied. err is a *KeyError when an attribute fails
	// the request (its key function failed, or reported it absent while a
	// rule needs it, or its value is not valid UTF-8: ErrInvalidKey), wraps
	// ErrUnavailable when the store failed and the Limiter's failure policy
	// denies, and is anything else for an unexpected limiter error.
	// Default: 400 with a problem naming the attribute for a *KeyError
	// (code "missing_attribute", or "invalid_attribute"), 503 with the
	// Unavailable problem for ErrUnavailable, 500 otherwise; no error text
	// from the store ever reaches the client.
	ErrorHandler func(w http.ResponseWriter, r *http.Request, err error)

	// Logger receives store failures (warn), unexpected limiter errors
	// (error), would-be denials of shadow policies (info) and key errors
	// (debug). Store failures are not logged one per request: an outage
	// of the store is logged as its first failure, with its error; the
	// circuit breaker opening and its first probe; one summary every 10 s
	// while failures go on (how many, the policies, the first and last
	// error); and one line when the store answers again, with the
	// outage's length and count. Default: discard.
	Logger *slog.Logger
}

// ErrUnavailable reports that the limiter's store failed and its failure
// policy denied the request. The error passed to Config.ErrorHandler wraps
// it together with the store's error.
var ErrUnavailable = errors.New("httplimit: rate limiter unavailable")

// Denial describes a denied request to a DenyHandler.
type Denial struct {
	// Policy is the policy that denied the request.
	Policy *sluice.Policy

	// Decision is that policy's decision: DeniedBy, RetryAfter and the
	// status of every rule.
	Decision sluice.Decision
}

// Middleware limits the requests of the handlers it wraps. It is safe for
// concurrent use. Its zero value is not usable; create one with New.
type Middleware struct {
	edge        *edge.Edge[*http.Request]
	policyField string
	legacy      bool
	deny        func(http.ResponseWriter, *http.Request, Denial)
	fail        func(http.ResponseWriter, *http.Request, error)
	call        edge.Call
}

// New returns a Middleware configured by cfg. It reports an error, starting
// with "httplimit: ", for a missing limiter, no or invalid policies,
// duplicate policy or rule names, or an attribute without a key function.
func New(cfg Config) (*Middleware, error) {
	e, err := edge.New(edge.Config[*http.Request]{
		Limiter:  cfg.Limiter,
		Policies: cfg.Policies,
		Keys: func(attr string) edge.Key[*http.Request] {
			if fn := cfg.Keys[attr]; fn != nil {
				return edge.Key[*http.Request](fn)
			}
			return nil
		},
		Absent: ErrMissingKey,
		Log:    edge.PackageLog(cfg.Logger, "httplimit", "request"),
	})
	if err != nil {
		return nil, fmt.Errorf("httplimit: %w", err)
	}
	m := &Middleware{edge: e, legacy: cfg.LegacyHeaders, deny: cfg.DenyHandler, fail: cfg.ErrorHandler, call: edge.Call{Cost: 1}}
	if cfg.Lease {
		m.call.Op = edge.OpAcquire
	}
	if m.deny == nil {
		m.deny = defaultDeny
	}
	if m.fail == nil {
		m.fail = defaultError
	}
	ruleOwner := map[string]string{}
	var items []string
	conditional := false
	for _, p := range cfg.Policies {
		for _, r := range p.Rules {
			if owner, ok := ruleOwner[r.Name]; ok {
				return nil, fmt.Errorf("httplimit: rule name %q is used by policies %q and %q; rule names name the RateLimit items and must be distinct", r.Name, owner, p.Name)
			}
			ruleOwner[r.Name] = p.Name
			items = append(items, string(appendQuotaPolicy(nil, r.Name, r.Limit, r.Window)))
			conditional = conditional || r.Optional || len(r.Unless) > 0 || len(r.Match) > 0 || len(r.Overrides) > 0
		}
	}
	if !conditional {
		// Every rule applies to every request with its own limit: the
		// RateLimit-Policy field is the same for all of them.
		m.policyField = strings.Join(items, ", ")
	}
	return m, nil
}

// Handler returns next wrapped by the limiter: a request that every policy
// allows reaches next with the rate-limit headers set; a denied one is
// answered by the DenyHandler. Handler has the shape of net/http
// middleware, func(http.Handler) http.Handler.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.serve(w, r, next)
	})
}

// serve renders the edge's outcome of r: next with the headers when
// allowed, the DenyHandler when a quota denied it, the ErrorHandler
// otherwise.
func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	o := m.edge.Decide(r.Context(), r, m.call)
	switch o.Kind {
	case edge.Allowed:
		writeHeaders(w.Header(), o.Decisions(), m.policyField, m.legacy)
		if m.call.Op == edge.OpAcquire {
			h := m.edge.Hold(&o, m.call)
			defer h.End(r.Context())
			r = r.WithContext(edge.WithHold(r.Context(), h))
		}
		next.ServeHTTP(w, r)
	case edge.Denied:
		writeHeaders(w.Header(), o.Decisions(), m.policyField, m.legacy)
		m.deny(w, r, Denial{Policy: o.Policy, Decision: o.Decision()})
	case edge.Unavailable:
		writeHeaders(w.Header(), o.Decisions(), m.policyField, m.legacy)
		err := ErrUnavailable
		if o.Err != nil {
			err = fmt.Errorf("%w: %w", ErrUnavailable, o.Err)
		}
		m.fail(w, r, err)
	case edge.BadInput:
		if o.Attribute != "" {
			kerr := o.KeyErr
			if kerr == nil {
				kerr = o.Err
			}
			m.fail(w, r, &KeyError{Attribute: o.Attribute, Err: kerr})
			return
		}
		m.fail(w, r, o.Err)
	default:
		m.fail(w, r, o.Err)
	}
}

// ReportCost reports the real cost of the request whose context is ctx,
// for a handler behind a Middleware with Config.Lease: when the handler
// returns, its leases are settled at cost (at least 0) in place of the
// estimate. It reports whether the request holds leases; without them it
// does nothing. The last cost reported counts.
func ReportCost(ctx context.Context, cost int64) bool {
	return edge.ReportCost(ctx, cost)
}

// defaultDeny answers 429 with the quota-exceeded problem.
func defaultDeny(w http.ResponseWriter, _ *http.Request, d Denial) {
	QuotaExceeded(d.Decision).Write(w)
}

// defaultError answers 400 for a key error or other bad input, 503 when
// the store failed, and 500 otherwise.
func defaultError(w http.ResponseWriter, _ *http.Request, err error) {
	var kerr *KeyError
	switch {
	case errors.As(err, &kerr) && errors.Is(err, ErrInvalidKey):
		Problem{
			Status: http.StatusBadRequest,
			Code:   "invalid_attribute",
			Detail: fmt.Sprintf("The request's %q attribute is not valid UTF-8.", kerr.Attribute),
		}.Write(w)
	case errors.As(err, &kerr):
		Problem{
			Status: http.StatusBadRequest,
			Code:   "missing_attribute",
			Detail: fmt.Sprintf("The request lacks the %q attribute its rate limit is keyed on.", kerr.Attribute),
		}.Write(w)
	case errors.Is(err, ErrUnavailable):
		Unavailable().Write(w)
	default:
		if c, ok := edge.Classify(err); ok {
			Problem{Status: c.Status, Code: c.Code, Detail: err.Error()}.Write(w)
			return
		}
		Problem{Status: http.StatusInternalServerError, Code: "internal"}.Write(w)
	}
}
