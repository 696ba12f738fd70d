package sluice

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicerate/sluice/store"
)

func TestPolicyValidate(t *testing.T) {
	t.Parallel()
	ok := Rule{Name: "r", Limit: 1, Window: time.Second}
	tests := []struct {
		name   string
		policy *Policy
		want   error
	}{
		{"valid", &Policy{Name: "p", Rules: []Rule{ok}}, nil},
		{"nil", nil, ErrInvalidPolicy},
		{"no name", &Policy{Rules: []Rule{ok}}, ErrInvalidPolicy},
		{"no rules", &Policy{Name: "p"}, ErrEmptyPolicy},
		{"rule without name", &Policy{Name: "p", Rules: []Rule{{Limit: 1, Window: time.Second}}}, ErrInvalidPolicy},
		{"zero limit blocks", &Policy{Name: "p", Rules: []Rule{{Name: "r", Window: time.Second}}}, nil},
		{"negative limit", &Policy{Name: "p", Rules: []Rule{{Name: "r", Limit: -1, Window: time.Second}}}, ErrInvalidPolicy},
		{"sub-µs window", &Policy{Name: "p", Rules: []Rule{{Name: "r", Limit: 1, Window: time.Nanosecond}}}, ErrInvalidPolicy},
		{"negative gap", &Policy{Name: "p", Rules: []Rule{{Name: "r", Limit: 1, Window: time.Second, MinGap: -1}}}, ErrInvalidPolicy},
		{"empty attribute", &Policy{Name: "p", Rules: []Rule{{Name: "r", Limit: 1, Window: time.Second, By: []string{""}}}}, ErrInvalidPolicy},
		{"attribute twice", &Policy{Name: "p", Rules: []Rule{{Name: "r", Limit: 1, Window: time.Second, By: []string{"a", "a"}}}}, ErrInvalidPolicy},
		{"duplicate rule", &Policy{Name: "p", Rules: []Rule{ok, ok}}, ErrInvalidPolicy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.policy.Validate()
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("Validate() = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestSharedAttributes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		rules [][]string
		want  []string
	}{
		{[][]string{nil, {"category"}}, nil},
		{[][]string{{"user"}}, []string{"user"}},
		{[][]string{{"tenant", "user"}, {"user", "tenant", "route"}}, []string{"tenant", "user"}},
		{[][]string{{"a"}, {"b"}}, nil},
	}
	for _, tt := range tests {
		p := &Policy{Name: "p"}
		for i, by := range tt.rules {
			p.Rules = append(p.Rules, Rule{Name: string(rune('a' + i)), Limit: 1, Window: time.Second, By: by})
		}
		if got := p.SharedAttributes(); !slices.Equal(got, tt.want) {
			t.Errorf("SharedAttributes(%v) = %v, want %v", tt.rules, got, tt.want)
		}
	}
}

func TestNewDecision(t *testing.T) {
	t.Parallel()
	req := &store.Request{Policy: "p", Checks: []store.Check{
		{Rule: "global", Limit: 10}, {Rule: "category", Limit: 3}, {Rule: "gap", Limit: 5},
	}, Results: []store.Result{
		{Fits: true, Used: 3, Remaining: 7, ResetAfter: 50 * time.Second},
		{Cause: store.CauseLimit, Used: 3, Remaining: 0, RetryAfter: 30 * time.Second, ResetAfter: 60 * time.Second},
		{Cause: store.CauseGap, Used: 2, Remaining: 3, RetryAfter: 40 * time.Second, ResetAfter: 10 * time.Second},
	}}
	d := newDecision(req, nil)
	if d.Allowed || d.Remaining != 0 || d.RetryAfter != 40*time.Second || d.ResetAfter != time.Minute ||
		d.DeniedBy != "category" || d.Cause != CauseLimit || d.Limits()[2].Cause != CauseGap {
		want := "denied by category for its limit, remaining 0, retry 40s, reset 1m"
		t.Fatalf("newDecision = %+v, want %s", d, want)
	}
	req.Results = []store.Result{{Fits: true, Used: 5, Remaining: 5, RetryAfter: time.Second}, {Fits: true, Used: 1, Remaining: 2}, {Fits: true, Remaining: 5}}
	d = newDecision(req, nil)
	if !d.Allowed || d.Remaining != 2 || d.RetryAfter != 0 || d.Limits()[0].RetryAfter != 0 || d.DeniedBy != "" {
		t.Fatalf("all fit: %+v", d)
	}
	// A shadow rule that does not fit: admitted, shadowed, its wait kept.
	req.Checks[1].Shadow = true
	req.Results = []store.Result{{Fits: true}, {Cause: store.CauseLimit, Used: 3, RetryAfter: 9 * time.Second}, {Fits: true}}
	d = newDecision(req, nil)
	if !d.Allowed || !d.Shadowed || d.DeniedBy != "category" || d.RetryAfter != 9*time.Second || !d.Limits()[1].Shadow {
		t.Fatalf("shadow rule over its limit: %+v", d)
	}
	if d := newDecision(&store.Request{Policy: "p"}, nil); !d.Allowed || !d.Unlimited || len(d.Limits()) != 0 {
		t.Fatalf("no checks: %+v, want allowed with no limit", d)
	}
}

// TestResolve checks which rules apply to a request, with which limit.
func TestResolve(t *testing.T) {
	t.Parallel()
	api := &Policy{Name: "api", Rules: []Rule{
		{Name: "per-user", Limit: 100, Window: time.Minute, By: []string{"user"}, Optional: true,
			Overrides: []Override{
				{Match: map[string]string{"plan": "paid"}, Limit: 1000},
				{Match: map[string]string{"tenant": "acme"}, Unlimited: true},
				{Match: map[string]string{"user": "bot-*"}, Limit: 0},
			}},
		{Name: "per-ip", Limit: 20, Window: time.Minute, By: []string{"ip"}, Unless: []string{"user"}},
		{Name: "uploads", Limit: 5, Window: time.Minute, By: []string{"path"}, Match: map[string]string{"path": "/upload/*"}},
	}}
	tests := []struct {
		name  string
		attrs map[string]string
		cost  int64
		want  string // rule=limit of each check, in order
		err   error
	}{
		{"user", map[string]string{"user": "u1", "ip": "a"}, 1, "per-user=100", nil},
		{"no user: by IP", map[string]string{"ip": "a"}, 1, "per-ip=20", nil},
		{"paid plan", map[string]string{"user": "u1", "plan": "paid"}, 1, "per-user=1000", nil},
		{"free plan", map[string]string{"user": "u1", "plan": "free"}, 1, "per-user=100", nil},
		{"tenant exempt", map[string]string{"user": "u1", "tenant": "acme"}, 1, "", nil},
		{"first override wins", map[string]string{"user": "u1", "plan": "paid", "tenant": "acme"}, 1, "per-user=1000", nil},
		{"blocked value", map[string]string{"user": "bot-7"}, 1, "per-user=0", nil},
		{"upload path", map[string]string{"user": "u1", "path": "/upload/x"}, 1, "per-user=100 uploads=5", nil},
		{"other path", map[string]string{"user": "u1", "path": "/download/x"}, 1, "per-user=100", nil},
		{"no user, no IP", map[string]string{}, 1, "", ErrMissingAttribute},
		{"missing required attribute", map[string]string{"path": "/x"}, 1, "", ErrMissingAttribute},
		{"cost over a rule's limit", map[string]string{"user": "u1", "path": "/upload/x"}, 6, "", ErrCostExceedsLimit},
		{"cost over an override's", map[string]string{"user": "u1"}, 101, "", ErrCostExceedsLimit},
		{"a blocked rule takes any cost", map[string]string{"user": "bot-1"}, 500, "per-user=0", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := getScratch()
			defer putScratch(s)
			err := s.resolve(mustCompile(t, api), tt.attrs, tt.cost, nil)
			if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Fatalf("resolve = %v, want %v", err, tt.err)
			}
			if err != nil {
				return
			}
			var got []string
			for _, c := range s.req.Checks {
				got = append(got, fmt.Sprintf("%s=%d", c.Rule, c.Limit))
			}
			if strings.Join(got, " ") != tt.want {
				t.Errorf("checks %q, want %q", got, tt.want)
			}
		})
	}
}

