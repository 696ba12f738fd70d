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
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"

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

	// OpAcquire admits the request as OpDecide does and holds a lease of
	// each policy: Limiter.Acquire (Outcome.Leases).
	OpAcquire
)

// opNames are the ops' names, as the server's API names them.
var opNames = [...]string{OpDecide: "decide", OpPeek: "peek", OpRecord: "record", OpAcquire: "acquire"}

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

	// ReserveStoreFailed and CancelStoreFailed are StoreFailed for a
	// reservation the failure policy decided (schedule, ok, err) and a
	// cancellation the store failed (schedule, err); ReserveFailed is
	// Failed for a reservation (schedule, err). A Set's schedules log them.
	ReserveStoreFailed, CancelStoreFailed, ReserveFailed string
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

	// Schedules are the schedules a Set reserves on, by name: valid, with
	// distinct names. An Edge has none.
	Schedules []*sluice.Schedule

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
