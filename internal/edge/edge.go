// Package edge is the one road from a request at sluice's edge to its
// answer. httplimit's middleware, grpclimit's interceptors and the server's
// endpoints (the HTTP JSON API, forward-auth, sluice's gRPC service and
// Envoy's rate-limit service) decide a request here into one Outcome, and
// only render it in their protocol.
//
// An Edge is compiled once from the policies a request is decided against
// and the keys that read the attributes their rules name; a Set compiles
// the server's configured policies one by one, by name. Deciding a request
//
//   - checks its cost (CheckCost), once;
//   - reads each attribute with its key: a key that reports the attribute
//     absent leaves it out, and the Limiter decides whether a rule needs
//     it; a value that is not valid UTF-8 is bad input (ErrInvalidAttribute);
//   - decides each policy in order and stops at the first that denies;
//   - reports store failures, and the store answering again, to an outage
//     reporter (package outage), which logs the first failure of an
//     outage, a summary per interval and its end, not a line per request;
//   - logs would-be denials of shadow policies and unexpected errors;
//   - tells a denial by a quota from one by the failure policy.
//
// Classify is the one table from sluice's errors for bad input to a problem
// code and an HTTP status.
package edge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/outage"
)

// Key reads one attribute from a request of type R. An error that wraps
// the Config's Absent error reports that the request does not carry the
// attribute; any other error, that it cannot be read.
type Key[R any] func(R) (string, error)

// Op is what deciding does to the windows.
type Op uint8

const (
	// OpDecide admits the request when it fits and records it then:
	// Limiter.AllowN.
	OpDecide Op = iota

	// OpPeek answers what OpDecide would, recording nothing: Limiter.Peek.
	OpPeek

	// OpRecord records the request whether or not it fits: Limiter.Record.
	OpRecord
)

// opNames are the ops' names, as the server's API names them.
var opNames = [...]string{OpDecide: "decide", OpPeek: "peek", OpRecord: "record"}

// String returns the op's name, as the server's API names it.
func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return "Op(" + strconv.Itoa(int(o)) + ")"
}

// Call is what one request asks of an Edge besides its attributes.
type Call struct {
	// Cost is the request's cost, at least 1.
	Cost int64

	// Op is what deciding does; OpDecide when zero.
	Op Op

	// Tag, when its key is set, is the first attribute of every record
	// logged for the request: the gRPC method, the server's API.
	Tag slog.Attr
}

// Log says how an Edge logs. Each record carries the call's Tag first, then
// the attributes named here; a message left empty is not logged.
type Log struct {
	// Logger receives the records. Default: discard.
	Logger *slog.Logger

	// StoreFailed is logged at warn when the store failed and the failure
	// policy (or the fallback store) decided, for the first such failure
	// of an outage: policy, allowed, fallback (whether a fallback store
	// decided), err. Outage summarizes the failures that follow.
	StoreFailed string

	// Outage throttles the store's failures: it logs StoreFailed for the
	// first of an outage, then a summary per interval, then the end.
	// Default: a Reporter of Logger with outage.DefaultInterval, the
	// Limiter's circuit and Prefix, one per Edge or Set.
	Outage *outage.Reporter

	// Prefix starts the messages of the Reporter made when Outage is nil
	// (summaries, the end, the circuit breaker's changes).
	Prefix string

	// Shadow is logged at info when a shadow policy would have denied:
	// policy, denied_by, retry_after.
	Shadow string

	// Failed is logged at error when the Limiter returned an error that is
	// neither bad input nor a store failure: policy, err.
	Failed string

	// KeyFailed is logged at debug when an attribute a key read, or
	// reported absent, fails the request: attribute, err.
	KeyFailed string
}

// PackageLog is the Log of a library's edge: the messages of httplimit and
// grpclimit, prefixed with pkg ("httplimit"), which calls what it limits
// what ("request", "call").
func PackageLog(logger *slog.Logger, pkg, what string) Log {
	return Log{
		Logger:      logger,
		Prefix:      pkg + ": ",
		StoreFailed: pkg + ": rate limiter store failed; failure policy applied",
		Shadow:      pkg + ": shadow policy would deny",
		Failed:      pkg + ": rate limiter rejected the " + what,
		KeyFailed:   pkg + ": cannot read a rate-limit key",
	}
}

// Config configures an Edge. Limiter and Policies are required.
type Config[R any] struct {
	// Limiter decides every request.
	Limiter *sluice.Limiter

	// Policies are decided for each request, in order: valid, with
	// distinct names, at least one.
	Policies []*sluice.Policy

	// Keys returns the key that reads attribute attr from a request, or
	// nil when there is none. Nil: no keys.
	Keys func(attr string) Key[R]

	// KeysOptional lets an attribute a rule names have no key: it is then
	// absent from every request read with keys (Decide), and given only by
	// callers that pass the attributes (DecideAttrs). Default: New reports
	// an error for an attribute without a key.
	KeysOptional bool

	// Absent is the error that a key's error wraps to report its attribute
	// absent from the request. Nil: every key error is an unreadable
	// attribute.
	Absent error

	// Log says how to log.
	Log Log
}

