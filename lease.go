package sluice

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sluicerate/sluice/store"
)

// ErrInvalidLease reports a lease id that is not one sluice made, or is
// given with a policy other than its own. An id that sluice made but that
// is unknown to the store (released, settled, expired) is no error: the
// lease's methods report it not held.
var ErrInvalidLease = errors.New("sluice: invalid lease id")

// Lease is an admitted request that stays open until its holder releases
// or settles it, or it expires: a slot in each concurrency rule of its
// policy (Rule.Concurrency), and the estimate it recorded in the rate
// rules, which Settle replaces with the real cost.
//
// A Lease is safe for concurrent use; the zero Lease holds nothing.
// Release and Settle end it: the
// second of them, or either after the lease expired, reports it not held
// and changes nothing. A Lease that holds nothing (its policy limited
// nothing, or the store failed and Config.OnError admitted the request)
// has an empty ID, and its methods report it not held. A lease the
// fallback store took while the store failed (see Limiter.Acquire) is
// released, settled and extended on the fallback store, never on the
// store, whether or not the store answers again.
type Lease struct {
	l       *Limiter
	p       *Policy
	rules   []*Rule      // the rule of each of finish's checks, with Config.Overrides
	fb      store.Leaser // the fallback store, when it holds the lease
	id      string
	ttl     time.Duration
	finish  store.FinishRequest // Op, Cost and TTL set per call
	expires time.Time
	gone    bool // its rules are no longer the policy's: never held
}

// ID returns the lease's id: opaque, unguessable, and naming the policy
// and the windows the lease holds, so that another process with the same
// configuration can end it (Limiter.ResumeLease). Empty for a lease that
// holds nothing.
func (x *Lease) ID() string { return x.id }

// TTL returns the lease time: how long after it was taken, or last
// extended, the lease expires unless released (its concurrency rule's
// lease, after a runtime override of its window, as it stood when the
// lease was taken, resumed or last extended); 0 for a lease that holds
// nothing.
func (x *Lease) TTL() time.Duration {
	if x == nil || x.id == "" {
		return 0
	}
	return x.ttl
}

// Expires returns when the lease expires unless released or extended, on
// the store's clock (Redis TIME for the Redis store; the fallback store's
// for a lease it holds); the zero time for a lease that holds nothing or
// was resumed from an id.
func (x *Lease) Expires() time.Time { return x.expires }

// Degraded reports whether the lease is the fallback store's
// (Config.Fallback), taken while the store failed: its slots are this
// process's, counted against the limits divided by Config.FallbackShare,
// and its methods act on the fallback store only.
func (x *Lease) Degraded() bool { return x != nil && x.fb != nil }

// Release frees the lease's slots and ends it, keeping the estimate
// recorded in the rate rules, and reports whether the lease was held.
func (x *Lease) Release(ctx context.Context) (bool, error) {
	st, err := x.do(ctx, store.LeaseRelease, 0)
	return st.Held, err
}

// Settle records cost, the request's real cost, in the policy's rate rules
// in place of the estimate it was acquired with, frees its slots and ends
// the lease, and reports whether the lease was held. More than the
// estimate is recorded even over a limit, since the work happened; less is
// refunded. Cost is 0 to MaxCost, else the error wraps ErrInvalidCost and
// nothing changes. See store.Leaser for what each algorithm makes of it.
func (x *Lease) Settle(ctx context.Context, cost int64) (bool, error) {
	if cost < 0 || cost > MaxCost {
		return false, fmt.Errorf("%w: settling a lease of policy %q got cost %d; give the real cost, 0 to 2^53 (%d)",
			ErrInvalidCost, x.finish.Policy, cost, int64(MaxCost))
	}
	st, err := x.do(ctx, store.LeaseSettle, cost)
	return st.Held, err
}

// Extend keeps the lease and its slots for another lease time from now,
// for work that lasts longer than one, and reports whether the lease was
// held (an expired lease cannot be extended).
func (x *Lease) Extend(ctx context.Context) (bool, error) {
	st, err := x.do(ctx, store.LeaseExtend, 0)
	return st.Held, err
}

// do sends op with cost on the lease; an extension that found the lease
// held moves its expiry and takes the lease time it was sent with (an
// override's, when one changed since).
func (x *Lease) do(ctx context.Context, op store.LeaseOp, cost int64) (store.LeaseState, error) {
	if x == nil || x.id == "" || x.gone {
		return store.LeaseState{}, nil
	}
	req := x.request(op, cost)
	st, err := x.send(ctx, &req)
	if op == store.LeaseSettle && err == nil && st.Held && x.fb == nil && x.l.cfg.hooks.OnOverLimit != nil {
		x.l.overLimit(req.Policy, req.Checks, cost)
	}
	if op == store.LeaseExtend && st.Held {
		x.expires, x.ttl = st.Expires, req.TTL
	}
	return st, err
}

