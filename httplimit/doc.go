// Package httplimit is net/http middleware over a sluice.Limiter: it reads
// the attributes a policy is keyed on from each request, decides the
// request, sets the rate-limit headers, and answers a denial with 429.
//
//	mw, err := httplimit.New(httplimit.Config{
//		Limiter:  lim,
//		Policies: []*sluice.Policy{&perUser},
//		Keys:     map[string]httplimit.KeyFunc{"user": httplimit.Header("X-API-Key")},
//	})
//	...
//	http.ListenAndServe(addr, mw.Handler(mux))
//
// # Keys
//
// A KeyFunc reads one attribute: the client address ((*IPResolver).Key), a
// header (Header), the matched route (Route) or one of its wildcards
// (PathValue), a value an authentication middleware put in the context
// (ContextValue), or anything a function of the request can compute. Route
// and PathValue need the middleware around the handler registered on the
// http.ServeMux, because the mux sets the pattern only when it routes.
//
// A key function that finds no value returns an error wrapping
// ErrMissingKey: the attribute is absent, and the Limiter decides whether a
// rule needs it. One that does answers 400 (a *KeyError to
// Config.ErrorHandler) and records nothing, in any policy. Any other error
// means the attribute cannot be read, and answers 400 at once. Values are
// text: one that is not valid UTF-8 answers 400 (ErrInvalidKey), so bytes a
// decoder would each read as U+FFFD never make different clients one.
//
// # Headers
//
// Allowed and denied responses carry the fields of the IETF draft
// "RateLimit header fields for HTTP" (draft-ietf-httpapi-ratelimit-headers),
// both Structured Field Lists (RFC 9651) with one item per rule, named after
// the rule:
//
//	RateLimit-Policy: "global";q=100;w=1800, "category";q=10;w=1800
//	RateLimit: "global";r=57;t=1795, "category";r=0;t=42
//
// In RateLimit-Policy, q is the rule's limit and w its window in seconds.
// In RateLimit, r is the quota left in the rule's window, and t is, for a
// rule the request did not fit, the seconds until a retry could fit it, and
// otherwise the seconds until the window is empty and the whole quota is
// back. Windows slide: quota also comes back gradually, as each entry
// leaves the window, before t has passed. All seconds are rounded up, so a
// client that waits as long as told is never early.
//
// A denied response also carries Retry-After, the seconds until the request
// could be admitted (at least 1), and an application/problem+json body
// (RFC 9457) of the draft's quota-exceeded type,
// "https://iana.org/assignments/http-problem-types#quota-exceeded", whose
// "violated-policies" member lists the rules that did not fit. A custom
// Config.DenyHandler can answer differently; the headers are already set.
//
// Config.LegacyHeaders adds X-RateLimit-Limit, X-RateLimit-Remaining and
// X-RateLimit-Reset (seconds) for the tightest rule, for clients that know
// only those.
//
// Problems other than quota-exceeded carry a "code" member that names their
// class for programs (Problem.Code): missing_attribute, invalid_attribute,
// unavailable, internal, as sluice serve's API answers.
//
// A shadow policy (sluice.Policy.Shadow) is decided and reported in the
// headers like any other, but never denies; its would-be denials are logged.
//
// # Failures
//
// When the store fails, the Limiter returns its error with a degraded
// decision made by its failure policy (sluice.Config.OnError). Under the
// default, deny, the middleware answers 503 with a problem body that says
// nothing about the failure; under allow the request is served. A Limiter
// with a fallback store (sluice.Config.Fallback) decides from it instead,
// and its denials are answered 429 like any other. Every degraded response
// carries Sluice-Degraded: 1. The failures are logged to Config.Logger by
// outage, not by request: the first with its error, then a summary every
// 10 s while they go on, then one line when the store answers again (see
// Config.Logger). A shadow policy never denies, even then.
//
// WriteHeaders writes the same fields for a decision made outside the
// middleware, for an endpoint that answers for a proxy, for example.
//
// # Client addresses and trusted proxies
//
// An IPResolver decides who the client is. By default it is the TCP peer
// (http.Request.RemoteAddr): headers are written by whoever sends the
// request, so a client that could set X-Forwarded-For could pick any
// identity and escape its limit.
//
// Behind proxies, list their networks in IPConfig.TrustedProxies and name
// the one header they write (X-Forwarded-For by default, or the RFC 7239
// Forwarded field). The header is read only when the TCP peer is trusted,
// and then from right to left: each proxy appends the address it received
// the request from, so the hops on the right were written by trusted
// proxies, and the first untrusted hop is the client. Whatever lies to its
// left came from the client and is ignored. With two trusted proxies in
// front, a request carrying
//
//	X-Forwarded-For: 6.6.6.6, 203.0.113.7, 10.0.0.2
//
// from peer 10.0.0.1 is counted as 203.0.113.7; the 6.6.6.6 the client wrote
// is never believed. A hop that is not an address ends the walk at the last
// trusted address, so an unreadable header can only make clients share a
// limit, never escape one.
//
// IPv6 clients are counted per /64 by default (IPConfig.IPv6Bits), the
// block one subscriber usually holds: rotating through its addresses does
// not yield a fresh limit. IPv4 clients are counted per address unless
// IPConfig.IPv4Bits is set lower.
package httplimit
