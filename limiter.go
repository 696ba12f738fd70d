package sluice

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicerate/sluice/internal/hooks"
	"github.com/sluicerate/sluice/store"
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

	// Clock is the time Wait reads deadlines with and sleeps on, the
	// circuit breaker's clock and the one the deny cache times its entries
	// on. Default: the system clock (its monotonic reading).
	Clock Clock

	// Timeout is the deadline of each store call (within the caller's
	// context). Default DefaultTimeout (50 ms); negative: none but the
	// caller's.
	Timeout time.Duration

	// Fallback, when set, decides instead of OnError when the store fails
	// or the circuit is open: typically an in-memory store, local to the
	// process. Its decisions are marked Degraded. When it keeps leases
	// (store.Leaser), Acquire takes its leases there too, and they end
	// there (see Limiter.Acquire); when it keeps schedules, Reserve
	// reserves there. Default nil.
	Fallback store.Store

	// FallbackShare divides every rule's limit (rounding down, at least 1),
	// a concurrency rule's too, when Fallback decides: the number of
	// processes that share the
	// limits, so that together they admit about the limit while the store
	// is down. Default 1.
	FallbackShare int

	// Breaker configures the circuit breaker. The zero value is the
	// default.
	Breaker Breaker

	// DenyCache is the most denials the Limiter remembers, to answer the
	// requests of a policy with CacheDenials that a rule denied recently
	// without asking the store again (see Policy.CacheDenials). The
	// memory it takes is bounded by this count: the least recently used
	// denial makes room for a new one. Default DefaultDenyCache (10,000);
	// negative: no cache, whatever the policies say.
	DenyCache int

	// Overrides, when set, gives rules other figures per window while the
	// Limiter runs, over their own and their Overrides' (see Overrides).
	// Default nil: none.
	Overrides Overrides

	// hooks observe the Limiter for sluice's server (internal/hooks).
	hooks hooks.Hooks
}

func init() {
	hooks.Register(func(cfg any, h hooks.Hooks) { cfg.(*Config).hooks = h })
}

// DefaultTimeout is Config.Timeout's default.
const DefaultTimeout = 50 * time.Millisecond

// Limiter decides requests against policies over a store. It resolves a
// policy and a request's attributes into the windows the request must fit
// (the rules that apply, with their limits), validates the request before
// the store sees it, applies a policy's Penalize and Shadow modes, and
// applies the failure policy when the store fails.
//
// Allow is shorthand for AllowN with cost 1. Peek answers what AllowN would
// answer without recording anything, and Record records unconditionally.
//
// A Limiter is safe for concurrent use. Its zero value is not usable; create
// one with NewLimiter.
type Limiter struct {
	store    store.Store
	local    bool               // store is a store.Local
	checker  store.CheckDecider // store, when it decides one check without a Request (one.go)
	sharded  store.Sharded      // store, when it is a store.Sharded
	cfg      Config
	breakers *breakers
	denials  *denyCache     // nil: none
	abandons abandons       // leases of failed acquires to abandon (abandon.go)
	budgeter store.Budgeter // store, when it leases slices (budget.go)
	budgets  budgets        // the slices of budgeted rules (budget.go)
}

// NewLimiter returns a Limiter over s: memstore.New(...) for one process,
// redisstore.New(...) for many.
func NewLimiter(s store.Store, cfg Config) *Limiter {
	_, local := s.(store.Local)
	sharded, _ := s.(store.Sharded)
	budgeter, _ := s.(store.Budgeter)
	checker, _ := s.(store.CheckDecider)
	l := &Limiter{store: s, local: local, checker: checker, sharded: sharded, budgeter: budgeter, cfg: cfg, breakers: newBreakers(cfg.Breaker)}
	switch {
	case cfg.DenyCache == 0:
		l.denials = newDenyCache(DefaultDenyCache)
	case cfg.DenyCache > 0:
		l.denials = newDenyCache(cfg.DenyCache)
	}
	return l
}

