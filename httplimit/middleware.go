package httplimit

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/sluicerate/sluice"
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

	// Keys maps each attribute named in a rule's By list to the function
	// that reads it from a request. Every such attribute needs one.
	Keys map[string]KeyFunc

	// LegacyHeaders also writes X-RateLimit-Limit, X-RateLimit-Remaining
	// and X-RateLimit-Reset for the tightest rule. Default off: only the
	// standard RateLimit-Policy and RateLimit fields.
	LegacyHeaders bool

	// DenyHandler writes the response to a denied request. The rate-limit
	// headers, including Retry-After, are already set. Default: status 429
	// with the QuotaExceeded problem.
	DenyHandler func(w http.ResponseWriter, r *http.Request, d Denial)

	// ErrorHandler writes the response when no decision could be made or
	// the failure policy denied. err is a *KeyError when a key function
	// failed, wraps ErrUnavailable when the store failed and the Limiter's
	// failure policy denies, and is anything else for an unexpected
	// limiter error. Default: 400 with a problem naming the attribute for
	// a *KeyError, 503 with the Unavailable problem for ErrUnavailable,
	// 500 otherwise; no error text from the store ever reaches the client.
	ErrorHandler func(w http.ResponseWriter, r *http.Request, err error)

	// Logger receives store failures (warn), unexpected limiter errors
	// (error), would-be denials of shadow policies (info) and key errors
	// (debug). Default: discard.
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
	lim         *sluice.Limiter
	policies    []*sluice.Policy
	keys        []attrKey
	policyField string
	legacy      bool
	deny        func(http.ResponseWriter, *http.Request, Denial)
	fail        func(http.ResponseWriter, *http.Request, error)
	log         *slog.Logger
	attrs       sync.Pool // map[string]string, reused between requests
}

type attrKey struct {
	name string
	fn   KeyFunc
}

// New returns a Middleware configured by cfg. It reports an error, starting
// with "httplimit: ", for a missing limiter, no or invalid policies,
// duplicate policy or rule names, or an attribute without a key function.
func New(cfg Config) (*Middleware, error) {
	if cfg.Limiter == nil {
		return nil, errors.New("httplimit: Config.Limiter is nil")
	}
	if len(cfg.Policies) == 0 {
		return nil, errors.New("httplimit: Config.Policies is empty; give at least one policy")
	}
	m := &Middleware{
		lim:      cfg.Limiter,
		policies: append([]*sluice.Policy(nil), cfg.Policies...),
		legacy:   cfg.LegacyHeaders,
		deny:     cfg.DenyHandler,
		fail:     cfg.ErrorHandler,
		log:      cfg.Logger,
	}
	if m.deny == nil {
		m.deny = defaultDeny
	}
	if m.fail == nil {
		m.fail = defaultError
	}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	policyNames := map[string]bool{}
	ruleOwner := map[string]string{}
	needed := map[string]bool{}
	var items []string
	for i, p := range m.policies {
		if p == nil {
			return nil, fmt.Errorf("httplimit: Config.Policies[%d] is nil", i)
		}
		if err := p.Validate(); err != nil {
			return nil, fmt.Errorf("httplimit: %w", err)
		}
		if policyNames[p.Name] {
			return nil, fmt.Errorf("httplimit: policy %q is listed twice", p.Name)
		}
		policyNames[p.Name] = true
		for _, r := range p.Rules {
			if owner, ok := ruleOwner[r.Name]; ok {
				return nil, fmt.Errorf("httplimit: rule name %q is used by policies %q and %q; rule names name the RateLimit items and must be distinct", r.Name, owner, p.Name)
			}
			ruleOwner[r.Name] = p.Name
			for _, a := range r.By {
				if needed[a] {
					continue
				}
				fn := cfg.Keys[a]
				if fn == nil {
					return nil, fmt.Errorf("httplimit: policy %q rule %q is keyed by attribute %q, which has no function in Config.Keys", p.Name, r.Name, a)
				}
				needed[a] = true
				m.keys = append(m.keys, attrKey{name: a, fn: fn})
			}
			items = append(items, string(appendQuotaPolicy(nil, r.Name, r.Limit, r.Window)))
		}
	}
	m.policyField = strings.Join(items, ", ")
	m.attrs.New = func() any { return make(map[string]string, len(m.keys)) }
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

// inlinePolicies is how many policies a request decides without allocating.
const inlinePolicies = 4

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	attrs := m.attrs.Get().(map[string]string)
	defer func() {
		clear(attrs)
		m.attrs.Put(attrs)
	}()
	for _, k := range m.keys {
		v, err := k.fn(r)
		if err != nil {
			kerr := &KeyError{Attribute: k.name, Err: err}
			m.log.DebugContext(r.Context(), "httplimit: cannot read a rate-limit key", "attribute", k.name, "err", err)
			m.fail(w, r, kerr)
			return
		}
		attrs[k.name] = v
	}

	var buf [inlinePolicies]sluice.Decision
	ds := buf[:0]
	for _, p := range m.policies {
		d, err := m.lim.Allow(r.Context(), p, attrs)
		if err != nil {
			if !d.Degraded {
				m.log.ErrorContext(r.Context(), "httplimit: rate limiter rejected the request", "policy", p.Name, "err", err)
				m.fail(w, r, err)
				return
			}
			m.log.WarnContext(r.Context(), "httplimit: rate limiter store failed; failure policy applied",
				"policy", p.Name, "allowed", d.Allowed, "fallback", len(d.Limits) > 0, "err", err)
		}
		if d.Shadowed {
			m.log.InfoContext(r.Context(), "httplimit: shadow policy would deny", "policy", p.Name,
				"denied_by", d.DeniedBy, "retry_after", d.RetryAfter)
		}
		ds = append(ds, d)
		if d.Allowed {
			continue
		}
		writeHeaders(w.Header(), ds, m.policyField, m.legacy)
		if d.FailedClosed() {
			if err != nil {
				err = fmt.Errorf("%w: %w", ErrUnavailable, err)
			} else {
				err = ErrUnavailable
			}
			m.fail(w, r, err)
		} else {
			m.deny(w, r, Denial{Policy: p, Decision: d})
		}
		return
	}
	writeHeaders(w.Header(), ds, m.policyField, m.legacy)
	next.ServeHTTP(w, r)
}

// defaultDeny answers 429 with the quota-exceeded problem.
func defaultDeny(w http.ResponseWriter, _ *http.Request, d Denial) {
	QuotaExceeded(d.Decision).Write(w)
}

// defaultError answers 400 for a key error, 503 when the store failed, and
// 500 otherwise.
func defaultError(w http.ResponseWriter, _ *http.Request, err error) {
	var kerr *KeyError
	switch {
	case errors.As(err, &kerr):
		Problem{
			Type:   "about:blank",
			Title:  "Bad Request",
			Status: http.StatusBadRequest,
			Detail: fmt.Sprintf("The request lacks the %q attribute its rate limit is keyed on.", kerr.Attribute),
		}.Write(w)
	case errors.Is(err, ErrUnavailable):
		Unavailable().Write(w)
	default:
		Problem{Type: "about:blank", Title: "Internal Server Error", Status: http.StatusInternalServerError}.Write(w)
	}
}
