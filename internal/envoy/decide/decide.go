// Package decide answers Envoy's rate-limit requests against envoyproxy/ratelimit's model (package envoy):
// it decides all the limits a request's descriptors match in one call to sluice.Limiter.Decide, exact
// sliding windows recorded in all of them or in none, and builds Envoy's answer. Decide is three steps,
// resolve (resolve.go), decide (decide.go) and respond (respond.go), whose one builder of Envoy's
// answers (Status, Respond) also answers a domain that names a sluice policy (package rls).
//
// docs/envoy.md lists every difference from envoyproxy/ratelimit.
package decide

import (
	"context"
	"errors"
	"fmt"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/envoy"
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

	// QuotaMode puts every descriptor in quota_mode (QUOTA_MODE=true): a
	// descriptor over its limit reports OVER_LIMIT, but the answer is
	// OVER_LIMIT only when every quota descriptor is, or a descriptor
	// outside quota_mode is.
	QuotaMode bool

	// DynamicMetadata adds the dynamic metadata envoyproxy/ratelimit sends
	// with RESPONSE_DYNAMIC_METADATA=true to every answer: the request and
	// the metadata of the descriptors that passed (respond.go).
	DynamicMetadata bool

	// DryRun decides without recording anything (sluice check).
	DryRun bool

	// Headers are the response headers to add.
	Headers Headers

	// Overrides gives windows the figures of their runtime overrides
	// (package overrides). Default: none.
	Overrides sluice.Overrides
}

// Outcome is what happened to one descriptor, for metrics.
type Outcome uint8

// Outcomes of a descriptor.
const (
	NoLimit   Outcome = iota // no rate_limit matched, or it was replaced
	Unlimited                // an unlimited rate_limit matched
	Within                   // within its limits
	Over                     // over a limit
	Shadowed                 // over a limit in shadow_mode: answered OK
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

// Decider decides store requests: a *sluice.Limiter, or a front's road to
// one that reports what the store did.
type Decider interface {
	Decide(ctx context.Context, req *store.Request) (sluice.Decision, error)
}

// Decide answers req against c's domains with lim, as envoyproxy/ratelimit
// would, with sluice's windows (see the package documentation and
// docs/envoy.md), in three steps: resolve (the descriptors matched to
// limits, the limits to windows), decide (one call to lim for the windows,
// a second one, recording nothing, for descriptors whose hits_addend is
// 0) and respond (the statuses, the overall code, the headers).
//
// A request with no domain, no descriptors, or negative hits is
// ErrBadRequest; a store failure under a fail-closed Limiter is
// ErrUnavailable; both come with no result. A domain that is not
// configured, and a descriptor that matches no limit, are OK with no
// limit.
func Decide(ctx context.Context, c *envoy.Config, lim Decider, req *rlsv3.RateLimitRequest, opts Options) (Result, error) {
	p, err := resolve(c, req, opts)
	if err != nil {
		return Result{}, err
	}
	d, err := p.decide(ctx, lim)
	if err != nil {
		return Result{}, err
	}
	return p.respond(d, opts), nil
}

// decided is what the store said of a plan's windows: the decision of
// those recorded, the peek of those of hits_addend 0, and the store's
// error when the failure policy answered.
type decided struct {
	main, peeked sluice.Decision
	storeErr     error
}

// decide asks lim for the windows of p: its main request, then its peeks.
func (p *plan) decide(ctx context.Context, lim Decider) (decided, error) {
	out := decided{main: sluice.Decision{Allowed: true, Unlimited: true, Remaining: sluice.UnlimitedRemaining}}
	call := func(req *store.Request) (sluice.Decision, error) {
		d, err := lim.Decide(ctx, req)
		switch {
		case err != nil && !d.Degraded:
			return d, fmt.Errorf("envoy: deciding domain %q: %w", p.domain, err)
		case err != nil && d.FailedClosed():
			return d, fmt.Errorf("%w: %w", ErrUnavailable, err)
		case err != nil && req == &p.main:
			out.storeErr = err
		}
		return d, nil
	}
	var err error
	if len(p.main.Checks) > 0 {
		if out.main, err = call(&p.main); err != nil {
			return decided{}, err
		}
	}
	if len(p.peeks.Checks) > 0 {
		if out.peeked, err = call(&p.peeks); err != nil {
			return decided{}, err
		}
	}
	return out, nil
}