// DenyCacheStats returns what the deny cache did so far (see
// Config.DenyCache); all zero when it has none.
func (l *Limiter) DenyCacheStats() DenyCacheStats {
	if l.denials == nil {
		return DenyCacheStats{}
	}
	return l.denials.stats()
}

// Circuit returns the state of the circuit breaker over the store (see
// Config.Breaker): "closed" (calls go to the store), "open" (none do until
// the cool-down ends) or "half_open" (the cool-down ended: the next call
// probes the store). It is "closed" for a store.Local, which has none. A
// store.Sharded, such as a Redis Cluster's, has a breaker per shard, and
// Circuit is the most open of them: "open" while any shard's circuit is.
func (l *Limiter) Circuit() string {
	if l.local {
		return "closed"
	}
	return l.breakers.state(l.clock().Now())
}

// breakerOf returns the breaker of the shard that keeps req's windows.
func (l *Limiter) breakerOf(req *store.Request) *breaker {
	if l.sharded == nil {
		return l.breakers.store
	}
	return l.breakers.of(l.sharded.Shard(req))
}

// queueBreaker returns the breaker of the shard that keeps q.
func (l *Limiter) queueBreaker(q store.Queue) *breaker {
	if l.sharded == nil {
		return l.breakers.store
	}
	return l.breakers.of(l.sharded.QueueShard(q))
}

// Allow decides one unit of cost against p. It is shorthand for
// AllowN(ctx, p, attrs, 1).
func (l *Limiter) Allow(ctx context.Context, p *Policy, attrs map[string]string) (d Decision, err error) {
	// AllowN's body, not a call of it: the Decision is filled where it is
	// returned, not copied from AllowN's.
	err = l.do(ctx, p, attrs, 1, store.ModeAllow, false, false, &d)
	return d, err
}

// AllowN decides cost units against every rule of p that applies to attrs
// and, when all fit, records them in every such rule's window. A denied
// request is recorded only when p.Penalize is set. A request no rule applies
// to is allowed with no limit (Decision.Unlimited).
//
// Cost is 1 to MaxCost. Bad input (an invalid policy, a cost outside that
// range, or a missing attribute) returns an error wrapping one of the
// sentinel errors and changes nothing. A store failure
// returns the error together with a Degraded decision made by the failure
// policy (Config.Fallback or Config.OnError, see Config.Timeout and
// Config.Breaker), so a caller may log the error and act on the
// decision.
func (l *Limiter) AllowN(ctx context.Context, p *Policy, attrs map[string]string, cost int64) (d Decision, err error) {
	err = l.do(ctx, p, attrs, cost, store.ModeAllow, false, false, &d)
	return d, err
}

// Peek returns the decision AllowN would return for cost units, with the
// figures AllowN would leave (Used counting the request when AllowN would
// admit it, or penalize it on a Penalize policy), recording nothing. On a
// policy with CacheDenials it answers from the deny cache as AllowN does,
// and a denial the store gives it is remembered as AllowN's is.
func (l *Limiter) Peek(ctx context.Context, p *Policy, attrs map[string]string, cost int64) (Decision, error) {
	var d Decision
	err := l.do(ctx, p, attrs, cost, store.ModeAllow, true, false, &d)
	return d, err
}

// Record adds cost units to the window of every rule of p that applies to
// attrs, whether or not they fit (recording one event into many windows at
// once), even more than a rule's limit: a cost known once the work is done
// (a model's tokens, a download's bytes) is recorded as it was, where
// AllowN and Peek return ErrCostExceedsLimit. The decision reports whether
// the event fit and the counts after recording it. Cost is 1 to MaxCost, as
// for AllowN; a window recorded past MaxCost in total counts MaxCost (see
// MaxCost). It always asks the store: the deny cache neither answers it nor
// learns from it.
func (l *Limiter) Record(ctx context.Context, p *Policy, attrs map[string]string, cost int64) (Decision, error) {
	var d Decision
	err := l.do(ctx, p, attrs, cost, store.ModeRecord, false, true, &d)
	return d, err
}

