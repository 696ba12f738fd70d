package sluice

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluicerate/sluice/store"
)

// localStore decides every check as fitting unless its limit is 0: enough
// to tell which figures a Limiter sent. It is a store.Local.
type localStore struct {
	store.Store
	last store.Request
}

func (*localStore) Local() {}

func (s *localStore) Decide(_ context.Context, req *store.Request) error {
	res := req.ResultsBuffer()
	for i := range req.Checks {
		fits := req.Checks[i].Limit > 0
		res[i] = store.Result{Fits: fits, Remaining: req.Checks[i].Limit}
		if !fits {
			res[i].Cause, res[i].RetryAfter = store.CauseLimit, time.Second
		}
	}
	s.last = *req
	s.last.Checks = append([]store.Check(nil), req.Checks...)
	for i := range s.last.Checks {
		s.last.Checks[i].Values = append([]string(nil), req.Checks[i].Values...)
	}
	return nil
}

// TestPolicyFrozenAfterFirstUse checks that a policy is frozen by its
// first use: a change made to it later (its limit, an attribute in place)
// has no effect on any Limiter, a copy of it is a new policy, and a policy
// that failed validation is not frozen and may be fixed.
func TestPolicyFrozenAfterFirstUse(t *testing.T) {
	t.Parallel()
	st := &localStore{}
	lim, other := NewLimiter(st, Config{}), NewLimiter(st, Config{})
	p := &Policy{Name: "p", Rules: []Rule{{Name: "per-user", Limit: 5, Window: time.Minute, By: []string{"user"}}}}
	ctx := context.Background()
	attrs := map[string]string{"user": "ann", "team": "blue"}
	allow := func(lim *Limiter, p *Policy, want bool, wantLimit int64, wantValue string) {
		t.Helper()
		d, err := lim.Allow(ctx, p, attrs)
		if err != nil {
			t.Fatal(err)
		}
		c := st.last.Checks[0]
		if d.Allowed != want || c.Limit != wantLimit || c.Values[0] != wantValue {
			t.Fatalf("allowed %v with limit %d on %q, want %v with %d on %q", d.Allowed, c.Limit, c.Values[0], want, wantLimit, wantValue)
		}
	}
	allow(lim, p, true, 5, "ann")
	p.Rules[0].Limit = 0
	p.Rules[0].By[0] = "team" // in place: the same slice
	allow(lim, p, true, 5, "ann")
	allow(other, p, true, 5, "ann") // frozen for every Limiter
	p.Rules[0].Window = 0
	allow(lim, p, true, 5, "ann")

	q := *p // a copy is a new policy, frozen as it stands at its first use
	q.Rules = []Rule{{Name: "per-team", Limit: 0, Window: time.Minute, By: []string{"team"}}}
	allow(lim, &q, false, 0, "blue")
	allow(lim, p, true, 5, "ann")

	bad := &Policy{Name: "bad", Rules: []Rule{{Name: "r", Limit: 7, By: []string{"user"}}}}
	if _, err := lim.Allow(ctx, bad, attrs); !errors.Is(err, ErrInvalidPolicy) {
		t.Fatalf("a policy with no window: %v, want ErrInvalidPolicy", err)
	}
	bad.Rules[0].Window = time.Minute
	allow(lim, bad, true, 7, "ann")
}

// TestPolicyPerCall checks that policies built anew for each call are
// each decided with their own figures.
func TestPolicyPerCall(t *testing.T) {
	t.Parallel()
	st := &localStore{}
	lim := NewLimiter(st, Config{})
	for i := range 768 {
		p := &Policy{Name: fmt.Sprint("p", i), Rules: []Rule{{Name: "r", Limit: int64(i + 1), Window: time.Minute}}}
		if _, err := lim.Allow(context.Background(), p, nil); err != nil {
			t.Fatal(err)
		}
		if got := st.last; got.Policy != p.Name || got.Checks[0].Limit != int64(i+1) {
			t.Fatalf("policy %d decided as %q with limit %d", i, got.Policy, got.Checks[0].Limit)
		}
	}
}

