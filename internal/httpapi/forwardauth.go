package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/internal/edge"
	"github.com/sluicerate/sluice/internal/front"
)

// Headers a proxy sets on a forward-auth request to describe the request it
// is authorizing (Caddy forward_auth and Traefik ForwardAuth set them; nginx
// is configured to).
const (
	headerForwardedMethod = "X-Forwarded-Method"
	headerForwardedHost   = "X-Forwarded-Host"
	headerForwardedURI    = "X-Forwarded-Uri"
)

// handleForwardAuth serves /v1/forward-auth?policy=NAME[&cost=N]
// [&deny_status=S]: it decides the forwarded request against the policy and
// answers 200 when allowed, or 429 (or S: 401 or 403, for nginx's
// auth_request, which treats any other status as an error) with Retry-After
// when denied, with the RateLimit headers either way. Any method is
// accepted, as proxies forward the original one or GET.
func (a *API) handleForwardAuth(w http.ResponseWriter, r *http.Request) {
	const api = "forward_auth"
	st := a.f.State()
	q := r.URL.Query()
	cost := int64(1)
	if c := q.Get("cost"); c != "" {
		n, err := strconv.ParseInt(c, 10, 64)
		if err != nil {
			a.f.Fail(w, api, front.BadRequest("invalid_cost", "cost %q is not a whole number; a cost is 1 to 2^53 (9007199254740992)", c))
			return
		}
		cost = n
	}
	denyStatus := http.StatusTooManyRequests
	switch ds := q.Get("deny_status"); ds {
	case "", "429":
	case "401", "403":
		denyStatus, _ = strconv.Atoi(ds)
	default:
		a.f.Fail(w, api, front.BadRequest("bad_request", "deny_status %q: use 429 (the default), 403 or 401", ds))
		return
	}
	policy := q.Get("policy")
	if policy == "" {
		a.f.Fail(w, api, front.BadRequest("bad_request", "name the policy in the query: /v1/forward-auth?policy=NAME"))
		return
	}
	o := st.Policies.Decide(r.Context(), policy, r, front.Call(api, edge.OpDecide, cost))
	a.f.Counted(edge.OpDecide, &o)
	if p := front.OutcomeProblem(&o); p != nil {
		a.f.Fail(w, api, p)
		return
	}
	httplimit.WriteHeaders(w.Header(), o.Decision(), httplimit.HeaderOptions{})
	switch o.Kind {
	case edge.Allowed:
		a.f.Answered(api, "200")
		w.WriteHeader(http.StatusOK)
	case edge.Unavailable:
		a.f.Answered(api, "503")
		httplimit.Unavailable().Write(w)
	default:
		a.f.Answered(api, front.StatusCode(denyStatus))
		p := httplimit.QuotaExceeded(o.Decision())
		p.Status = denyStatus
		p.Write(w)
	}
}

// ErrNoHeader reports a forwarded request without the header a configured
// attribute comes from: the attribute is absent, so a rule keyed by it
// answers 400 (missing attribute).
var ErrNoHeader = errors.New("server: the forwarded request lacks the attribute's header")

// ForwardKeys returns the keys of a forwarded request's attributes: the
// client's IP through the trusted proxies, the method, host and path the
// proxy forwards, and the configured headers. Any other attribute has no
// key, and is absent.
func ForwardKeys(fa *config.ForwardAuth, ip *httplimit.IPResolver) func(attr string) edge.Key[*http.Request] {
	return func(attr string) edge.Key[*http.Request] {
		switch attr {
		case config.AttrIP:
			return func(r *http.Request) (string, error) {
				v, err := ip.Key(r)
				if err != nil {
					return "", fmt.Errorf("cannot tell the client's address: %w", err)
				}
				return v, nil
			}
		case config.AttrMethod:
			return func(r *http.Request) (string, error) {
				return firstNonEmpty(r.Header.Get(headerForwardedMethod), r.Method), nil
			}
		case config.AttrHost:
			return func(r *http.Request) (string, error) {
				return firstNonEmpty(r.Header.Get(headerForwardedHost), r.Host), nil
			}
		case config.AttrPath:
			return func(r *http.Request) (string, error) { return forwardedPath(r), nil }
		}
		header, ok := fa.Headers[attr]
		if !ok {
			return nil
		}
		return func(r *http.Request) (string, error) {
			if v := r.Header.Get(header); v != "" {
				return v, nil
			}
			return "", ErrNoHeader
		}
	}
}

// forwardedPath is the path of X-Forwarded-Uri, without the query, else the
// request's path.
func forwardedPath(r *http.Request) string {
	u := r.Header.Get(headerForwardedURI)
	if u == "" {
		return r.URL.Path
	}
	if pu, err := url.ParseRequestURI(u); err == nil {
		return pu.Path
	}
	return u
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
