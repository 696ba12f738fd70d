package envoy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/store"
)

// Counting says what a request's hits count in.
type Counting uint8

const (
	// AllOrNothing, the default, decides every limit the request's
	// descriptors matched as one decision: the hits are recorded in all of
	// them when every one has room, and in none otherwise. A descriptor over
	// its limit consumes nothing from the others.
	AllOrNothing Counting = iota

	// PerDescriptor is envoyproxy/ratelimit's counting: every matched
	// limit's window counts the hits, over the limit or not (Envoy's
	// default, without STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT). A client
	// that keeps sending while limited stays limited.
	PerDescriptor
)

// Headers says which rate-limit headers a response asks Envoy to add. The
// zero value adds none, as envoyproxy/ratelimit does by default.
type Headers struct {
	// RateLimit adds the IETF RateLimit and RateLimit-Policy headers (and
	// Retry-After when over the limit), one item per limit.
	RateLimit bool

	// XRateLimit adds envoyproxy/ratelimit's three headers from the
	// descriptor closest to its limit (the one over it, if any):
	// LIMIT_RESPONSE_HEADERS_ENABLED.
	XRateLimit bool

	// The names of XRateLimit's headers. Defaults x-ratelimit-limit,
	// x-ratelimit-remaining and x-ratelimit-reset.
	LimitName, RemainingName, ResetName string
}

// Options configures Decide. The zero value is the default.
type Options struct {
	// Counting is what the hits count in: AllOrNothing by default.
	Counting Counting

	// ShadowMode answers OK whatever the limits say (SHADOW_MODE=true); the
	// statuses still report them.
	ShadowMode bool

	// DryRun decides without recording anything (sluice check).
	DryRun bool

	// Headers are the response headers to add.
	Headers Headers
}

// Outcome is what happened to one descriptor, for metrics.
type Outcome uint8

// Outcomes of a descriptor.
const (
	NoLimit   Outcome = iota // no rate_limit matched, or it was replaced
	Unlimited                // an unlimited rate_limit matched
	Within                   // within its limits
	Over                     // over a limit
	Shadowed                 // over a limit in shadow_mode or quota_mode: answered OK
)

// DescriptorResult is what one descriptor of a request matched and how it
// fared.
type DescriptorResult struct {
	// Stat is the descriptor's key in envoyproxy/ratelimit's statistics
	// ("domain.key_value"); empty when no limit applied.
	Stat string

	// Hits is what the descriptor added (hits_addend).
	Hits uint64

	// Outcome is how it fared; Near reports that it is within its limit
	// but past 80% of it.
	Outcome Outcome
	Near    bool
}

// Result is the answer to one request.
type Result struct {
	// Response is the answer for Envoy.
	Response *rlsv3.RateLimitResponse

	// Decision is sluice's decision of the request's windows: Unlimited
	// when no descriptor matched a limit.
	Decision sluice.Decision

	// Descriptors has one result per descriptor of the request, in order.
	Descriptors []DescriptorResult

	// StoreErr is the store's error when the store failed and the
	// Limiter's failure policy answered (Decision.Degraded); the response
	// is then made from that decision.
	StoreErr error
}

// ErrBadRequest reports a request that cannot be decided as sent.
var ErrBadRequest = errors.New("envoy: bad request")

// ErrUnavailable reports that the store failed and the failure policy
// denied the request: Envoy applies its failure_mode_deny.
var ErrUnavailable = errors.New("envoy: the store is unavailable")

// PolicyName is the sluice policy name of a domain's windows: part of every
// store key, and apart from the configuration file's policies (whose names
// cannot hold '/').
func PolicyName(domain string) string { return "envoy/" + domain }

// item is one descriptor of a request that limits apply to.
type item struct {
	node   *node    // nil for a descriptor's own limit
	limits []Limit  // the limits that apply (replaced ones removed)
	rules  []string // per limit: the rule naming its window
	values []string // the values naming its windows
	checks []int    // per limit: its index in the checks
	hits   uint64
	shadow bool // shadow_mode or quota_mode: over the limit answers OK
}

// pending is one window a request must fit, before it is sent.
type pending struct {
	check      store.Check
	impossible bool // the hits are more than the limit: it can never fit
	peek       bool // hits_addend 0: reported, not counted
	final      int  // index in the store request sent, -1 when not sent
}

