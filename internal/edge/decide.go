package edge

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"unicode/utf8"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/outage"
)

// inlineAbsent is how many absent attributes a request notes without
// allocating.
const inlineAbsent = 4

// Decide reads the attributes of r with the keys and decides them.
func (e *Edge[R]) Decide(ctx context.Context, r R, c Call) Outcome {
	if err := CheckCost(c.Cost); err != nil {
		return Outcome{Kind: BadInput, Err: err}
	}
	attrs := e.maps.Get().(map[string]string)
	defer func() {
		clear(attrs)
		e.maps.Put(attrs)
	}()
	var buf [inlineAbsent]absence
	absent := buf[:0]
	for _, k := range e.keys {
		v, err := k.read(r)
		switch {
		case err == nil && utf8.ValidString(v):
			attrs[k.name] = v
		case err == nil:
			return e.badAttribute(ctx, c, nil, k.name, InvalidAttribute(k.name), nil)
		case e.absent != nil && errors.Is(err, e.absent):
			absent = append(absent, absence{name: k.name, err: err})
		default:
			return e.badAttribute(ctx, c, nil, k.name, err, err)
		}
	}
	return e.decide(ctx, attrs, absent, c)
}

// DecideAttrs decides the attributes given, as a caller that received them
// with the request passes them (the JSON API, gRPC, Envoy's descriptors).
// The values of the attributes the policies' rules name must be valid
// UTF-8.
func (e *Edge[R]) DecideAttrs(ctx context.Context, attrs map[string]string, c Call) Outcome {
	if err := CheckCost(c.Cost); err != nil {
		return Outcome{Kind: BadInput, Err: err}
	}
	if a, err := CheckAttributes(attrs, e.attrs); err != nil {
		return Outcome{Kind: BadInput, Attribute: a, Err: err}
	}
	return e.decide(ctx, attrs, nil, c)
}

// decide decides each policy in order and stops at the first that denies.
func (e *Edge[R]) decide(ctx context.Context, attrs map[string]string, absent []absence, c Call) (o Outcome) {
	if len(absent) > 0 {
		if o, bad := e.precheck(ctx, attrs, absent, c); bad {
			return o
		}
	}
	for i := range e.policies {
		pol := &e.policies[i]
		d, lease, err := e.call(ctx, pol.p, attrs, c)
		if err != nil && !d.Degraded {
			o.release(ctx)
			return e.rejected(ctx, c, pol, absent, err)
		}
		if lease != nil {
			o.Leases = append(o.Leases, lease)
		}
		var attrs []slog.Attr
		if err != nil {
			attrs = []slog.Attr{slog.Bool("allowed", d.Allowed), slog.Bool("fallback", len(d.Limits()) > 0)}
		}
		e.log.stored(ctx, c, outage.Policy, pol.p.Name, &d, err, attrs)
		if d.Shadowed {
			e.logAttrs(ctx, slog.LevelInfo, e.log.Shadow, c.Tag, slog.String("policy", pol.p.Name),
				slog.String("denied_by", d.DeniedBy), slog.Duration("retry_after", d.RetryAfter))
		}
		o.add(d)
		o.Policy = pol.p
		if d.Allowed {
			continue
		}
		o.Kind, o.Err = Denied, err
		o.release(ctx)
		if d.FailedClosed() {
			o.Kind = Unavailable
		}
		return o
	}
	o.Kind = Allowed
	return o
}

// stored tells the outage reporter how the store call of the decision d,
// of a request of kind for name, ended: err is a store failure the failure
// policy answered (logged with attrs), nil that the store answered (unless
// d asked it nothing: Unlimited, or Cached by the deny cache). Every store
// call at the edge is told here, whatever its front.
func (l *Log) stored(ctx context.Context, c Call, kind outage.Kind, name string, d *sluice.Decision, err error, attrs []slog.Attr) {
	switch {
	case err != nil && l.StoreFailed != "":
		l.Outage.Failed(ctx, outage.Failure{Msg: l.StoreFailed, Tag: c.Tag, Kind: kind, Name: name, Err: err, Attrs: attrs})
	case err == nil && !d.Unlimited && !d.Cached:
		l.Outage.Answered(ctx)
	}
}