// request returns the store's request of op with cost on the lease.
func (x *Lease) request(op store.LeaseOp, cost int64) store.FinishRequest {
	req := x.finish
	req.Op, req.Cost, req.TTL = op, cost, x.ttl
	if x.rules != nil {
		// The windows' figures as a decision resolves them now: a runtime
		// override set, changed or dropped since the lease was taken moves
		// them for the lease as it does for decisions (the store trims a
		// log and rolls a counter by its window; an extension lasts the
		// lease time).
		req.Checks = slices.Clone(req.Checks)
		for i := range req.Checks {
			x.l.figure(x.p, x.rules[i], &req.Checks[i])
		}
		req.TTL = leaseTTL(req.Checks)
	}
	if x.fb != nil {
		// The fallback store's figures: limits divided as fallbackRequest
		// divides them (finish keeps the undivided ones).
		if x.rules == nil {
			req.Checks = slices.Clone(req.Checks)
		}
		for i := range req.Checks {
			x.l.divide(&req.Checks[i])
		}
	}
	return req
}

// send sends req to the store, through the Limiter's breaker and deadline,
// or, for a lease the fallback store holds, to the fallback store as is.
func (x *Lease) send(ctx context.Context, req *store.FinishRequest) (store.LeaseState, error) {
	if x.fb != nil {
		return x.fb.Finish(ctx, req)
	}
	lr, err := x.l.leaser()
	if err != nil {
		return store.LeaseState{}, err
	}
	b := x.l.breakerOf(&store.Request{Policy: req.Policy, Shared: req.Shared, Checks: req.Checks})
	return guard(ctx, x.l, b, func(ctx context.Context) (store.LeaseState, error) {
		return lr.Finish(ctx, req)
	}, func(context.Context, error) store.LeaseState { return store.LeaseState{} })
}

