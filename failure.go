package sluice

import (
	"context"
	"errors"
	"time"
)

// Failure policy.
//
// A Limiter gives every store call a deadline (Config.Timeout), except a
// LocalStore's. When the
// store fails (an error, a lost connection, the deadline), the Limiter never
// calls it again for that request (a request whose reply was lost may have
// been recorded; sending it again could count it twice). It answers from the
// fallback store when one is configured, and otherwise by Config.OnError,
// and marks the decision Degraded. After Breaker.Failures consecutive
// failures the circuit opens: for Breaker.CoolDown the store is not called at
// all and every request is answered at once the same way, with
// ErrCircuitOpen; then one request probes the store, and its success closes
// the circuit.

// DefaultTimeout is Config.Timeout's default.
const DefaultTimeout = 50 * time.Millisecond

// Breaker configures a Limiter's circuit breaker. The zero value is the
// default.
type Breaker struct {
	// Failures is the number of consecutive store failures that open the
	// circuit. Default 5; a negative value disables the breaker.
	Failures int

	// CoolDown is how long an open circuit answers without calling the
	// store before one request probes it. Default 1s.
	CoolDown time.Duration
}

// Defaults of Breaker's fields.
const (
	DefaultBreakerFailures = 5
	DefaultBreakerCoolDown = time.Second
)

// inputError reports whether err is bad input rather than a store failure.
func inputError(err error) bool {
	for _, target := range []error{ErrInvalidCost, ErrCostExceedsLimit, ErrMissingAttribute,
		ErrInvalidPolicy, ErrEmptyPolicy, ErrInvalidSchedule} {
		if errors.Is(err, target) {
			return true
		}
	}
	return false
}

// call runs op against the store under the failure policy: not at all while
// the circuit is open (ErrCircuitOpen), with Config.Timeout's deadline, and
// with its outcome counted by the breaker. A LocalStore is called as is. It
// reports whether the failure policy must answer instead (the store failed,
// the circuit is open, or the caller's context ended), and op's error (bad
// input is returned as is, not failed).
func (l *Limiter) call(ctx context.Context, op func(context.Context) error) (failed bool, err error) {
	if l.local {
		err = op(ctx)
		return err != nil && !inputError(err), err
	}
	if !l.breaker.admit(l.clock().Now()) {
		return true, ErrCircuitOpen
	}
	sctx, cancel := ctx, context.CancelFunc(func() {})
	if t := l.timeout(); t > 0 {
		sctx, cancel = context.WithTimeout(ctx, t)
	}
	err = op(sctx)
	cancel()
	switch {
	case err == nil:
		l.breaker.record(l.clock().Now(), true)
		return false, nil
	case inputError(err):
		l.breaker.release()
		return false, err
	case ctx.Err() != nil:
		// The caller gave up: no verdict on the store.
		l.breaker.release()
	default:
		l.breaker.record(l.clock().Now(), false)
	}
	return true, err
}

// decide asks the store under the failure policy.
func (l *Limiter) decide(ctx context.Context, req *Request) (Decision, error) {
	var d Decision
	failed, err := l.call(ctx, func(ctx context.Context) (err error) {
		d, err = l.store.Decide(ctx, req)
		return err
	})
	if failed {
		return l.degraded(ctx, req, err)
	}
	if err != nil {
		return Decision{}, err
	}
	return d, nil
}

// degraded answers req without the store: from the fallback store, with
// each limit divided by Config.FallbackShare, or by Config.OnError when
// there is none or it fails too. It returns cause with the decision.
func (l *Limiter) degraded(ctx context.Context, req *Request, cause error) (Decision, error) {
	if l.cfg.Fallback != nil {
		freq := *req
		freq.Policy = l.fallbackPolicy(req.Policy)
		freq.Limits = nil
		if err := freq.Validate(); err == nil {
			if d, err := l.cfg.Fallback.Decide(ctx, &freq); err == nil {
				d.Degraded = true
				return d, cause
			}
		}
	}
	return Decision{Allowed: l.cfg.OnError == Allow, Degraded: true}, cause
}

// fallbackPolicy returns p with every limit divided by the fallback share,
// at least 1.
func (l *Limiter) fallbackPolicy(p *Policy) *Policy {
	share := int64(l.cfg.FallbackShare)
	if share <= 1 {
		return p
	}
	q := *p
	q.Rules = make([]Rule, len(p.Rules))
	for i, r := range p.Rules {
		r.Limit = max(1, r.Limit/share)
		q.Rules[i] = r
	}
	return &q
}

func (l *Limiter) timeout() time.Duration {
	if l.cfg.Timeout == 0 {
		return DefaultTimeout
	}
	return l.cfg.Timeout
}

func (l *Limiter) clock() Clock {
	if l.cfg.Clock != nil {
		return l.cfg.Clock
	}
	return systemClock{}
}
