package server

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/config"
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
		if err != nil || n < 1 {
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
	attrs, p := st.forwardAttributes(r)
	if p != nil {
		s.fail(w, api, p)
		return
	}
	d, p := s.decide(r.Context(), st, api, opDecide, policy, attrs, cost)
	if p != nil {
		s.fail(w, api, p)
		return
	}
	httplimit.WriteHeaders(w.Header(), d, httplimit.HeaderOptions{})
	switch {
	case d.Allowed:
		s.metrics.requests.WithLabelValues(api, "200").Inc()
		w.WriteHeader(http.StatusOK)
	case d.FailedClosed():
		s.metrics.requests.WithLabelValues(api, "503").Inc()
		httplimit.Unavailable().Write(w)
	default:
		s.metrics.requests.WithLabelValues(api, strconv.Itoa(denyStatus)).Inc()
		p := httplimit.QuotaExceeded(d)
		p.Status = denyStatus
		p.Write(w)
	}
}

// forwardAttributes derives a forwarded request's attributes: the client's
// IP through the trusted proxies, the method, host and path the proxy
// forwards, and the configured headers. A configured header that is absent
// is left out, so a rule keyed by it answers 400 (missing attribute).
func (st *state) forwardAttributes(r *http.Request) (map[string]string, *problem) {
	attrs := make(map[string]string, 4+len(st.headers))
	ip, err := st.ip.Key(r)
	if err != nil {
		return nil, badRequest("bad_request", "cannot tell the client's address: %v", err)
	}
	attrs[config.AttrIP] = ip
	attrs[config.AttrMethod] = firstNonEmpty(r.Header.Get(headerForwardedMethod), r.Method)
	attrs[config.AttrHost] = firstNonEmpty(r.Header.Get(headerForwardedHost), r.Host)
	path := r.URL.Path
	if u := r.Header.Get(headerForwardedURI); u != "" {
		if pu, err := url.ParseRequestURI(u); err == nil {
			path = pu.Path
		} else {
			path = u
		}
	}
	attrs[config.AttrPath] = path
	for _, h := range st.headers {
		if v := r.Header.Get(h.header); v != "" {
			attrs[h.attr] = v
		}
	}
	return attrs, nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
