package sluice

import (
	"errors"
	"slices"
	"testing"
	"time"
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
		{"zero limit", &Policy{Name: "p", Rules: []Rule{{Name: "r", Window: time.Second}}}, ErrInvalidPolicy},
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
	d := NewDecision([]LimitStatus{
		{Rule: "global", Remaining: 7, Fits: true, ResetAfter: 50 * time.Second},
		{Rule: "category", Remaining: 0, RetryAfter: 30 * time.Second, ResetAfter: 60 * time.Second},
		{Rule: "gap", Remaining: 3, RetryAfter: 40 * time.Second, ResetAfter: 10 * time.Second},
	})
	if d.Allowed || d.Remaining != 0 || d.RetryAfter != 40*time.Second || d.ResetAfter != time.Minute || d.DeniedBy != "category" {
		want := "denied by category, remaining 0, retry 40s, reset 1m"
		t.Fatalf("NewDecision = %+v, want %s", d, want)
	}
	d = NewDecision([]LimitStatus{{Rule: "a", Remaining: 5, Fits: true}, {Rule: "b", Remaining: 2, Fits: true}})
	if !d.Allowed || d.Remaining != 2 || d.RetryAfter != 0 || d.DeniedBy != "" {
		t.Fatalf("all fit: %+v", d)
	}
}

func TestRequestValidate(t *testing.T) {
	t.Parallel()
	p := &Policy{Name: "p", Rules: []Rule{{Name: "r", Limit: 3, Window: time.Second, By: []string{"user"}}}}
	tests := []struct {
		name string
		req  Request
		want error
	}{
		{"valid", Request{Policy: p, Attributes: map[string]string{"user": "u"}, Cost: 3}, nil},
		{"cost 0", Request{Policy: p, Attributes: map[string]string{"user": "u"}}, ErrInvalidCost},
		{"cost over limit", Request{Policy: p, Attributes: map[string]string{"user": "u"}, Cost: 4}, ErrCostExceedsLimit},
		{"missing attribute", Request{Policy: p, Cost: 1}, ErrMissingAttribute},
		{"empty value is present", Request{Policy: p, Attributes: map[string]string{"user": ""}, Cost: 1}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.req.Validate()
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("Validate() = %v, want %v", err, tt.want)
			}
		})
	}
}
