package decide

import (
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/envoy"
	"github.com/sluicerate/sluice/internal/envoy/dynmeta"
)

// Envoy's answers are built here, once, for both models a server speaks:
// package envoy's (a domain of envoyproxy/ratelimit's files) and a sluice
// policy's (a domain that names one). docs/envoy.md tables the fields.

// Window is one window a descriptor's status reports: its limit as Envoy
// names it, and what the decision found.
type Window struct {
	Limit envoy.Limit

	// Known is false when nothing is known of the window: the store failed
	// and the failure policy admitted the request.
	Known bool

	// Fits reports whether the request's hits fit; Remaining is what still
	// fits, Retry the time until the hits would fit when they do not, and
	// Reset the time until the window is empty.
	Fits         bool
	Remaining    int64
	Retry, Reset time.Duration
}

// Status reports one descriptor from its windows: OVER_LIMIT when one has
// no room for its hits (OK when shadow: shadow_mode), the limit
// that denies (the longest wait), else the one with the least room, as
// current_limit, limit_remaining 0 when over, and duration_until_reset the
// time until the request would be admitted when over, else until the
// window is empty, in whole seconds rounded up. It returns the descriptor's
// outcome, and whether it is near its limit (past 80% of it), for metrics.
// A descriptor of no window is OK with no limit.
func Status(ws []Window, shadow bool) (*rlsv3.RateLimitResponse_DescriptorStatus, Outcome, bool) {
	st := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
	if len(ws) == 0 {
		return st, NoLimit, false
	}
	pick, over := -1, false
	for j := range ws {
		w := &ws[j]
		switch {
		case !w.Known:
		case !w.Fits && (!over || w.Retry > ws[pick].Retry):
			pick, over = j, true
		case !over && (pick < 0 || w.Remaining < ws[pick].Remaining):
			pick = j
		}
	}
	if pick < 0 {
		st.CurrentLimit = currentLimit(&ws[0].Limit)
		return st, Within, false
	}
	w := &ws[pick]
	st.CurrentLimit = currentLimit(&w.Limit)
	if over {
		st.DurationUntilReset = seconds(w.Retry)
		if shadow {
			return st, Shadowed, false
		}
		st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
		return st, Over, false
	}
	st.LimitRemaining = uint32(min(max(w.Remaining, 0), math.MaxUint32))
	st.DurationUntilReset = seconds(w.Reset)
	used := int64(w.Limit.Requests) - w.Remaining
	return st, Within, used > int64(math.Floor(float64(float32(w.Limit.Requests)*0.8)))
}

// currentLimit is a limit as Envoy's response reports it.
func currentLimit(l *envoy.Limit) *rlsv3.RateLimitResponse_RateLimit {
	rl := &rlsv3.RateLimitResponse_RateLimit{Name: l.Name, RequestsPerUnit: l.Requests, Unit: l.Unit}
	if l.Multiplier > 1 {
		rl.UnitMultiplier = wrapperspb.UInt32(l.Multiplier)
	}
	return rl
}

// seconds is d in whole seconds, rounded up: a client that waits that long
// is never early.
func seconds(d time.Duration) *durationpb.Duration {
	if d <= 0 {
		return &durationpb.Duration{}
	}
	return &durationpb.Duration{Seconds: int64((d + time.Second - 1) / time.Second)}
}