func TestRuleValidate(t *testing.T) {
	t.Parallel()
	ok := Rule{Name: "r", Limit: 1, Window: time.Second, By: []string{"a"}}
	for _, tt := range []struct {
		name string
		edit func(r *Rule)
		want string
	}{
		{"valid", func(r *Rule) {}, ""},
		{"limit 0 blocks", func(r *Rule) { r.Limit = 0 }, ""},
		{"negative limit", func(r *Rule) { r.Limit = -1 }, "negative"},
		{"unless its own attribute", func(r *Rule) { r.Unless = []string{"a"} }, "never apply"},
		{"star inside a pattern", func(r *Rule) { r.Match = map[string]string{"p": "/a/*/b"} }, "before its end"},
		{"override without match", func(r *Rule) { r.Overrides = []Override{{Limit: 3}} }, "has no match"},
		{"override with a window", func(r *Rule) {
			r.Overrides = []Override{{Match: map[string]string{"plan": "paid"}, Limit: 3, Window: time.Hour}}
		}, "only a runtime override"},
		{"unlimited with a limit", func(r *Rule) {
			r.Overrides = []Override{{Match: map[string]string{"a": "x"}, Limit: 3, Unlimited: true}}
		}, "keep one"},
	} {
		r := ok
		tt.edit(&r)
		err := r.validate()
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ErrInvalidPolicy)) {
			t.Errorf("%s: validate() = %v, want %q", tt.name, err, tt.want)
		}
	}
}

// mustCompile returns p compiled, failing the test when p is invalid.
func mustCompile(t *testing.T, p *Policy) *compiled {
	t.Helper()
	cp, err := compile(p)
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

// TestCombineOne checks that a request of one check that is not shadow is
// combined as the general loop combines it, for every mode, cause and sign
// of the figures.
func TestCombineOne(t *testing.T) {
	t.Parallel()
	req := &store.Request{Policy: "p", Checks: []store.Check{{Rule: "r", Limit: 10, Window: time.Minute, Cost: 2}}}
	for _, fits := range []bool{true, false} {
		for _, cause := range []store.Cause{store.CauseNone, store.CauseLimit, store.CauseGap, store.CauseConcurrency} {
			for _, fig := range []time.Duration{-time.Second, 0, time.Microsecond, time.Minute} {
				req.Results = []store.Result{{Fits: fits, Cause: cause, Used: 7 + int64(fig), Remaining: int64(fig),
					RetryAfter: fig, ResetAfter: 2 * fig}}
				var one, all Decision
				one.combineOne(req, nil)
				all.combineAll(req, nil)
				if !reflect.DeepEqual(one, all) {
					t.Errorf("fits %v, cause %v, figure %v: combineOne = %+v, combineAll = %+v", fits, cause, fig, one, all)
				}
				var d Decision
				if d.combine(req, nil); !reflect.DeepEqual(d, all) {
					t.Errorf("fits %v, cause %v, figure %v: combine = %+v, combineAll = %+v", fits, cause, fig, d, all)
				}
			}
		}
	}
}
