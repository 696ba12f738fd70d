package sluice

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicerate/sluice/store"
)

func TestConcurrencyRuleValidate(t *testing.T) {
	t.Parallel()
	conc := func(r Rule) *Policy {
		r.Name = "c"
		return &Policy{Name: "p", Rules: []Rule{r}}
	}
	tests := []struct {
		name   string
		policy *Policy
		want   string // "" for valid
	}{
		{"valid", conc(Rule{Concurrency: 4, Lease: time.Minute}), ""},
		{"with by and override", conc(Rule{Concurrency: 4, Lease: time.Minute, By: []string{"user"},
			Overrides: []Override{{Match: map[string]string{"plan": "paid"}, Limit: 8}}}), ""},
		{"negative", conc(Rule{Concurrency: -1, Lease: time.Minute}), "is negative"},
		{"no lease", conc(Rule{Concurrency: 4}), "without a lease"},
		{"lease alone", conc(Rule{Lease: time.Minute, Limit: 1, Window: time.Second}), "without a concurrency"},
		{"short lease", conc(Rule{Concurrency: 4, Lease: time.Microsecond}), "shorter than 1ms"},
		{"with a limit", conc(Rule{Concurrency: 4, Lease: time.Minute, Limit: 10, Window: time.Second}), "takes no limit or window"},
		{"with gcra", conc(Rule{Concurrency: 4, Lease: time.Minute, Algorithm: GCRA}), "no min gap, algorithm or burst"},
		{"spread", conc(Rule{Concurrency: 4, Lease: time.Minute, Spread: 2}), "cannot be spread"},
		{"attribute twice", conc(Rule{Concurrency: 4, Lease: time.Minute, By: []string{"a", "a"}}), "twice"},
		{"two leases", &Policy{Name: "p", Rules: []Rule{
			{Name: "a", Concurrency: 1, Lease: time.Minute},
			{Name: "b", Concurrency: 1, Lease: time.Second},
		}}, "share one lease"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.policy.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tt.want != "" && (!errors.Is(err, ErrInvalidPolicy) || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate() = %v, want ErrInvalidPolicy saying %q", err, tt.want)
			}
		})
	}
}

func TestResolveConcurrency(t *testing.T) {
	t.Parallel()
	p := &Policy{Name: "llm", Rules: []Rule{
		{Name: "tokens", By: []string{"user"}, Limit: 100_000, Window: time.Minute},
		{Name: "in-flight", By: []string{"user"}, Concurrency: 4, Lease: 30 * time.Second,
			Overrides: []Override{{Match: map[string]string{"plan": "paid"}, Limit: 16}}},
	}}
	req, err := new(Limiter).Resolve(p, map[string]string{"user": "ann", "plan": "paid"}, 2_000)
	if err != nil {
		t.Fatal(err)
	}
	got := req.Checks[1]
	want := store.Check{Rule: "in-flight", Values: []string{"ann"}, Limit: 16, Window: 30 * time.Second, Algorithm: store.Concurrency, Cost: 1}
	if got.Rule != want.Rule || !slices.Equal(got.Values, want.Values) || got.Limit != want.Limit || got.Window != want.Window ||
		got.Algorithm != want.Algorithm || got.Cost != want.Cost {
		t.Errorf("concurrency check %+v, want %+v", got, want)
	}
	if req.Checks[0].Cost != 2_000 {
		t.Errorf("rate check cost %d, want 2000", req.Checks[0].Cost)
	}
	if ttl := leaseTTL(req.Checks); ttl != 30*time.Second {
		t.Errorf("lease TTL %v, want 30s", ttl)
	}
	if ttl := leaseTTL(req.Checks[:1]); ttl != time.Minute {
		t.Errorf("lease TTL without a concurrency rule %v, want the window, 1m", ttl)
	}
}