// TestPolicyFrozenEveryField checks that a change to any field of a used
// policy, of one of its rules or of a rule's override changes nothing of
// the policy as compiled: no slice or map is shared with it, and a field
// added later is copied too.
func TestPolicyFrozenEveryField(t *testing.T) {
	t.Parallel()
	base := func() *Policy {
		return &Policy{Name: "p", Rules: []Rule{{Name: "r", Limit: 1, Window: time.Second, By: []string{"a"},
			Unless: []string{"b"}, Match: map[string]string{"c": "d"},
			Overrides: []Override{{Match: map[string]string{"e": "f"}, Limit: 2}}}}}
	}
	var change func(v reflect.Value)
	change = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.String:
			v.SetString(v.String() + "x")
		case reflect.Bool:
			v.SetBool(!v.Bool())
		case reflect.Int, reflect.Int64, reflect.Uint8:
			if v.CanInt() {
				v.SetInt(v.Int() + 1)
			} else {
				v.SetUint(v.Uint() + 1)
			}
		case reflect.Slice:
			if v.Type().Elem().Kind() == reflect.String {
				v.Index(0).SetString("changed")
				return
			}
			v.Set(v.Slice(0, 0))
		case reflect.Map:
			v.SetMapIndex(reflect.ValueOf("c"), reflect.ValueOf("changed"))
			v.SetMapIndex(reflect.ValueOf("e"), reflect.ValueOf("changed"))
		case reflect.Pointer:
			if v.Type() != reflect.TypeFor[*time.Location]() {
				t.Fatalf("a pointer field of type %v: teach this test to change it", v.Type())
			}
			v.Set(reflect.ValueOf(time.FixedZone("changed", 3600)))
		case reflect.Struct:
			for i := range v.NumField() {
				change(v.Field(i))
			}
		default:
			t.Fatalf("a field of kind %v: teach this test to change it", v.Kind())
		}
	}
	check := func(what string, field func(p *Policy) reflect.Value, n int) {
		for i := range n {
			if !field(base()).Type().Field(i).IsExported() {
				continue
			}
			p := base()
			cp, err := p.compiled()
			if err != nil {
				t.Fatal(err)
			}
			want := copyPolicy(base())
			change(field(p).Field(i))
			if again, err := p.compiled(); err != nil || again != cp || !reflect.DeepEqual(cp.snap, want) {
				t.Errorf("%s field %s changed after the first use, and the compiled policy changed too (%v)", what, field(p).Type().Field(i).Name, err)
			}
		}
	}
	check("Policy", func(p *Policy) reflect.Value { return reflect.ValueOf(p).Elem() }, reflect.TypeFor[Policy]().NumField())
	check("Rule", func(p *Policy) reflect.Value { return reflect.ValueOf(&p.Rules[0]).Elem() }, reflect.TypeFor[Rule]().NumField())
	check("Override", func(p *Policy) reflect.Value { return reflect.ValueOf(&p.Rules[0].Overrides[0]).Elem() }, reflect.TypeFor[Override]().NumField())
	if p := base(); !reflect.DeepEqual(copyPolicy(p), *p) {
		t.Error("a policy and its copy differ")
	}
}

// TestPolicyFrozenConcurrent decides, from many goroutines at once, with
// policies kept and policies built for each call, each kept one used
// first by several goroutines at once: each decision has its policy's own
// figures (run with -race).
func TestPolicyFrozenConcurrent(t *testing.T) {
	t.Parallel()
	lim := NewLimiter(&limitStore{}, Config{})
	kept := make([]*Policy, 8)
	for i := range kept {
		kept[i] = &Policy{Name: fmt.Sprint("kept", i), Rules: []Rule{{Name: "r", Limit: int64(i + 1), Window: time.Minute}}}
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 512 {
				p := kept[(g+i)%len(kept)]
				if i%2 == 1 {
					p = &Policy{Name: fmt.Sprint("new", g, "-", i), Rules: []Rule{{Name: "r", Limit: int64(1000 + i), Window: time.Minute}}}
				}
				d, err := lim.Allow(context.Background(), p, nil)
				if err != nil {
					t.Error(err)
					return
				}
				if d.Limits()[0].Limit != p.Rules[0].Limit {
					t.Errorf("policy %s decided with limit %d, want %d", p.Name, d.Limits()[0].Limit, p.Rules[0].Limit)
					return
				}
			}
		})
	}
	wg.Wait()
}

