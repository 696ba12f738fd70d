package sluice_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/hooks"
	"github.com/sluicerate/sluice/internal/resolve"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/store"
	"github.com/sluicerate/sluice/storetest"
)

// overrideMap is an Overrides of fixed windows: policy/rule/values joined
// by '|'.
type overrideMap struct {
	mu  sync.Mutex
	m   map[string]sluice.Override
	ask int
}

func (o *overrideMap) Override(policy, rule string, values []string) (sluice.Override, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ask++
	v, ok := o.m[policy+"|"+rule+"|"+strings.Join(values, ",")]
	return v, ok
}

func (o *overrideMap) set(key string, v sluice.Override) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = map[string]sluice.Override{}
	}
	o.m[key] = v
}

func (o *overrideMap) del(key string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.m, key)
}

// plans is a policy with a file override: paid plans get 10, internal
// ones no limit, everyone else 2, per user.
func plans() *sluice.Policy {
	return &sluice.Policy{Name: "api", Rules: []sluice.Rule{{Name: "per-user", By: []string{"user"}, Limit: 2, Window: time.Minute,
		Overrides: []sluice.Override{
			{Match: map[string]string{"plan": "paid"}, Limit: 10},
			{Match: map[string]string{"plan": "internal"}, Unlimited: true},
		}}}}
}

// TestRuntimeOverridePrecedence: a runtime override beats the rule's file
// override, which beats the rule; only the overridden window changes.
func TestRuntimeOverridePrecedence(t *testing.T) {
	t.Parallel()
	ov := &overrideMap{}
	lim := sluice.NewLimiter(memstore.New(memstore.Config{}), sluice.Config{Overrides: ov})
	p := plans()
	limit := func(attrs map[string]string) (int64, bool) {
		t.Helper()
		d, err := lim.Peek(context.Background(), p, attrs, 1)
		if err != nil {
			t.Fatal(err)
		}
		if d.Unlimited {
			return 0, true
		}
		return d.Limits()[0].Limit, false
	}
	ann := map[string]string{"user": "ann", "plan": "paid"}
	bob := map[string]string{"user": "bob", "plan": "internal"}
	cid := map[string]string{"user": "cid"}
	if l, _ := limit(ann); l != 10 {
		t.Errorf("ann (paid) before any override: limit %d, want the file override's 10", l)
	}
	if _, unl := limit(bob); !unl {
		t.Error("bob (internal) before any override: want unlimited by the file override")
	}
	ov.set("api|per-user|ann", sluice.Override{Limit: 50})
	ov.set("api|per-user|bob", sluice.Override{Limit: 0})
	if l, _ := limit(ann); l != 50 {
		t.Errorf("ann with a runtime override: limit %d, want 50 over the file's 10", l)
	}
	if l, unl := limit(bob); unl || l != 0 {
		t.Errorf("bob blocked at runtime: limit %d unlimited %v, want blocked over the file's unlimited", l, unl)
	}
	d, err := lim.AllowN(context.Background(), p, bob, 1)
	if err != nil || d.Allowed || d.DeniedBy != "per-user" {
		t.Errorf("bob blocked: %+v, %v; want denied by per-user", d, err)
	}
	if l, _ := limit(cid); l != 2 {
		t.Errorf("cid, not overridden: limit %d, want the rule's 2", l)
	}
	ov.del("api|per-user|ann")
	if l, _ := limit(ann); l != 10 {
		t.Errorf("ann after the delete: limit %d, want the file override's 10 again", l)
	}
}