// Acquire decides cost units (1 to MaxCost) against every rule of p that
// applies to attrs, as AllowN does, and when they fit holds a lease: a slot in each
// concurrency rule (Rule.Concurrency) until the lease is released, settled
// or expires, and cost recorded in each rate rule as an estimate that
// Lease.Settle replaces with the real cost. Rate and concurrency rules are
// decided together, all or nothing: a denied request holds no slot and
// records nothing. A concurrency rule that denies reports
// CauseConcurrency, with RetryAfter the time until its earliest live lease
// expires.
//
// The lease is not nil when the decision is allowed: release or settle it
// when the work is done (a deferred Release after a Settle does nothing).
// A request no rule applies to is allowed with a lease that holds nothing.
//
// Bad input returns an error as AllowN does, and so does a Penalize policy
// or one with a spread rule, which cannot be leased. A store failure (or
// an open circuit) returns the error with a Degraded decision, made as
// AllowN's is: when Config.Fallback keeps leases (store.Leaser, as the
// memory store does) and the caller's context is not done, the fallback
// store decides and holds the lease, with every limit, a concurrency
// rule's too, divided by Config.FallbackShare (at least 1), so that the
// processes sharing the store hold at most about the rule's concurrency
// between them while it fails. That lease's methods go to the fallback
// store only, even after the store answers again (Lease.Degraded), and
// its ID is one that only this Limiter's ResumeLease finds. Otherwise
// (no fallback, one that keeps no leases, the fallback failed, or the cost
// exceeds a divided limit) Config.OnError decides, and an admitted request
// gets a lease that holds nothing. A store whose reply was lost may have
// taken the lease all the same, or take it when the call reaches it (a
// frozen Redis runs it when it wakes): the Limiter then abandons the
// store's lease in the background once the store answers again, which
// frees its slot and refunds its estimate, or keeps the call from taking
// anything if it has not run yet (store.LeaseAbandon; Limiter.AbandonStats
// says what it did). Until then that slot is held by nobody; if no abandon
// is answered within the lease time, or the process ends first, until the
// lease time passes. A Shadow policy's would-be denial is allowed with a
// lease that holds nothing. The deny cache is not used. A lease of a
// policy without a concurrency rule lives as long as its longest window,
// QuotaLease for a calendar quota or a credits rule.
func (l *Limiter) Acquire(ctx context.Context, p *Policy, attrs map[string]string, cost int64) (*Lease, Decision, error) {
	cp, err := p.compiled()
	if err != nil {
		return nil, Decision{}, err
	}
	p = &cp.snap // the policy as frozen
	if err := leasable(p); err != nil {
		return nil, Decision{}, err
	}
	s := getScratch()
	defer putScratch(s)
	if err := s.resolve(cp, attrs, cost, l.cfg.Overrides); err != nil {
		return nil, Decision{}, err
	}
	x := &Lease{l: l}
	if len(s.req.Checks) == 0 {
		return x, newDecision(&s.req, nil), nil
	}
	lr, err := l.leaser()
	if err != nil {
		return nil, Decision{}, err
	}
	s.req.Mode, s.req.DryRun = store.ModeAllow, false
	grant := store.LeaseGrant{ID: newLeaseID(leaseIDVersion, p.Name, s.req.Checks), TTL: leaseTTL(s.req.Checks)}
	id, sent := grant.ID, false
	d, err := guard(ctx, l, l.breakerOf(&s.req), func(ctx context.Context) (Decision, error) {
		sent = ctx.Err() == nil // a store sends nothing for a context done
		if err := lr.Acquire(ctx, &s.req, &grant); err != nil {
			return Decision{}, err
		}
		return newDecision(&s.req, &s.statuses), nil
	}, func(ctx context.Context, cause error) Decision {
		if sent && !l.local && !errors.Is(cause, store.ErrClosed) && !errors.Is(cause, store.ErrNotLeasable) {
			// The store may have taken the lease, or take it yet: it is
			// abandoned once the store answers (abandon.go).
			l.abandon(&s.req, id, grant.TTL)
		}
		var d Decision
		d, x.fb = l.degradedAcquire(ctx, &s.req, &grant)
		return d
	})
	if p.Shadow && !d.Allowed {
		d.Allowed = true
		d.Shadowed = d.DeniedBy != ""
	}
	if grant.Expires.IsZero() {
		x.fb = nil
		if !d.Allowed {
			x = nil
		}
		return x, d, err
	}
	x.id, x.ttl, x.expires = grant.ID, grant.TTL, grant.Expires
	x.finish = finishOf(&s.req, grant.ID)
	if l.cfg.Overrides != nil {
		x.p, x.rules = p, make([]*Rule, len(x.finish.Checks))
		for i := range x.finish.Checks {
			x.rules[i] = p.rule(x.finish.Checks[i].Rule)
		}
	}
	return x, d, err
}

// degradedAcquire answers the Acquire of req, whose lease is grant,
// without the store: from the fallback store when it keeps leases, with
// each limit divided by Config.FallbackShare, returning it as the store
// that holds the lease when it granted one; otherwise by Config.OnError,
// holding nothing (grant.Expires zero).
func (l *Limiter) degradedAcquire(ctx context.Context, req *store.Request, grant *store.LeaseGrant) (Decision, store.Leaser) {
	grant.Expires = time.Time{}
	if fb, ok := l.cfg.Fallback.(store.Leaser); ok && ctx.Err() == nil {
		if freq, ok := l.fallbackRequest(req); ok {
			// An id of its own, naming the fallback store: the store's
			// may hold a lease there, if the store took it and its reply
			// was lost.
			fg := store.LeaseGrant{ID: newLeaseID(leaseIDFallback, req.Policy, req.Checks), TTL: grant.TTL}
			if fb.Acquire(ctx, freq, &fg) == nil {
				*grant = fg
				d := newDecision(freq, nil)
				d.Degraded = true
				return d, fb
			}
		}
	}
	return Decision{Allowed: l.cfg.OnError == Allow, Degraded: true}, nil
}