// view is one window's figures after the decision.
type view struct {
	known     bool
	fits      bool
	remaining int64
	retry     time.Duration
	reset     time.Duration
}

// Decide answers req against c's domains with lim, as envoyproxy/ratelimit
// would, with sluice's windows (see the package documentation and
// docs/envoy.md). A request with no domain, no descriptors, or negative hits
// is ErrBadRequest; a store failure under a fail-closed Limiter is
// ErrUnavailable; both come with no result. A domain that is not configured,
// and a descriptor that matches no limit, are OK with no limit.
//
// All the windows of a request are decided by one call to lim.Decide (a
// second one, recording nothing, reports descriptors whose hits_addend is
// 0).
func (c *Config) Decide(ctx context.Context, lim *sluice.Limiter, req *rlsv3.RateLimitRequest, opts Options) (Result, error) {
	domain := req.GetDomain()
	if domain == "" {
		return Result{}, fmt.Errorf("%w: rate limit domain must not be empty; Envoy's rate-limit filter sends its domain", ErrBadRequest)
	}
	descs := req.GetDescriptors()
	if len(descs) == 0 {
		return Result{}, fmt.Errorf("%w: rate limit descriptor list must not be empty", ErrBadRequest)
	}
	res := Result{Descriptors: make([]DescriptorResult, len(descs))}
	items := make([]*item, len(descs))
	replaced := map[string]bool{}
	for i, d := range descs {
		if d.GetIsNegativeHits() {
			return Result{}, fmt.Errorf("%w: descriptor %d asks for negative hits, which sluice does not take back; send hits to add", ErrBadRequest, i+1)
		}
		hits := uint64(max(1, req.GetHitsAddend()))
		if h := d.GetHitsAddend(); h != nil {
			hits = h.GetValue()
		}
		res.Descriptors[i].Hits = hits
		if o := d.GetLimit(); o != nil {
			u := rlsv3.RateLimitResponse_RateLimit_Unit(o.GetUnit())
			w, ok := unitLengths[u]
			if !ok {
				return Result{}, fmt.Errorf("%w: descriptor %d's own limit has unit %v; use SECOND, MINUTE, HOUR, DAY, WEEK, MONTH or YEAR", ErrBadRequest, i+1, u)
			}
			it := &item{hits: hits, limits: []Limit{{Requests: o.GetRequestsPerUnit(), Unit: u, Multiplier: 1, Window: w}},
				rules: []string{"limit/" + strings.ToLower(u.String())}}
			for _, e := range d.GetEntries() {
				it.values = append(it.values, e.GetKey(), e.GetValue())
			}
			items[i] = it
			res.Descriptors[i].Stat = descriptorKey(domain, d.GetEntries())
			continue
		}
		m := c.match(domain, d.GetEntries())
		if m.node == nil {
			continue
		}
		res.Descriptors[i].Stat = m.stat
		for _, l := range m.node.limits {
			for _, r := range l.Replaces {
				replaced[r] = true
			}
		}
		if m.node.unlimited {
			res.Descriptors[i].Outcome = Unlimited
			continue
		}
		it := &item{node: m.node, values: m.values, hits: hits, shadow: m.node.shadow || m.node.quota}
		for j, l := range m.node.limits {
			it.limits = append(it.limits, l)
			rule := m.node.path
			if j > 0 {
				rule += "#" + strconv.Itoa(j+1)
			}
			it.rules = append(it.rules, rule)
		}
		items[i] = it
	}

	// Replaces: a named limit that another matched limit replaces is not
	// checked.
	for i, it := range items {
		if it == nil || it.node == nil {
			continue
		}
		var limits []Limit
		var rules []string
		for j, l := range it.limits {
			if l.Name == "" || !replaced[l.Name] {
				limits, rules = append(limits, l), append(rules, it.rules[j])
			}
		}
		if len(limits) == 0 {
			items[i] = nil
			res.Descriptors[i].Stat = ""
			continue
		}
		it.limits, it.rules = limits, rules
	}

	// The windows: one check per limit, descriptors that name the same
	// window adding their hits to one check.
	var (
		windows []pending
		index   = map[string]int{}
	)
	for _, it := range items {
		if it == nil {
			continue
		}
		it.checks = make([]int, len(it.limits))
		for j, l := range it.limits {
			alg := l.Algorithm
			if l.Requests == 0 {
				alg = sluice.Log // a limit of 0 blocks; GCRA has no empty bucket
			}
			peek := it.hits == 0
			id := strconv.FormatBool(peek) + "\x00" + it.rules[j] + "\x00" + strings.Join(it.values, "\x00")
			if k, ok := index[id]; ok {
				windows[k].check.Cost += int64(min(it.hits, math.MaxInt32))
				it.checks[j] = k
				continue
			}
			cost := int64(min(it.hits, math.MaxInt32))
			if peek {
				cost = 1
			}
			ch := store.Check{Rule: it.rules[j], Values: it.values, Limit: int64(l.Requests), Window: l.Window,
				Algorithm: alg, Cost: cost, Shadow: it.shadow}
			if alg == sluice.GCRA {
				ch.Burst = ch.Limit
			}
			index[id] = len(windows)
			it.checks[j] = len(windows)
			windows = append(windows, pending{check: ch, peek: peek, final: -1})
		}
	}
	main := store.Request{Policy: PolicyName(domain), Mode: store.ModeAllow, DryRun: opts.DryRun}
	if opts.Counting == PerDescriptor {
		main.Mode = store.ModeRecord
	}
	peeks := store.Request{Policy: PolicyName(domain), DryRun: true}
	denied := false
	for k := range windows {
		w := &windows[k]
		c := &w.check
		if c.Limit > 0 && c.Cost > c.Limit {
			w.impossible = true
			denied = denied || !c.Shadow
			continue
		}
		if w.peek {
			w.final = len(peeks.Checks)
			peeks.Checks = append(peeks.Checks, *c)
			continue
		}
		w.final = len(main.Checks)
		main.Checks = append(main.Checks, *c)
	}
	// A request that a descriptor's hits can never fit is denied whatever
	// the others say: ask for their figures without recording (Envoy's
	// counting records them anyway).
	refunded := denied && main.Mode == store.ModeAllow && !main.DryRun
	if refunded {
		main.DryRun = true
	}

	res.Decision = sluice.Decision{Allowed: true, Unlimited: true, Remaining: sluice.UnlimitedRemaining}
	if len(main.Checks) > 0 {
		d, err := lim.Decide(ctx, &main)
		if err != nil && !d.Degraded {
			return Result{}, fmt.Errorf("envoy: deciding domain %q: %w", domain, err)
		}
		if err != nil {
			if d.FailedClosed() {
				return Result{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
			}
			res.StoreErr = err
		}
		res.Decision = d
	}
	var peeked sluice.Decision
	if len(peeks.Checks) > 0 {
		d, err := lim.Decide(ctx, &peeks)
		if err != nil && !d.Degraded {
			return Result{}, fmt.Errorf("envoy: deciding domain %q: %w", domain, err)
		}
		if err != nil && d.FailedClosed() {
			return Result{}, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		peeked = d
	}
	views := make([]view, len(windows))
	for k := range windows {
		w := &windows[k]
		switch {
		case w.impossible:
			views[k] = view{known: true, retry: w.check.Window, reset: w.check.Window}
		case w.peek && w.final < len(peeked.Limits):
			l := peeked.Limits[w.final]
			v := view{known: true, fits: true, remaining: l.Remaining, reset: l.ResetAfter}
			if l.Fits {
				v.remaining += w.check.Cost // the peek counted a hit of 1 that nothing adds
			}
			views[k] = v
		case !w.peek && w.final < len(res.Decision.Limits):
			l := res.Decision.Limits[w.final]
			v := view{known: true, fits: l.Fits, remaining: l.Remaining, retry: l.RetryAfter, reset: l.ResetAfter}
			if refunded && l.Fits {
				v.remaining = min(v.remaining+w.check.Cost, w.check.Limit)
			}
			views[k] = v
		}
	}

	out := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK, Statuses: make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(descs))}
	for i := range descs {
		it := items[i]
		dr := &res.Descriptors[i]
		switch {
		case dr.Outcome == Unlimited:
			out.Statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK, LimitRemaining: math.MaxUint32}
			continue
		case it == nil:
			out.Statuses[i] = &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
			continue
		}
		st, outcome, near := it.status(windows, views)
		out.Statuses[i], dr.Outcome, dr.Near = st, outcome, near
		if st.Code == rlsv3.RateLimitResponse_OVER_LIMIT {
			out.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
		}
	}
	if opts.ShadowMode {
		out.OverallCode = rlsv3.RateLimitResponse_OK
	}
	h := http.Header{}
	if opts.Headers.RateLimit && !res.Decision.Unlimited {
		httplimit.WriteHeaders(h, res.Decision, httplimit.HeaderOptions{})
	}
	if opts.Headers.XRateLimit {
		xRateLimitHeaders(h, out, opts.Headers)
	}
	for _, k := range sortedKeys(h) {
		for _, v := range h[k] {
			out.ResponseHeadersToAdd = append(out.ResponseHeadersToAdd, &corev3.HeaderValue{Key: strings.ToLower(k), Value: v})
		}
	}
	res.Response = out
	return res, nil
}