func TestLeaseID(t *testing.T) {
	t.Parallel()
	checks := []store.Check{{Rule: "tokens", Values: []string{"ann:{x}"}}, {Rule: "global"}}
	a, b := newLeaseID(leaseIDVersion, "llm", checks), newLeaseID(leaseIDVersion, "llm", checks)
	if a == b {
		t.Fatalf("two ids alike: %q", a)
	}
	fallback, policy, windows, err := parseLeaseID(a)
	if err != nil {
		t.Fatal(err)
	}
	if fb, p2, _, err := parseLeaseID(newLeaseID(leaseIDFallback, "llm", checks)); err != nil || !fb || p2 != "llm" {
		t.Errorf("a fallback lease's id parsed as fallback %v, policy %q, %v", fb, p2, err)
	}
	if fallback || policy != "llm" || len(windows) != 2 || windows[0].rule != "tokens" || !slices.Equal(windows[0].values, []string{"ann:{x}"}) ||
		windows[1].rule != "global" || len(windows[1].values) != 0 {
		t.Errorf("parsed %q %+v", policy, windows)
	}
	for _, bad := range []string{"", "!!", a[:10], a + "A", a + "AA"} {
		if _, _, _, err := parseLeaseID(bad); !errors.Is(err, ErrInvalidLease) {
			t.Errorf("parseLeaseID(%q) = %v, want ErrInvalidLease", bad, err)
		}
	}
}

// FuzzLeaseID checks that any string either parses into what an id names,
// which then encodes back to the same windows, or is an ErrInvalidLease,
// and never panics.
func FuzzLeaseID(f *testing.F) {
	f.Add(newLeaseID(leaseIDVersion, "llm", []store.Check{{Rule: "tokens", Values: []string{"ann"}}}))
	f.Add(newLeaseID(leaseIDVersion, "p", []store.Check{{Rule: "r"}, {Rule: "s", Values: []string{"", "b"}}}))
	f.Add(newLeaseID(leaseIDFallback, "llm", []store.Check{{Rule: "tokens", Values: []string{"ann"}}}))
	f.Add("AQ")
	f.Fuzz(func(t *testing.T, id string) {
		fallback, policy, windows, err := parseLeaseID(id)
		if err != nil {
			if !errors.Is(err, ErrInvalidLease) {
				t.Fatalf("parseLeaseID(%q) = %v, not ErrInvalidLease", id, err)
			}
			return
		}
		checks := make([]store.Check, len(windows))
		for i, w := range windows {
			checks[i] = store.Check{Rule: w.rule, Values: w.values}
		}
		version := byte(leaseIDVersion)
		if fallback {
			version = leaseIDFallback
		}
		fb2, p2, w2, err := parseLeaseID(newLeaseID(version, policy, checks))
		if err != nil || fb2 != fallback || p2 != policy || len(w2) != len(windows) {
			t.Fatalf("round trip of %q: %q %v %v", id, p2, w2, err)
		}
		for i := range w2 {
			if w2[i].rule != windows[i].rule || !slices.Equal(w2[i].values, windows[i].values) {
				t.Fatalf("round trip of %q: window %d %+v, want %+v", id, i, w2[i], windows[i])
			}
		}
	})
}

// TestResumeLeaseShared checks that a lease resumed from its id names the
// windows its acquire did: the same checks and shared values, in the
// order of the policy's first rule even when that rule did not apply.
func TestResumeLeaseShared(t *testing.T) {
	t.Parallel()
	p := &Policy{Name: "p", Rules: []Rule{
		{Name: "paid", By: []string{"tenant", "user"}, Limit: 10, Window: time.Minute, Match: map[string]string{"plan": "paid"}},
		{Name: "in-flight", By: []string{"user", "tenant"}, Concurrency: 2, Lease: time.Minute},
	}}
	attrs := map[string]string{"tenant": "t1", "user": "ann", "plan": "free"}
	req, err := new(Limiter).Resolve(p, attrs, 1)
	if err != nil {
		t.Fatal(err)
	}
	l := NewLimiter(nil, Config{})
	x, err := l.ResumeLease(p, newLeaseID(leaseIDVersion, p.Name, req.Checks))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(x.finish.Shared, req.Shared) || len(x.finish.Checks) != 1 || !slices.Equal(x.finish.Checks[0].Values, req.Checks[0].Values) ||
		x.finish.Checks[0].Algorithm != store.Concurrency || x.finish.Checks[0].Window != time.Minute {
		t.Errorf("resumed %+v, want shared %q and the check %+v", x.finish, req.Shared, req.Checks[0])
	}
}