// Edge decides requests of type R against a list of policies. It is safe
// for concurrent use. Its zero value is not usable; create one with New.
type Edge[R any] struct {
	lim      *sluice.Limiter
	policies []policy
	attrs    []string // every attribute a rule names, each once, in order
	keys     []key[R]
	absent   error
	log      Log
	maps     sync.Pool // map[string]string, reused between requests
}

// policy is one policy compiled, with the attributes a request may need:
// the By attributes of rules that are not Optional.
type policy struct {
	p        *sluice.Policy
	required []string
}

type key[R any] struct {
	name string
	read Key[R]
}

// absence is an attribute a key reported absent, and the key's error.
type absence struct {
	name string
	err  error
}

// New compiles cfg into an Edge. It reports an error, which the caller
// prefixes with its package, for a missing limiter, no policies, a nil or
// invalid policy, a policy listed twice, or an attribute without a key
// (unless cfg.KeysOptional).
func New[R any](cfg Config[R]) (*Edge[R], error) {
	if cfg.Limiter == nil {
		return nil, errors.New("Config.Limiter is nil")
	}
	if len(cfg.Policies) == 0 {
		return nil, errors.New("Config.Policies is empty; give at least one policy")
	}
	e := &Edge[R]{lim: cfg.Limiter, absent: cfg.Absent, log: cfg.Log}
	if e.log.Logger == nil {
		e.log.Logger = slog.New(slog.DiscardHandler)
	}
	if e.log.Outage == nil {
		e.log.Outage = newReporter(cfg.Log, cfg.Limiter)
	}
	for i, p := range cfg.Policies {
		if p == nil {
			return nil, fmt.Errorf("Config.Policies[%d] is nil", i)
		}
		if err := p.Validate(); err != nil {
			return nil, err
		}
		if slices.ContainsFunc(e.policies, func(q policy) bool { return q.p.Name == p.Name }) {
			return nil, fmt.Errorf("policy %q is listed twice", p.Name)
		}
		pol := policy{p: p}
		for j := range p.Rules {
			r := &p.Rules[j]
			if !r.Optional {
				pol.required = append(pol.required, r.By...)
			}
			for _, a := range ruleAttributes(r) {
				if slices.Contains(e.attrs, a) {
					continue
				}
				e.attrs = append(e.attrs, a)
				var read Key[R]
				if cfg.Keys != nil {
					read = cfg.Keys(a)
				}
				switch {
				case read != nil:
					e.keys = append(e.keys, key[R]{name: a, read: read})
				case cfg.KeysOptional:
				case slices.Contains(r.By, a):
					return nil, fmt.Errorf("policy %q rule %q is keyed by attribute %q, which has no function in Config.Keys", p.Name, r.Name, a)
				default:
					return nil, fmt.Errorf("policy %q rule %q applies by attribute %q, which has no function in Config.Keys", p.Name, r.Name, a)
				}
			}
		}
		e.policies = append(e.policies, pol)
	}
	e.maps.New = func() any { return make(map[string]string, len(e.keys)) }
	return e, nil
}

// ruleAttributes returns the attributes r names: those it is keyed by,
// then those its conditions and overrides read, each once.
func ruleAttributes(r *sluice.Rule) []string {
	attrs := slices.Clone(r.By)
	add := func(names []string) {
		for _, a := range names {
			if !slices.Contains(attrs, a) {
				attrs = append(attrs, a)
			}
		}
	}
	add(r.Unless)
	add(slices.Sorted(maps.Keys(r.Match)))
	for _, o := range r.Overrides {
		add(slices.Sorted(maps.Keys(o.Match)))
	}
	return attrs
}

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
		d, err := e.call(ctx, pol.p, attrs, c)
		if err != nil && !d.Degraded {
			return e.rejected(ctx, c, pol, absent, err)
		}
		switch {
		case err != nil && e.log.StoreFailed != "":
			e.log.Outage.Failed(ctx, outage.Failure{Msg: e.log.StoreFailed, Tag: c.Tag, Kind: outage.Policy, Name: pol.p.Name, Err: err,
				Attrs: []slog.Attr{slog.Bool("allowed", d.Allowed), slog.Bool("fallback", len(d.Limits) > 0)}})
		case err == nil && !d.Unlimited && !d.Cached: // the store answered
			e.log.Outage.Answered(ctx)
		}
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
		if d.FailedClosed() {
			o.Kind = Unavailable
		}
		return o
	}
	o.Kind = Allowed
	return o
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

// call decides attrs against p as c.Op says.
func (e *Edge[R]) call(ctx context.Context, p *sluice.Policy, attrs map[string]string, c Call) (sluice.Decision, error) {
	switch c.Op {
	case OpPeek:
		return e.lim.Peek(ctx, p, attrs, c.Cost)
	case OpRecord:
		return e.lim.Record(ctx, p, attrs, c.Cost)
	}
	return e.lim.AllowN(ctx, p, attrs, c.Cost)
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
	if msg == "" || !e.log.Logger.Enabled(ctx, level) {
		return
	}
	if tag.Key != "" {
		attrs = append([]slog.Attr{tag}, attrs...)
	}
	e.log.Logger.LogAttrs(ctx, level, msg, attrs...)
}