// limitStore admits every request and reports each check's limit: a
// store.Local safe for concurrent use.
type limitStore struct{ store.Store }

func (*limitStore) Local() {}

func (*limitStore) Decide(_ context.Context, req *store.Request) error {
	res := req.ResultsBuffer()
	for i := range req.Checks {
		res[i] = store.Result{Fits: true, Remaining: req.Checks[i].Limit}
	}
	return nil
}

// TestResolvePlain checks that the checks resolve copies from a compiled
// policy's plain rules are the ones its general road builds: the same
// request, or the same error, for every algorithm, missing attributes and
// costs over a limit or a burst, recorded or not.
func TestResolvePlain(t *testing.T) {
	t.Parallel()
	policies := []*Policy{
		{Name: "log", Rules: []Rule{{Name: "per-user", Limit: 5, Window: time.Minute, MinGap: time.Second, By: []string{"user"}}}},
		{Name: "gcra", Rules: []Rule{{Name: "per-user", Limit: 10, Window: time.Minute, Algorithm: GCRA, Burst: 3, By: []string{"user", "ip"}}}},
		{Name: "counter", Rules: []Rule{{Name: "global", Limit: 8, Window: time.Minute, Algorithm: SlidingCounter, Shadow: true}}},
		{Name: "blocked", Rules: []Rule{{Name: "none", Limit: 0, Window: time.Minute, By: []string{"user"}}}},
		{Name: "mixed", Rules: []Rule{
			{Name: "global", Limit: 100, Window: time.Hour},
			{Name: "per-ip", Limit: 4, Window: time.Minute, By: []string{"ip"}, Unless: []string{"user"}},
			{Name: "per-user", Limit: 6, Window: time.Minute, By: []string{"user"},
				Overrides: []Override{{Match: map[string]string{"plan": "paid"}, Limit: 60}}},
			{Name: "spread", Limit: 40, Window: time.Minute, By: []string{"ip"}, Spread: 4, SpreadBy: "ip"},
			{Name: "tail", Limit: 7, Window: time.Minute, By: []string{"ip"}},
		}},
	}
	attrSets := []map[string]string{
		{"user": "ann", "ip": "10.0.0.1"},
		{"user": "ann", "ip": "10.0.0.1", "plan": "paid"},
		{"ip": "10.0.0.2"},
		{"user": "bob"},
		{},
	}
	for _, p := range policies {
		cp, err := compile(p)
		if err != nil {
			t.Fatal(err)
		}
		general := *cp
		general.plain = make([]store.Check, len(p.Rules)) // none: every rule by the general road
		if !slices.ContainsFunc(cp.plain, func(c store.Check) bool { return c.Rule != "" }) {
			t.Fatalf("policy %q: no plain rule compiled", p.Name)
		}
		for _, attrs := range attrSets {
			for _, cost := range []int64{1, 3, 5, 6, 9} {
				for _, record := range []bool{false, true} {
					var a, b scratch
					a.record, b.record = record, record
					errA, errB := a.resolve(cp, attrs, cost, nil), b.resolve(&general, attrs, cost, nil)
					if fmt.Sprint(errA) != fmt.Sprint(errB) {
						t.Errorf("policy %q, %v, cost %d, record %v: error %v, general road %v", p.Name, attrs, cost, record, errA, errB)
						continue
					}
					if errA == nil && !reflect.DeepEqual(a.req, b.req) {
						t.Errorf("policy %q, %v, cost %d, record %v: request %+v, general road %+v", p.Name, attrs, cost, record, a.req, b.req)
					}
				}
			}
		}
	}
}