// ResumeLease returns the lease of p whose ID is id, taken by this or
// another process with the same configuration (a server handing out lease
// ids), to release, settle or extend it. An id that is not one of p's
// returns ErrInvalidLease. A lease that names rules p no longer has (its
// configuration changed) is returned, and reports itself not held. The
// lease's windows take the figures a decision gives them, after the
// Limiter's runtime overrides (Config.Overrides), as a lease Acquire
// returns does.
//
// The id of a lease the fallback store took (Lease.Degraded) names it as
// such: its lease is resumed on this Limiter's fallback store, never on
// the store, so it is found in the process that took it (ended there
// while it is alive) and reports itself not held anywhere else, or when
// the Limiter has no fallback store that keeps leases.
func (l *Limiter) ResumeLease(p *Policy, id string) (*Lease, error) {
	if err := leasable(p); err != nil {
		return nil, err
	}
	fallback, policy, windows, err := parseLeaseID(id)
	if err != nil {
		return nil, err
	}
	if policy != p.Name {
		return nil, fmt.Errorf("%w: the lease is policy %q's, not %q's", ErrInvalidLease, policy, p.Name)
	}
	x := &Lease{l: l, p: p, id: id}
	if fallback {
		fb, ok := l.cfg.Fallback.(store.Leaser)
		if !ok {
			x.gone = true // no store of this Limiter holds it
			return x, nil
		}
		x.fb = fb
	}
	req := store.Request{Policy: p.Name}
	for _, w := range windows {
		r := p.rule(w.rule)
		if r == nil || len(r.By) != len(w.values) {
			x.gone = true
			return x, nil
		}
		c := store.Check{Rule: r.Name, Values: w.values, Algorithm: r.storeAlgorithm(), Cost: 1}
		r.setQuota(&c, 0)
		if r.Covers != "" {
			c.Covers = coveredBy(req.Checks, r.Covers) + 1
		}
		l.figure(p, r, &c)
		req.Checks = append(req.Checks, c)
		x.rules = append(x.rules, r)
	}
	x.ttl = leaseTTL(req.Checks)
	if l.cfg.Overrides == nil {
		x.rules = nil // the figures just set are the rules' own for good
	}
	if len(req.Checks) > 0 {
		// The shared values, in the order of the first rule's By, as
		// resolve gives them; the first check's rule holds each.
		first := p.rule(req.Checks[0].Rule)
		for _, a := range p.Rules[0].By {
			if p.Shares(a) {
				req.Shared = append(req.Shared, req.Checks[0].Values[slices.Index(first.By, a)])
			}
		}
	}
	x.finish = finishOf(&req, id)
	return x, nil
}

// LeasePolicy returns the name of the policy of the lease whose ID is id,
// for a server that looks the policy up before ResumeLease; an error
// wrapping ErrInvalidLease when id is not a lease id.
func LeasePolicy(id string) (string, error) {
	_, policy, _, err := parseLeaseID(id)
	return policy, err
}

// leasable reports why leases of p cannot be taken, or nil.
func leasable(p *Policy) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if p.Penalize {
		return fmt.Errorf("%w: policy %q penalizes denied attempts, which leases do not: acquire on a policy without penalize", ErrInvalidPolicy, p.Name)
	}
	for i := range p.Rules {
		if p.Rules[i].Spread > 1 {
			return fmt.Errorf("%w: policy %q rule %q is spread over sub-windows, which leases do not: acquire on a policy without spread rules", ErrInvalidPolicy, p.Name, p.Rules[i].Name)
		}
	}
	return nil
}

// leaseTTL returns how long a lease of checks lives: the lease time of
// its concurrency check (the Window, after any runtime override), or,
// without one, its longest window (after which a log or a counter has
// nothing left of the estimate to settle), a calendar quota's and a
// credits rule's counting as QuotaLease.
func leaseTTL(checks []store.Check) time.Duration {
	var ttl time.Duration
	for i := range checks {
		c := &checks[i]
		switch c.Algorithm {
		case store.Concurrency:
			return c.Window
		case store.Periodic, store.Credits:
			ttl = max(ttl, QuotaLease)
		default:
			ttl = max(ttl, c.Window)
		}
	}
	return ttl
}

// QuotaLease is how long a lease without a concurrency rule may be
// settled when its policy has a calendar quota or a credits rule (and no
// rule of a longer window): the work a balance or a monthly quota pays
// for is settled within a day, and a lease a holder never ends is kept
// no longer than that.
const QuotaLease = 24 * time.Hour

// figure sets the figures of c, a window of p's rule r, to those a
// decision gives it now: r's own, after the Limiter's runtime override of
// the window. An override Acquire would refuse (ErrInvalidPolicy) leaves
// r's own, so that a lease can always be ended. The limit is the rule's
// own, not a file override's (Rule.Overrides match attributes a lease id
// does not hold): finishing a lease uses the windows' algorithms, windows
// and lease times, never their limits.
func (l *Limiter) figure(p *Policy, r *Rule, c *store.Check) {
	limit := r.Limit
	if r.concurrent() {
		limit = r.Concurrency
	}
	var (
		o   Override
		has bool
	)
	if l.cfg.Overrides != nil {
		o, has = l.cfg.Overrides.Override(p.Name, r.Name, c.Values)
	}
	f, err := r.overridden(limit, o, has)
	if err != nil {
		f, _ = r.overridden(limit, Override{}, false)
	}
	c.Limit, c.Window, c.MinGap, c.Burst = f.limit, f.window, f.minGap, f.burst
}