// oneOverride overrides one rule's windows with o.
type oneOverride struct {
	rule string
	o    Override
}

func (v oneOverride) Override(_, rule string, _ []string) (Override, bool) {
	return v.o, rule == v.rule
}

// TestResolveConcurrencyOverride checks a runtime override of a
// concurrency rule: its limit is the leases alive, its window the lease
// time; a min gap or a burst is refused.
func TestResolveConcurrencyOverride(t *testing.T) {
	t.Parallel()
	p := &Policy{Name: "p", Rules: []Rule{{Name: "in-flight", By: []string{"user"}, Concurrency: 4, Lease: time.Minute}}}
	attrs := map[string]string{"user": "ann"}
	cp := mustCompile(t, p)
	var s scratch
	if err := s.resolve(cp, attrs, 1, oneOverride{"in-flight", Override{Limit: 1}}); err != nil {
		t.Fatal(err)
	}
	if c := s.req.Checks[0]; c.Limit != 1 || c.Window != time.Minute || c.Algorithm != store.Concurrency || c.Cost != 1 {
		t.Errorf("overridden check %+v, want limit 1, window 1m (the lease)", c)
	}
	if err := s.resolve(cp, attrs, 1, oneOverride{"in-flight", Override{Limit: 2, Window: time.Second}}); err != nil || s.req.Checks[0].Window != time.Second {
		t.Errorf("an override's window: %v, %+v; want the lease time 1s", err, s.req.Checks)
	}
	if err := s.resolve(cp, attrs, 1, oneOverride{"in-flight", Override{Limit: 2, MinGap: time.Second}}); !errors.Is(err, ErrInvalidPolicy) {
		t.Errorf("an override's min gap on a concurrency rule: %v, want ErrInvalidPolicy", err)
	}
}

// TestDecideOnConcurrencyRule: Allow and Record on a policy with a
// concurrency rule are refused before any store call, with an error that
// wraps ErrInvalidPolicy, names Acquire, and gives fronts the policy and
// rule (LeaseOnly) to name their own way to take a lease.
func TestDecideOnConcurrencyRule(t *testing.T) {
	t.Parallel()
	l := NewLimiter(nil, Config{})
	p := &Policy{Name: "llm", Rules: []Rule{{Name: "in-flight", By: []string{"user"}, Concurrency: 2, Lease: time.Minute}}}
	attrs := map[string]string{"user": "ann"}
	for name, call := range map[string]func() error{
		"Allow":  func() error { _, err := l.AllowN(t.Context(), p, attrs, 1); return err },
		"Record": func() error { _, err := l.Record(t.Context(), p, attrs, 1); return err },
	} {
		err := call()
		var lo interface{ LeaseOnly() (string, string) }
		if !errors.Is(err, ErrInvalidPolicy) || !strings.Contains(err.Error(), "Limiter.Acquire") || !errors.As(err, &lo) {
			t.Fatalf("%s: %v, want ErrInvalidPolicy naming Limiter.Acquire, with LeaseOnly", name, err)
		}
		if policy, rule := lo.LeaseOnly(); policy != "llm" || rule != "in-flight" {
			t.Errorf("%s: LeaseOnly() = %q, %q, want llm, in-flight", name, policy, rule)
		}
	}
}
