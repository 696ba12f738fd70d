package sluice

import (
	"context"
	"errors"
	"time"

	"github.com/sluicerate/sluice/store"
)

// The failure policy.
//
// A Limiter gives every store call a deadline (Config.Timeout), except a
// store.Local's. When the store fails (an error, a lost connection, the
// deadline), the Limiter never calls it again for that request (a request
// whose reply was lost may have been recorded; sending it again could count
// it twice). It answers from the fallback store when one is configured, and
// otherwise by Config.OnError, and marks the answer Degraded. After
// Breaker.Failures consecutive failures the circuit opens: for
// Breaker.CoolDown the store is not called at all and every request is
// answered at once the same way, with ErrCircuitOpen; then one request
// probes the store, and its success closes the circuit. A store.Sharded
// has a circuit per shard: a request is counted by, and waits on, the
// breaker of the shard that keeps its windows.

// guard runs op against the store under the failure policy: not at all
// while b's circuit is open (ErrCircuitOpen), with Config.Timeout's
// deadline, and with its outcome counted by b. A store.Local is
// called as is. When op fails, or is not called, guard returns what
// degraded answers instead, with op's error (or ErrCircuitOpen). It is the
// one road of Decide, Reserve and Cancel to the store.
func guard[T any](ctx context.Context, l *Limiter, b *breaker, op func(context.Context) (T, error), degraded func(ctx context.Context, cause error) T) (T, error) {
	if l.local {
		v, err := op(ctx)
		if err != nil {
			return degraded(ctx, err), err
		}
		return v, nil
	}
	if !b.admit(l.clock().Now()) {
		return degraded(ctx, ErrCircuitOpen), ErrCircuitOpen
	}
	sctx, cancel := ctx, context.CancelFunc(nil)
	if t := l.timeout(); t > 0 {
		// A caller's deadline at least as near is the call's deadline as
		// it stands (an Envoy's 20 ms, within the default 50): a context of
		// our own would cost a timer and nothing else.
		if d, ok := ctx.Deadline(); !ok || time.Until(d) > t {
			sctx, cancel = context.WithTimeout(ctx, t)
		}
	}
	v, err := op(sctx)
	if cancel != nil {
		cancel()
	}
	switch {
	case err == nil:
		b.record(l.clock().Now(), true)
		return v, nil
	case ctx.Err() != nil, errors.Is(err, store.ErrRefused):
		// The caller gave up, or the store answered with a refusal: no
		// verdict on whether the store answers.
		b.release()
	default:
		b.record(l.clock().Now(), false)
	}
	return degraded(ctx, err), err
}

// decide asks the store to decide req under the failure policy, into d;
// the decision's statuses come from b (nil: see statuses.take). A store.Local
// is called as guard calls it, without going through guard's closures: it
// is the road of every Limiter.Allow on the memory store.
func (l *Limiter) decide(ctx context.Context, req *store.Request, b *statuses, d *Decision) error {
	if l.local {
		if err := l.store.Decide(ctx, req); err != nil {
			*d = l.degraded(ctx, req)
			return err
		}
		d.combine(req, b)
		return nil
	}
	var err error
	*d, err = guard(ctx, l, l.breakerOf(req), func(ctx context.Context) (Decision, error) {
		if err := l.store.Decide(ctx, req); err != nil {
			return Decision{}, err
		}
		return newDecision(req, b), nil
	}, func(ctx context.Context, _ error) Decision {
		return l.degraded(ctx, req)
	})
	return err
}

// degraded answers req without the store: from the fallback store, with
// each limit divided by Config.FallbackShare, or by Config.OnError when
// there is none, it fails, or a request's cost exceeds a divided limit.
func (l *Limiter) degraded(ctx context.Context, req *store.Request) Decision {
	if l.cfg.Fallback != nil && ctx.Err() == nil {
		if freq, ok := l.fallbackRequest(req); ok && l.cfg.Fallback.Decide(ctx, freq) == nil {
			d := newDecision(freq, nil)
			d.Degraded = true
			return d
		}
	}
	return Decision{Allowed: l.cfg.OnError == Allow, Degraded: true}
}

// fallbackRequest returns req with every limit divided by the fallback
// share (at least 1), and false when a check's cost exceeds its divided
// limit.
func (l *Limiter) fallbackRequest(req *store.Request) (*store.Request, bool) {
	freq := *req
	freq.Results = nil
	share := int64(l.cfg.FallbackShare)
	if share <= 1 {
		return &freq, true
	}
	freq.Checks = make([]store.Check, len(req.Checks))
	for i, c := range req.Checks {
		l.divide(&c)
		if c.Limit > 0 && c.Cost > c.Limit {
			return nil, false
		}
		freq.Checks[i] = c
	}
	return &freq, true
}

// divide divides c's limit (a concurrency check's too) by the fallback
// share, at least 1: c's figure on the fallback store.
func (l *Limiter) divide(c *store.Check) {
	if share := int64(l.cfg.FallbackShare); share > 1 && c.Limit > 0 {
		c.Limit = max(1, c.Limit/share)
	}
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