// finishOf returns the Finish request of the lease id that req took, with
// copies of its checks and values (req's are reused).
func finishOf(req *store.Request, id string) store.FinishRequest {
	f := store.FinishRequest{Policy: req.Policy, Shared: slices.Clone(req.Shared), Checks: slices.Clone(req.Checks), ID: id}
	for i := range f.Checks {
		f.Checks[i].Values = slices.Clone(f.Checks[i].Values)
	}
	return f
}

// leaser returns the store's Leaser.
func (l *Limiter) leaser() (store.Leaser, error) {
	lr, ok := l.store.(store.Leaser)
	if !ok {
		return nil, fmt.Errorf("sluice: store %T keeps no leases", l.store)
	}
	return lr, nil
}

// Lease ids. An id is the URL-safe base64 (unpadded) of: a version byte
// (1 for a lease of the store, 2 for one of the fallback store, kept in
// the memory of the process that took it); 16 random bytes, what makes it
// unguessable; then, each as a uvarint length followed by its bytes, the
// policy's name and, after a uvarint count, for each window the lease
// holds its rule's name and (after a uvarint count) its values. The store
// keeps a lease by its whole id, so an id altered to name other windows,
// or the other store, names no lease.

const (
	leaseIDVersion  = 1
	leaseIDFallback = 2
	leaseNonce      = 16
	maxLeaseID      = 64 << 10 // bytes of a decoded id: more is not one sluice made
)

// leaseWindow is a window named in a lease id.
type leaseWindow struct {
	rule   string
	values []string
}

// newLeaseID returns a new id of version (leaseIDVersion or
// leaseIDFallback) for a lease of policy's checks.
func newLeaseID(version byte, policy string, checks []store.Check) string {
	b := make([]byte, 1+leaseNonce, 64)
	b[0] = version
	_, _ = rand.Read(b[1:]) // crypto/rand.Read never fails
	b = appendString(b, policy)
	b = binary.AppendUvarint(b, uint64(len(checks)))
	for i := range checks {
		b = appendString(b, checks[i].Rule)
		b = binary.AppendUvarint(b, uint64(len(checks[i].Values)))
		for _, v := range checks[i].Values {
			b = appendString(b, v)
		}
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// parseLeaseID returns whether id names a lease of the fallback store, and
// the policy and windows it names, or an error wrapping ErrInvalidLease.
func parseLeaseID(id string) (fallback bool, policy string, windows []leaseWindow, err error) {
	bad := func(why string) error { return fmt.Errorf("%w: %s", ErrInvalidLease, why) }
	if base64.RawURLEncoding.DecodedLen(len(id)) > maxLeaseID {
		return false, "", nil, bad("too long")
	}
	b, err := base64.RawURLEncoding.DecodeString(id)
	if err != nil {
		return false, "", nil, bad("not URL-safe base64")
	}
	if len(b) < 1+leaseNonce || (b[0] != leaseIDVersion && b[0] != leaseIDFallback) {
		return false, "", nil, bad("not a lease id of this version")
	}
	fallback = b[0] == leaseIDFallback
	b = b[1+leaseNonce:]
	next := func() (uint64, bool) {
		n, k := binary.Uvarint(b)
		if k <= 0 {
			return 0, false
		}
		b = b[k:]
		return n, true
	}
	str := func() (string, bool) {
		n, ok := next()
		if !ok || n > uint64(len(b)) {
			return "", false
		}
		s := string(b[:n])
		b = b[n:]
		return s, true
	}
	policy, ok := str()
	n, ok2 := next()
	if !ok || !ok2 || policy == "" || n == 0 || n > uint64(len(b)) {
		return false, "", nil, bad("truncated")
	}
	windows = make([]leaseWindow, 0, n)
	for range n {
		rule, ok := str()
		nv, ok2 := next()
		if !ok || !ok2 || nv > uint64(len(b)) {
			return false, "", nil, bad("truncated")
		}
		w := leaseWindow{rule: rule, values: make([]string, 0, nv)}
		for range nv {
			v, ok := str()
			if !ok {
				return false, "", nil, bad("truncated")
			}
			w.values = append(w.values, v)
		}
		windows = append(windows, w)
	}
	if len(b) != 0 {
		return false, "", nil, bad("trailing bytes")
	}
	return fallback, policy, windows, nil
}
