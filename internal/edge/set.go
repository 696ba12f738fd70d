package edge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/outage"
)

// ErrUnknownPolicy reports a policy name that is not configured: the
// front's list of policies, not the library's, names it.
var ErrUnknownPolicy = errors.New("sluice: unknown policy")

// Set is a server's configured policies by name, each compiled into an Edge
// of its own: a request names the one policy it is decided against. It is
// safe for concurrent use. Its zero value is not usable; create one with
// NewSet.
type Set[R any] struct {
	edges map[string]*Edge[R]
	names []string

	lim       *sluice.Limiter
	log       Log
	schedules map[string]*sluice.Schedule
	scheds    []string // the schedules' names, in order
}

// NewSet compiles each of cfg.Policies into an Edge of its own, with cfg's
// limiter, keys and log, and takes cfg.Schedules; all share one outage
// reporter.
func NewSet[R any](cfg Config[R]) (*Set[R], error) {
	s := &Set[R]{edges: make(map[string]*Edge[R], len(cfg.Policies)), lim: cfg.Limiter,
		schedules: make(map[string]*sluice.Schedule, len(cfg.Schedules))}
	if cfg.Log.Outage == nil {
		cfg.Log.Outage = newReporter(cfg.Log, cfg.Limiter) // one for all
	}
	if cfg.Log.Logger == nil {
		cfg.Log.Logger = slog.New(slog.DiscardHandler)
	}
	s.log = cfg.Log
	for _, sc := range cfg.Schedules {
		if s.schedules[sc.Name] != nil {
			return nil, fmt.Errorf("schedule %q is listed twice", sc.Name)
		}
		s.schedules[sc.Name] = sc
		s.scheds = append(s.scheds, sc.Name)
	}
	for _, p := range cfg.Policies {
		one := cfg
		one.Policies = []*sluice.Policy{p}
		e, err := New(one)
		if err != nil {
			return nil, err
		}
		if s.edges[p.Name] != nil {
			return nil, fmt.Errorf("policy %q is listed twice", p.Name)
		}
		s.edges[p.Name] = e
		s.names = append(s.names, p.Name)
	}
	return s, nil
}

// Decide decides r against the policy named name, reading its attributes
// with the keys (see Edge.Decide).
func (s *Set[R]) Decide(ctx context.Context, name string, r R, c Call) Outcome {
	e, o := s.lookup(name, c)
	if e == nil {
		return o
	}
	return e.Decide(ctx, r, c)
}

// DecideAttrs decides the attributes given against the policy named name
// (see Edge.DecideAttrs).
func (s *Set[R]) DecideAttrs(ctx context.Context, name string, attrs map[string]string, c Call) Outcome {
	e, o := s.lookup(name, c)
	if e == nil {
		return o
	}
	return e.DecideAttrs(ctx, attrs, c)
}

// lookup returns the edge of the policy named name, or the outcome of a
// request that cannot be decided: a bad cost (checked first, as deciding
// would), or a name that is not configured.
func (s *Set[R]) lookup(name string, c Call) (*Edge[R], Outcome) {
	if err := CheckCost(c.Cost); err != nil {
		return nil, Outcome{Kind: BadInput, Err: err}
	}
	if e := s.edges[name]; e != nil {
		return e, Outcome{}
	}
	return nil, Outcome{Kind: BadInput, Err: fmt.Errorf("%w: %q; the configured policies are %q", ErrUnknownPolicy, name, s.names)}
}

// Stored tells the Set's outage reporter how a request of an Envoy domain
// that a front decided itself (resolved into a store request) ended: with
// the decision d, after err, a store failure the failure policy answered,
// or nil. It is the road's report for what does not pass through an Edge.
func (s *Set[R]) Stored(ctx context.Context, c Call, domain string, d *sluice.Decision, err error) {
	var attrs []slog.Attr
	if err != nil {
		attrs = []slog.Attr{slog.Bool("allowed", d.Allowed)}
	}
	s.log.stored(ctx, c, outage.Domain, domain, d, err, attrs)
}