// status reports one descriptor from its windows' views: OVER_LIMIT when a
// window has no room for its hits (OK in shadow or quota mode), the limit
// that denies (else the one with the least room) as current_limit,
// limit_remaining 0 when over, and duration_until_reset the time until the
// request would be admitted when over, else until its window is empty, in
// whole seconds rounded up.
func (it *item) status(windows []pending, views []view) (*rlsv3.RateLimitResponse_DescriptorStatus, Outcome, bool) {
	pick, over := -1, false
	for j := range it.limits {
		v := &views[it.checks[j]]
		if !v.known {
			continue
		}
		switch {
		case !v.fits && (!over || v.retry > views[it.checks[pick]].retry):
			pick, over = j, true
		case !over && (pick < 0 || v.remaining < views[it.checks[pick]].remaining):
			pick = j
		}
	}
	if pick < 0 {
		// The store failed and the failure policy admitted the request.
		l := it.limits[0]
		return &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK, CurrentLimit: currentLimit(&l)}, Within, false
	}
	l, v := it.limits[pick], views[it.checks[pick]]
	st := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK, CurrentLimit: currentLimit(&l)}
	outcome, near := Within, false
	if over {
		st.DurationUntilReset = seconds(v.retry)
		outcome = Over
		if it.shadow {
			outcome = Shadowed
		} else {
			st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
		}
	} else {
		st.LimitRemaining = uint32(min(max(v.remaining, 0), math.MaxUint32))
		st.DurationUntilReset = seconds(v.reset)
		used := int64(l.Requests) - v.remaining
		near = used > int64(math.Floor(float64(float32(l.Requests)*0.8)))
	}
	return st, outcome, near
}