// Respond assembles an answer: the statuses, OVER_LIMIT overall when over
// (OK always in opts.ShadowMode), and the headers opts asks for: the
// RateLimit headers of d (none when d is Unlimited), and
// envoyproxy/ratelimit's of the statuses. Header names are lower case, as
// Envoy speaks HTTP/2 upstream, and sorted.
func Respond(statuses []*rlsv3.RateLimitResponse_DescriptorStatus, over bool, d *sluice.Decision, opts Options) *rlsv3.RateLimitResponse {
	out := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: statuses}
	if over && !opts.ShadowMode {
		out.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
	}
	h := http.Header{}
	if opts.Headers.RateLimit && !d.Unlimited {
		httplimit.WriteHeaders(h, *d, httplimit.HeaderOptions{})
	}
	if opts.Headers.XRateLimit {
		xRateLimitHeaders(h, out, opts.Headers)
	}
	for k, vs := range h {
		for _, v := range vs {
			out.ResponseHeadersToAdd = append(out.ResponseHeadersToAdd, &corev3.HeaderValue{Key: strings.ToLower(k), Value: v})
		}
	}
	// Sorted by name; a name's values stay in their order.
	slices.SortStableFunc(out.ResponseHeadersToAdd, func(a, b *corev3.HeaderValue) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// xRateLimitHeaders adds envoyproxy/ratelimit's headers: the limit,
// remaining and reset (in seconds) of the descriptor over its limit, or
// else of the one with the least remaining.
func xRateLimitHeaders(h http.Header, out *rlsv3.RateLimitResponse, names Headers) {
	var min *rlsv3.RateLimitResponse_DescriptorStatus
	for _, st := range out.Statuses {
		if st.CurrentLimit == nil {
			continue
		}
		if st.Code == rlsv3.RateLimitResponse_OVER_LIMIT {
			min = st
			break
		}
		if min == nil || st.LimitRemaining < min.LimitRemaining {
			min = st
		}
	}
	if min == nil {
		return
	}
	name := func(n, def string) string {
		if n == "" {
			return def
		}
		return n
	}
	h.Set(name(names.LimitName, "x-ratelimit-limit"), strconv.FormatUint(uint64(min.CurrentLimit.RequestsPerUnit), 10))
	h.Set(name(names.RemainingName, "x-ratelimit-remaining"), strconv.FormatUint(uint64(min.LimitRemaining), 10))
	h.Set(name(names.ResetName, "x-ratelimit-reset"), strconv.FormatInt(min.GetDurationUntilReset().GetSeconds(), 10))
}

// respond answers the plan p with what the store decided. The answer is
// OVER_LIMIT when a descriptor outside quota_mode is over its limit, or
// when every descriptor in quota_mode is (envoyproxy/ratelimit's quota
// mode: a request goes through while one quota has room).
func (p *plan) respond(d decided, opts Options) Result {
	views := p.views(d)
	res := Result{Decision: d.main, Descriptors: p.results, StoreErr: d.storeErr}
	statuses := make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(p.items))
	over := false
	quotas, quotasOver := 0, 0
	var buf [4]Window
	ws := buf[:0]
	for i, it := range p.items {
		dr := &res.Descriptors[i]
		switch {
		case dr.Outcome == Unlimited:
			statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK, LimitRemaining: math.MaxUint32}
			continue
		case it == nil:
			statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
			continue
		}
		ws = ws[:0]
		for j := range it.limits {
			w := views[it.checks[j]]
			w.Limit = p.windows[it.checks[j]].reported(it.limits[j])
			ws = append(ws, w)
		}
		statuses[i], dr.Outcome, dr.Near = Status(ws, it.shadow)
		isOver := statuses[i].Code == rlsv3.RateLimitResponse_OVER_LIMIT
		switch {
		case it.quota:
			quotas++
			if isOver {
				quotasOver++
			}
		case isOver:
			over = true
		}
	}
	over = over || quotas > 0 && quotasOver == quotas
	res.Response = Respond(statuses, over, &res.Decision, opts)
	if opts.DynamicMetadata {
		res.Response.DynamicMetadata = dynmeta.Build(p.req, p.passedMetadata(statuses))
	}
	return res
}

// passedMetadata is the metadata of the descriptors that passed (not over
// their limit, or shadowed), in request order: those with a limit that
// applied, as envoyproxy/ratelimit's, not those unlimited or replaced.
func (p *plan) passedMetadata(statuses []*rlsv3.RateLimitResponse_DescriptorStatus) []*structpb.Struct {
	var passed []*structpb.Struct
	for i, it := range p.items {
		if it != nil && it.metadata != nil && statuses[i].Code != rlsv3.RateLimitResponse_OVER_LIMIT {
			passed = append(passed, it.metadata)
		}
	}
	return passed
}

// views are the windows' figures after the decision, by window.
func (p *plan) views(d decided) []Window {
	views := make([]Window, len(p.windows))
	for k := range p.windows {
		w := &p.windows[k]
		switch {
		case w.impossible:
			views[k] = Window{Known: true, Retry: w.check.Window, Reset: w.check.Window}
		case w.peek && w.final < len(d.peeked.Limits()):
			// A hit of 0 is over the limit only when the window already
			// holds more than it (envoyproxy/ratelimit's: used + 0 > limit),
			// as a cost counted after the response can leave it.
			l := d.peeked.Limits()[w.final]
			v := Window{Known: true, Fits: l.Fits || l.Used <= l.Limit, Remaining: l.Remaining, Retry: l.RetryAfter, Reset: l.ResetAfter}
			if l.Fits {
				v.Remaining += w.check.Cost // the peek counted a hit of 1 that nothing adds
			}
			views[k] = v
		case !w.peek && w.final < len(d.main.Limits()):
			l := d.main.Limits()[w.final]
			v := Window{Known: true, Fits: l.Fits, Remaining: l.Remaining, Retry: l.RetryAfter, Reset: l.ResetAfter}
			if p.refunded && l.Fits {
				v.Remaining = min(v.Remaining+w.check.Cost, w.check.Limit)
			}
			views[k] = v
		}
	}
	return views
}
