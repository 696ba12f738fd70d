package server

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/internal/edge"
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
func (s *Server) handleForwardAuth(w http.ResponseWriter, r *http.Request) {
	const api = "forward_auth"
	st := s.state.Load()
	q := r.URL.Query()
	cost := int64(1)
	if c := q.Get("cost"); c != "" {
		n, err := strconv.ParseInt(c, 10, 64)
		if err != nil {
			s.fail(w, api, badRequest("invalid_cost", "cost %q is not a whole number of at least 1", c))
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
		s.fail(w, api, badRequest("bad_request", "deny_status %q: use 429 (the default), 403 or 401", ds))
		return
	}
	policy := q.Get("policy")
	if policy == "" {
		s.fail(w, api, badRequest("bad_request", "name the policy in the query: /v1/forward-auth?policy=NAME"))
		return
	}
	o := st.policies.Decide(r.Context(), policy, r, call(api, edge.OpDecide, cost))
	s.counted(edge.OpDecide, &o)
	if p := outcomeProblem(&o); p != nil {
		s.fail(w, api, p)
		return
	}
	httplimit.WriteHeaders(w.Header(), o.Decision(), httplimit.HeaderOptions{})
	switch o.Kind {
	case edge.Allowed:
		s.metrics.requests.WithLabelValues(api, "200").Inc()
		w.WriteHeader(http.StatusOK)
	case edge.Unavailable:
		s.metrics.requests.WithLabelValues(api, "503").Inc()
		httplimit.Unavailable().Write(w)
	default:
		s.metrics.requests.WithLabelValues(api, strconv.Itoa(denyStatus)).Inc()
		p := httplimit.QuotaExceeded(o.Decision())
		p.Status = denyStatus
		p.Write(w)
	}
}

// errNoHeader reports a forwarded request without the header a configured
// attribute comes from: the attribute is absent, so a rule keyed by it
// answers 400 (missing attribute).
var errNoHeader = errors.New("server: the forwarded request lacks the attribute's header")

// forwardKeys returns the keys of a forwarded request's attributes: the
// client's IP through the trusted proxies, the method, host and path the
// proxy forwards, and the configured headers. Any other attribute has no
// key, and is absent.
func forwardKeys(fa *config.ForwardAuth, ip *httplimit.IPResolver) func(attr string) edge.Key[*http.Request] {
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
			return "", errNoHeader
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
