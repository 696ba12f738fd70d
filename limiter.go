package sluice

import (
	"context"
	"time"
)

// OnError is what a Limiter decides when its store fails.
type OnError uint8

const (
	// Deny fails closed: a store failure denies the request. The default.
	Deny OnError = iota

	// Allow fails open: a store failure admits the request.
	Allow
)

// Config configures a Limiter. The zero value is the default: a 50 ms
// deadline per store call, deny on failure, no fallback store, a circuit
// breaker that opens after 5 consecutive failures for 1 s.
type Config struct {
	// OnError is the decision made when the store fails (and there is no
	// Fallback, or it fails too). Default Deny.
	OnError OnError

	// Clock is the time Wait reads deadlines with and sleeps on, and the
	// circuit breaker's clock. Default: the system clock.
	Clock Clock

	// Timeout is the deadline of each store call (within the caller's
	// context). Default DefaultTimeout (50 ms); negative: none but the
	// caller's.
	Timeout time.Duration

	// Fallback, when set, decides instead of OnError when the store fails
	// or the circuit is open: typically an in-memory store, local to the
	// process. Its decisions are marked Degraded. Default nil.
	Fallback Store

	// FallbackShare divides every rule's limit (rounding down, at least 1)
	// when Fallback decides: the number of processes that share the
	// limits, so that together they admit about the limit while the store
	// is down. Default 1.
	FallbackShare int

	// Breaker configures the circuit breaker. The zero value is the
	// default.
	Breaker Breaker
}

// Limiter decides requests against policies over a Store. It validates every
// request before the store sees it, applies a policy's Penalize and Shadow
// modes, and applies the failure policy when the store fails.
//
// Allow is shorthand for AllowN with cost 1. Peek answers what AllowN would
// answer without recording anything, and Record records unconditionally.
//
// A Limiter is safe for concurrent use. Its zero value is not usable; create
// one with NewLimiter.
type Limiter struct {
	store   Store
	local   bool // store is a LocalStore
	cfg     Config
	breaker *breaker
}

// NewLimiter returns a Limiter over store.
func NewLimiter(store Store, cfg Config) *Limiter {
	_, local := store.(LocalStore)
	return &Limiter{store: store, local: local, cfg: cfg, breaker: newBreaker(cfg.Breaker)}
}

// Store returns the limiter's store.
func (l *Limiter) Store() Store { return l.store }

// Allow decides one unit of cost against p. It is shorthand for
// AllowN(ctx, p, attrs, 1).
func (l *Limiter) Allow(ctx context.Context, p *Policy, attrs map[string]string) (Decision, error) {
	return l.AllowN(ctx, p, attrs, 1)
}

// AllowN decides cost units against every rule of p and, when all fit,
// records them in every rule's window. A denied request is recorded only when
// p.Penalize is set.
//
// Bad input (an invalid policy, cost, or missing attribute) returns an error
// wrapping one of the sentinel errors and changes nothing. A store failure
// returns the error together with a Degraded decision made by the failure
// policy (Config.Fallback or Config.OnError, see Config.Timeout and
// Config.Breaker), so a caller may log the error and act on the
// decision.
func (l *Limiter) AllowN(ctx context.Context, p *Policy, attrs map[string]string, cost int64) (Decision, error) {
	return l.do(ctx, &Request{Policy: p, Attributes: attrs, Cost: cost, Mode: allowMode(p)})
}

// Peek returns the decision AllowN would return for cost units, with the
// figures AllowN would leave (Used counting the request when AllowN would
// admit it, or penalize it on a Penalize policy), recording nothing.
func (l *Limiter) Peek(ctx context.Context, p *Policy, attrs map[string]string, cost int64) (Decision, error) {
	return l.do(ctx, &Request{Policy: p, Attributes: attrs, Cost: cost, Mode: allowMode(p), DryRun: true})
}

// Record adds cost units to every rule's window of p whether or not they fit
// (recording one event into many windows at once). The decision reports
// whether the event fit and the counts after recording it.
func (l *Limiter) Record(ctx context.Context, p *Policy, attrs map[string]string, cost int64) (Decision, error) {
	return l.do(ctx, &Request{Policy: p, Attributes: attrs, Cost: cost, Mode: ModeRecord})
}

// allowMode is the mode of AllowN on p: a Penalize policy records denied
// attempts too.
func allowMode(p *Policy) Mode {
	if p != nil && p.Penalize {
		return ModeRecord
	}
	return ModeAllow
}

func (l *Limiter) do(ctx context.Context, req *Request) (Decision, error) {
	if err := req.Validate(); err != nil {
		return Decision{}, err
	}
	d, err := l.decide(ctx, req)
	if err != nil && !d.Degraded {
		return d, err
	}
	if req.Policy.Shadow && !d.Allowed {
		// A shadow policy never denies, not even by the failure policy.
		d.Allowed = true
		d.Shadowed = d.DeniedBy != ""
	}
	return d, err
}