// TestRuntimeOverrideFigures: window, burst and min gap replace the rule's
// when set; a zero keeps the rule's; figures the rule cannot take are
// ErrInvalidPolicy, naming the runtime override.
func TestRuntimeOverrideFigures(t *testing.T) {
	t.Parallel()
	ov := &overrideMap{}
	lim := sluice.NewLimiter(memstore.New(memstore.Config{}), sluice.Config{Overrides: ov})
	p := &sluice.Policy{Name: "mix", Rules: []sluice.Rule{
		{Name: "log", By: []string{"k"}, Limit: 5, Window: time.Minute, MinGap: time.Second},
		{Name: "bucket", By: []string{"k"}, Limit: 100, Window: time.Hour, Algorithm: sluice.GCRA, Burst: 10},
		{Name: "spread", By: []string{"k"}, Limit: 8, Window: time.Minute, Spread: 4},
	}}
	ov.set("mix|log|a", sluice.Override{Limit: 7, Window: 2 * time.Minute})
	ov.set("mix|bucket|a", sluice.Override{Limit: 200, Burst: 20})
	ov.set("mix|spread|a", sluice.Override{Limit: 40})
	req, err := lim.Resolve(p, map[string]string{"k": "a"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	got := req.Checks
	if c := got[0]; c.Limit != 7 || c.Window != 2*time.Minute || c.MinGap != time.Second {
		t.Errorf("log check %+v, want limit 7 per 2m, the rule's 1s gap", c)
	}
	if c := got[1]; c.Limit != 200 || c.Burst != 20 || c.Window != time.Hour {
		t.Errorf("gcra check %+v, want 200 per 1h, burst 20", c)
	}
	if c := got[2]; c.Limit != 10 || c.Parts != 4 {
		t.Errorf("spread check %+v, want a quarter of 40 in one of 4 sub-windows", c)
	}
	// The package-level Resolve knows no Limiter: the file's figures.
	plain, err := resolve.Request(p, map[string]string{"k": "a"}, 1)
	if err != nil || plain.Checks[0].Limit != 5 {
		t.Errorf("resolve.Request = %+v, %v; want the rule's limit 5", plain, err)
	}

	for _, tc := range []struct {
		rule string
		o    sluice.Override
		want string
	}{
		{"bucket", sluice.Override{Limit: 10, MinGap: time.Second}, "min gap needs the log algorithm"},
		{"bucket", sluice.Override{Limit: 1 << 40, Window: time.Second}, "more than one event per µs"},
		{"spread", sluice.Override{Limit: 3}, "spread over 4 sub-windows"},
		{"log", sluice.Override{Limit: -1}, "negative"},
		{"log", sluice.Override{Unlimited: true}, "unlimited is for a rule's overrides"},
	} {
		ov.set("mix|"+tc.rule+"|b", tc.o)
		_, err := lim.AllowN(context.Background(), p, map[string]string{"k": "b"}, 1)
		if !errors.Is(err, sluice.ErrInvalidPolicy) || !strings.Contains(err.Error(), "runtime override of rule \""+tc.rule+"\"") ||
			!strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s override %+v: %v, want ErrInvalidPolicy saying %q", tc.rule, tc.o, err, tc.want)
		}
		ov.del("mix|" + tc.rule + "|b")
	}
	// A cost over the overridden limit is the usual error.
	ov.set("mix|log|c", sluice.Override{Limit: 1})
	if _, err := lim.AllowN(context.Background(), p, map[string]string{"k": "c"}, 2); !errors.Is(err, sluice.ErrCostExceedsLimit) {
		t.Errorf("cost 2 over an override of 1: %v, want ErrCostExceedsLimit", err)
	}
}

// TestRuntimeOverrideMissingAttribute: a rule keyed by a missing attribute
// is bad input whatever the overrides, and the Overrides are not asked;
// a rule that a file override exempts is left out as before.
func TestRuntimeOverrideMissingAttribute(t *testing.T) {
	t.Parallel()
	ov := &overrideMap{}
	lim := sluice.NewLimiter(memstore.New(memstore.Config{}), sluice.Config{Overrides: ov})
	var missing *sluice.MissingAttributeError
	if _, err := lim.AllowN(context.Background(), plans(), map[string]string{"plan": "paid"}, 1); !errors.As(err, &missing) || missing.Attribute != "user" {
		t.Errorf("no user: %v, want a missing attribute user", err)
	}
	d, err := lim.AllowN(context.Background(), plans(), map[string]string{"plan": "internal"}, 1)
	if err != nil || !d.Unlimited {
		t.Errorf("internal without a user: %+v, %v; want unlimited by the file override", d, err)
	}
	if ov.ask != 0 {
		t.Errorf("the overrides were asked %d times for requests without the rule's values", ov.ask)
	}
}

// TestRuntimeOverrideDenyCache: a cached denial is keyed by the figures
// after the override, so an override that raises the limit is decided by
// the store at once; the hook hears of every cached answer with the
// request's windows and the cached statuses.
func TestRuntimeOverrideDenyCache(t *testing.T) {
	t.Parallel()
	ov := &overrideMap{}
	clock := storetest.NewClock(t0)
	var hits []store.Request
	cfg := sluice.Config{Clock: clock, Overrides: ov}
	hooks.Set(&cfg, hooks.Hooks{OnCacheHit: func(req *store.Request) {
		c := *req
		c.Checks, c.Results = slices.Clone(req.Checks), slices.Clone(req.Results)
		for i := range c.Checks {
			c.Checks[i].Values = slices.Clone(c.Checks[i].Values)
		}
		hits = append(hits, c)
	}})
	lim := sluice.NewLimiter(memstore.New(memstore.Config{Clock: clock.Now}), cfg)
	p := cached("flood", 1, time.Minute, "ip")
	ip := map[string]string{"ip": "203.0.113.7"}
	allow := func() sluice.Decision {
		t.Helper()
		d, err := lim.Allow(context.Background(), p, ip)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	allow()
	for i := range 3 {
		if d := allow(); d.Allowed || d.Cached != (i > 0) {
			t.Fatalf("request %d: %+v, want denied, cached after the first denial", i+2, d)
		}
	}
	if len(hits) != 2 {
		t.Fatalf("OnCacheHit heard %d requests, want 2", len(hits))
	}
	h := hits[1]
	if h.Policy != "flood" || len(h.Checks) != 1 || !slices.Equal(h.Checks[0].Values, []string{"203.0.113.7"}) ||
		len(h.Results) != 1 || h.Results[0].Fits || h.Results[0].Cause != store.CauseLimit || h.Results[0].Used != 1 ||
		h.Results[0].RetryAfter != time.Minute {
		t.Errorf("cache hit %+v, want the ip's window, not fitting for its limit, used 1, retry in 1m", h)
	}
	ov.set("flood|r|203.0.113.7", sluice.Override{Limit: 5})
	if d := allow(); !d.Allowed || d.Cached || d.Limits()[0].Limit != 5 {
		t.Errorf("after raising the limit: %+v, want admitted by the store under 5", d)
	}
}