// Decide decides a request resolved by the caller into the windows it must
// fit: for a front end with a model of its own, such as Envoy's rate-limit
// descriptors. It validates req as AllowN validates a policy's request and
// applies the failure policy; the decision's statuses follow req.Checks.
// It does not use the deny cache. A request in store.ModeRecord may cost
// more than a check's limit, as a cost reported once the work is done can
// (the tokens of a model's answer): it is recorded, and reported as not
// fitting, where AllowN returns ErrCostExceedsLimit. Every check's cost,
// limit and burst is at most MaxCost. A check with a Budget (within
// MaxBudget of its figures) is answered from this Limiter's slices of its
// window as a budgeted rule of AllowN is, in store.ModeAllow and not as a
// dry run; the decision's Limits then say what req.Results would, and
// req.Results is left as it was (unless a check is a calendar quota or a
// credits balance, beside which no slices are leased). A calendar check
// (store.Periodic) names its period in Calendar, a credits check
// (store.Credits) at most one of Refill's To and Add with the period of
// its refills, and Covers a calendar check before it.
func (l *Limiter) Decide(ctx context.Context, req *store.Request) (Decision, error) {
	if err := checkRequest(req); err != nil {
		return Decision{}, err
	}
	var d Decision
	if l.budgeter != nil && req.Mode == store.ModeAllow && !req.DryRun && hasBudget(req) && !hasQuota(req) {
		s := getScratch()
		defer func() {
			clear(s.req.Checks) // the checks' values are the caller's
			putScratch(s)
		}()
		s.req.Policy, s.req.Shared, s.req.Mode, s.req.DryRun = req.Policy, req.Shared, req.Mode, false
		s.req.Checks = append(s.req.Checks[:0], req.Checks...)
		s.budgeted = true
		err := l.decideBudget(ctx, s, &d)
		return d, err
	}
	err := l.decide(ctx, req, nil, &d)
	return d, err
}

// hasBudget reports whether a check of req is of a budgeted window.
func hasBudget(req *store.Request) bool {
	for i := range req.Checks {
		if req.Checks[i].Budget > 0 {
			return true
		}
	}
	return false
}

// hasQuota reports whether req has a calendar or a credits check, beside
// which a store leases no slices: its budgeted checks are then decided
// per request.
func hasQuota(req *store.Request) bool {
	for i := range req.Checks {
		if a := req.Checks[i].Algorithm; a == store.Periodic || a == store.Credits {
			return true
		}
	}
	return false
}

// do decides a request of p for AllowN, Peek and Record into d, which is
// the zero Decision: the Decision is filled in place, not returned by value
// through every call of the road. In store.ModeAllow, a Penalize policy
// records denied attempts too.
func (l *Limiter) do(ctx context.Context, p *Policy, attrs map[string]string, cost int64, mode store.Mode, dry, record bool, d *Decision) error {
	cp, err := p.compiled()
	if err != nil {
		return err
	}
	p = &cp.snap // the policy as frozen
	if mode == store.ModeAllow && p.Penalize {
		mode = store.ModeRecord
	}
	if cp.one && !record && l.cfg.Overrides == nil {
		if ok, err := l.decideOne(ctx, cp, attrs, cost, mode, dry, d); ok {
			if p.Shadow && !d.Allowed {
				d.Allowed, d.Shadowed = true, d.DeniedBy != ""
			}
			return err
		}
	}
	s := getScratch()
	defer putScratch(s)
	s.record = record
	if err := s.resolve(cp, attrs, cost, l.cfg.Overrides); err != nil {
		return err
	}
	if len(s.req.Checks) == 0 {
		d.combine(&s.req, nil) // no rule applies: no limit, and no store call
		return nil
	}
	if cp.concurrent && !dry {
		if i := s.concurrency(); i >= 0 {
			return &leaseOnlyError{policy: p.Name, rule: s.req.Checks[i].Rule}
		}
	}
	s.req.Mode, s.req.DryRun = mode, dry
	s.budgeted = cp.budgeted && l.budgeter != nil && mode == store.ModeAllow && !dry && !record
	switch {
	case p.CacheDenials || len(s.spread) > 0:
		err = l.decideCached(ctx, p, s, d)
	case s.budgeted:
		err = l.decideBudget(ctx, s, d)
	default:
		err = l.decide(ctx, &s.req, &s.statuses, d) // what decideCached does then
	}
	if record && err == nil && !d.Degraded && l.cfg.hooks.OnOverLimit != nil {
		l.overLimit(p.Name, s.req.Checks, cost)
	}
	if p.Shadow && !d.Allowed {
		// A shadow policy never denies, not even by the failure policy.
		d.Allowed = true
		d.Shadowed = d.DeniedBy != ""
	}
	return err
}