// currentLimit is a limit as Envoy's response reports it.
func currentLimit(l *Limit) *rlsv3.RateLimitResponse_RateLimit {
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

func sortedKeys(h http.Header) []string {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// Windows returns the store request of the windows that req's descriptors
// match, every limit of each (replaces aside), with a cost of 1: what an
// operator resets to give a key its whole limit back. A request that
// matches no limit gives a request with no checks.
func (c *Config) Windows(req *rlsv3.RateLimitRequest) (*store.Request, error) {
	if req.GetDomain() == "" || len(req.GetDescriptors()) == 0 {
		return nil, fmt.Errorf("%w: name the domain and at least one descriptor", ErrBadRequest)
	}
	out := &store.Request{Policy: PolicyName(req.GetDomain())}
	seen := map[string]bool{}
	add := func(rule string, values []string, l Limit) {
		id := rule + "\x00" + strings.Join(values, "\x00")
		if seen[id] {
			return
		}
		seen[id] = true
		ch := store.Check{Rule: rule, Values: values, Limit: int64(l.Requests), Window: l.Window, Algorithm: l.Algorithm, Cost: 1}
		if l.Requests == 0 {
			ch.Algorithm = sluice.Log
		}
		if ch.Algorithm == sluice.GCRA {
			ch.Burst = ch.Limit
		}
		out.Checks = append(out.Checks, ch)
	}
	for _, d := range req.GetDescriptors() {
		if o := d.GetLimit(); o != nil {
			u := rlsv3.RateLimitResponse_RateLimit_Unit(o.GetUnit())
			var values []string
			for _, e := range d.GetEntries() {
				values = append(values, e.GetKey(), e.GetValue())
			}
			add("limit/"+strings.ToLower(u.String()), values, Limit{Requests: o.GetRequestsPerUnit(), Window: unitLengths[u]})
			continue
		}
		m := c.match(req.GetDomain(), d.GetEntries())
		if m.node == nil {
			continue
		}
		for j, l := range m.node.limits {
			rule := m.node.path
			if j > 0 {
				rule += "#" + strconv.Itoa(j+1)
			}
			add(rule, m.values, l)
		}
	}
	return out, nil
}
