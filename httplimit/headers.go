package httplimit

import (
	"net/http"
	"strconv"
	"time"

	"github.com/sluicerate/sluice"
)

// Header names written by the middleware and by WriteHeaders.
const (
	// HeaderRateLimitPolicy lists the quota policies that apply to the
	// request, one item per rule: "per-user";q=100;w=10.
	HeaderRateLimitPolicy = "RateLimit-Policy"

	// HeaderRateLimit lists the current service limit of each rule:
	// "per-user";r=42;t=7.
	HeaderRateLimit = "RateLimit"

	// HeaderRetryAfter carries, on a denial, the seconds until a retry
	// could be admitted.
	HeaderRetryAfter = "Retry-After"

	// HeaderDegraded is "1" on a response whose decision was made by the
	// Limiter's failure policy because its store failed.
	HeaderDegraded = "Sluice-Degraded"

	// HeaderLimit, HeaderRemaining and HeaderReset are the legacy
	// X-RateLimit-* fields, written only when asked for: the limit, the
	// remaining quota and the seconds until reset of the tightest rule.
	HeaderLimit     = "X-RateLimit-Limit"
	HeaderRemaining = "X-RateLimit-Remaining"
	HeaderReset     = "X-RateLimit-Reset"
)

// Canonical forms, for writing into an http.Header map directly.
var (
	keyPolicy    = http.CanonicalHeaderKey(HeaderRateLimitPolicy)
	keyRateLimit = http.CanonicalHeaderKey(HeaderRateLimit)
	keyRetry     = http.CanonicalHeaderKey(HeaderRetryAfter)
	keyDegraded  = http.CanonicalHeaderKey(HeaderDegraded)
	keyLimit     = http.CanonicalHeaderKey(HeaderLimit)
	keyRemaining = http.CanonicalHeaderKey(HeaderRemaining)
	keyReset     = http.CanonicalHeaderKey(HeaderReset)
)

// HeaderOptions selects the optional headers WriteHeaders writes. The zero
// value writes the standard fields only.
type HeaderOptions struct {
	// Legacy also writes X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset for the tightest rule. Default off.
	Legacy bool
}

// WriteHeaders sets on h the rate-limit fields of one decision:
//
//   - RateLimit-Policy and RateLimit, one item per rule of the decision
//     (see the package documentation for their parameters);
//   - Retry-After when the decision denies and carries a retry time;
//   - Sluice-Degraded: 1 when the decision was made by the failure policy;
//   - the X-RateLimit-* fields when opts.Legacy is set.
//
// A degraded decision has no rule statuses, so only Sluice-Degraded is
// written for it. Fields already present are replaced. WriteHeaders is what
// the middleware writes for a single policy; use it to answer with the same
// fields outside the middleware, from a forward-auth endpoint for example.
func WriteHeaders(h http.Header, d sluice.Decision, opts HeaderOptions) {
	writeHeaders(h, []sluice.Decision{d}, "", opts.Legacy)
}

// writeHeaders sets the fields for the decisions of several policies, in
// order. policyField, when not empty, is the precomputed RateLimit-Policy
// value; otherwise it is built from the decisions.
func writeHeaders(h http.Header, ds []sluice.Decision, policyField string, legacy bool) {
	var (
		buf      [256]byte
		rl       = buf[:0]
		degraded bool
		denied   bool
		retry    time.Duration
		tight    *sluice.LimitStatus
		tightDen bool
	)
	for i := range ds {
		d := &ds[i]
		degraded = degraded || d.Degraded
		if !d.Allowed {
			denied = true
			retry = max(retry, d.RetryAfter)
		}
		for j := range d.Limits() {
			s := &d.Limits()[j]
			if len(rl) > 0 {
				rl = append(rl, ", "...)
			}
			rl = appendServiceLimit(rl, s)
			if den := !d.Allowed && !s.Fits; tight == nil || tighter(s, den, tight, tightDen) {
				tight, tightDen = s, den
			}
		}
	}
	if policyField == "" && len(rl) > 0 {
		var pbuf [256]byte
		p := pbuf[:0]
		for i := range ds {
			for j := range ds[i].Limits() {
				if len(p) > 0 {
					p = append(p, ", "...)
				}
				p = appendQuotaPolicy(p, ds[i].Limits()[j].Rule, ds[i].Limits()[j].Limit, ds[i].Limits()[j].Window)
			}
		}
		policyField = string(p)
	}
	if len(rl) > 0 {
		v := []string{policyField, string(rl)} // one allocation for both fields
		h[keyPolicy] = v[0:1:1]
		h[keyRateLimit] = v[1:2:2]
	}
	if denied && retry > 0 {
		h[keyRetry] = []string{strconv.FormatInt(Seconds(retry), 10)}
	}
	if degraded {
		h[keyDegraded] = []string{"1"}
	}
	if legacy && tight != nil {
		h[keyLimit] = []string{strconv.FormatInt(tight.Limit, 10)}
		h[keyRemaining] = []string{strconv.FormatInt(tight.Remaining, 10)}
		h[keyReset] = []string{strconv.FormatInt(effectiveWindow(tight), 10)}
	}
}

// tighter reports whether s should be reported in the legacy fields instead
// of cur: a rule that denied the request beats one that did not (the longer
// wait first), and otherwise the smaller remaining quota wins.
func tighter(s *sluice.LimitStatus, sDenies bool, cur *sluice.LimitStatus, curDenies bool) bool {
	switch {
	case sDenies && !curDenies:
		return true
	case !sDenies && curDenies:
		return false
	case sDenies && curDenies:
		return s.RetryAfter > cur.RetryAfter
	}
	return s.Remaining < cur.Remaining
}

// appendQuotaPolicy appends one RateLimit-Policy item: the rule's name, its
// quota q and its window w in whole seconds, rounded up.
func appendQuotaPolicy(b []byte, rule string, limit int64, window time.Duration) []byte {
	b = appendSFString(b, rule)
	b = append(b, ";q="...)
	b = strconv.AppendInt(b, limit, 10)
	b = append(b, ";w="...)
	return strconv.AppendInt(b, max(1, Seconds(window)), 10)
}

// appendServiceLimit appends one RateLimit item: the rule's name, its
// remaining quota r and its effective window t.
func appendServiceLimit(b []byte, s *sluice.LimitStatus) []byte {
	b = appendSFString(b, s.Rule)
	b = append(b, ";r="...)
	b = strconv.AppendInt(b, max(0, s.Remaining), 10)
	b = append(b, ";t="...)
	return strconv.AppendInt(b, effectiveWindow(s), 10)
}

// effectiveWindow is the "t" of a rule in whole seconds, rounded up: the
// time until the request would fit when it did not, and otherwise the time
// until the window is empty and the whole quota is back.
func effectiveWindow(s *sluice.LimitStatus) int64 {
	if !s.Fits {
		return Seconds(s.RetryAfter)
	}
	return Seconds(s.ResetAfter)
}

// appendSFString appends s as a structured-field String (RFC 9651, section
// 3.3.3). Bytes outside printable ASCII cannot appear in one; each is
// replaced by '?'.
func appendSFString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20 || c > 0x7e:
			b = append(b, '?')
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// Seconds converts d to whole seconds for Retry-After and the RateLimit
// fields, rounding up so a client that waits that long is never early: 1s
// is 1, 1s+1µs is 2, 999ms is 1. Durations of zero or less are 0.
func Seconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}