// decideCached decides s's request: from the deny cache when p caches
// denials and one of its rules denied the request recently, otherwise by
// the store, falling over a spread rule's sub-windows; a denial by the
// store is then remembered.
func (l *Limiter) decideCached(ctx context.Context, p *Policy, s *scratch, d *Decision) error {
	// A lease released early frees room before a cached denial's wait
	// ends: a peek at a concurrency rule always asks the store.
	// Nor does a credits rule's: a balance may be topped up at any time.
	cache := l.denials != nil && p.CacheDenials && s.req.Mode == store.ModeAllow && s.concurrency() < 0 && !s.credits()
	if cache {
		s.sent = l.sendTime()
		if cached, ok := l.denials.lookup(s, s.sent); ok {
			*d = cached
			if l.cfg.hooks.OnCacheHit != nil {
				l.cacheHit(s, d)
			}
			return nil
		}
	}
	var err error
	if s.budgeted {
		err = l.decideBudget(ctx, s, d)
	} else {
		err = l.decide(ctx, &s.req, &s.statuses, d)
	}
	if len(s.spread) > 0 && err == nil && !d.Allowed && s.req.Mode == store.ModeAllow {
		for s.fallOver() {
			if cache {
				s.sent = l.sendTime()
			}
			if err = l.decide(ctx, &s.req, &s.statuses, d); err != nil || d.Allowed {
				break
			}
		}
		if err == nil && !d.Allowed {
			s.soonest()
			d.combine(&s.req, &s.statuses)
		}
	}
	if cache && err == nil && !d.Allowed {
		l.denials.fill(s, d)
	}
	return err
}

// sendTime returns the time a store call sent now starts from, for the
// deny cache: the clock's time down to its microsecond, since stores count
// whole microseconds (a store on the same clock then decides at this time
// or later). It keeps the clock's monotonic reading.
func (l *Limiter) sendTime() time.Time {
	now := l.clock().Now()
	return now.Add(-time.Duration(now.Nanosecond() % 1000))
}

// leaseOnlyError reports a Decide or Record on a policy with a concurrency
// rule, whose slots only Acquire takes. It wraps ErrInvalidPolicy; its
// LeaseOnly method gives the policy and rule, so that a front can name its
// own way to take a lease (an HTTP endpoint, a gRPC method) instead of the
// library's.
type leaseOnlyError struct{ policy, rule string }

func (e *leaseOnlyError) Error() string {
	return fmt.Sprintf("%v: policy %q rule %q limits the leases alive at once: take a lease with Limiter.Acquire and release it when done (Peek may look)",
		ErrInvalidPolicy, e.policy, e.rule)
}

func (e *leaseOnlyError) Unwrap() error { return ErrInvalidPolicy }

// LeaseOnly returns the policy and the concurrency rule that need a lease.
func (e *leaseOnlyError) LeaseOnly() (policy, rule string) { return e.policy, e.rule }

// overLimit tells the OnOverLimit hook of each rate check of checks whose
// rule's limit cost is above (a spread rule's whole limit, not its
// sub-window's share).
func (l *Limiter) overLimit(policy string, checks []store.Check, cost int64) {
	for i := range checks {
		c := &checks[i]
		// A balance, and a quota credits cover, may take any cost.
		if c.Algorithm != store.Concurrency && c.Algorithm != store.Credits && cost > c.Limit*int64(max(c.Parts, 1)) && !coveredCheck(checks, i) {
			l.cfg.hooks.OnOverLimit(policy, c, cost)
		}
	}
}