// precheck keeps an absent attribute from failing a later policy after an
// earlier one has recorded the request. With more than one policy, each
// that may need an absent attribute (a rule that is not Optional is keyed
// by it) is peeked first, in order, which validates the request as
// deciding it would without recording anything; the first that rejects the
// input answers for the request. Such a peek asks the store only when the
// rule that names the attribute turns out not to apply (its Match or
// Unless).
func (e *Edge[R]) precheck(ctx context.Context, attrs map[string]string, absent []absence, c Call) (Outcome, bool) {
	if len(e.policies) < 2 {
		return Outcome{}, false
	}
	for i := range e.policies {
		pol := &e.policies[i]
		if !slices.ContainsFunc(absent, func(a absence) bool { return slices.Contains(pol.required, a.name) }) {
			continue
		}
		if d, err := e.lim.Peek(ctx, pol.p, attrs, c.Cost); err != nil && !d.Degraded {
			return e.rejected(ctx, c, pol, absent, err), true
		}
	}
	return Outcome{}, false
}

// call decides attrs against p as c.Op says; the lease is OpAcquire's
// when it admitted the request.
func (e *Edge[R]) call(ctx context.Context, p *sluice.Policy, attrs map[string]string, c Call) (sluice.Decision, *sluice.Lease, error) {
	var d sluice.Decision
	var err error
	switch c.Op {
	case OpPeek:
		d, err = e.lim.Peek(ctx, p, attrs, c.Cost)
	case OpRecord:
		d, err = e.lim.Record(ctx, p, attrs, c.Cost)
	case OpAcquire:
		x, d, err := e.lim.Acquire(ctx, p, attrs, c.Cost)
		return d, x, err
	default:
		d, err = e.lim.AllowN(ctx, p, attrs, c.Cost)
	}
	return d, nil, err
}

// rejected is the outcome of a policy the Limiter decided nothing for:
// bad input when Classify knows the error, naming the missing attribute and
// its key's error when one is missing, and Failed otherwise.
func (e *Edge[R]) rejected(ctx context.Context, c Call, pol *policy, absent []absence, err error) Outcome {
	if _, ok := Classify(err); !ok {
		e.logAttrs(ctx, slog.LevelError, e.log.Failed, c.Tag, slog.String("policy", pol.p.Name), slog.Any("err", err))
		return Outcome{Kind: Failed, Policy: pol.p, Err: err}
	}
	var missing *sluice.MissingAttributeError
	if !errors.As(err, &missing) {
		return Outcome{Kind: BadInput, Policy: pol.p, Err: err}
	}
	a := missing.Attribute
	var kerr error
	for _, ab := range absent {
		if ab.name == a {
			kerr = ab.err
		}
	}
	return e.badAttribute(ctx, c, pol.p, a, err, kerr)
}

// badAttribute is the outcome of a request whose attribute a fails it.
func (e *Edge[R]) badAttribute(ctx context.Context, c Call, p *sluice.Policy, a string, err, kerr error) Outcome {
	logged := kerr
	if logged == nil {
		logged = err
	}
	e.logAttrs(ctx, slog.LevelDebug, e.log.KeyFailed, c.Tag, slog.String("attribute", a), slog.Any("err", logged))
	return Outcome{Kind: BadInput, Policy: p, Attribute: a, Err: err, KeyErr: kerr}
}

// newReporter returns the outage reporter of an Edge or Set whose Log
// names none.
func newReporter(l Log, lim *sluice.Limiter) *outage.Reporter {
	cfg := outage.Config{Logger: l.Logger, Prefix: l.Prefix}
	if lim != nil {
		cfg.Circuit = lim.Circuit
	}
	return outage.New(cfg)
}

// logAttrs logs msg at level with tag first, unless msg is empty.
func (e *Edge[R]) logAttrs(ctx context.Context, level slog.Level, msg string, tag slog.Attr, attrs ...slog.Attr) {
	logAttrs(ctx, e.log.Logger, level, msg, tag, attrs...)
}

// logAttrs logs msg to l at level with tag first, unless msg is empty.
func logAttrs(ctx context.Context, l *slog.Logger, level slog.Level, msg string, tag slog.Attr, attrs ...slog.Attr) {
	if msg == "" || !l.Enabled(ctx, level) {
		return
	}
	if tag.Key != "" {
		attrs = append([]slog.Attr{tag}, attrs...)
	}
	l.LogAttrs(ctx, level, msg, attrs...)
}
