package redisstore

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
)

func TestRuleKeysGroups(t *testing.T) {
	p := &sluice.Policy{Name: "tiers", Rules: []sluice.Rule{
		{Name: "global", Limit: 4, Window: time.Minute},
		{Name: "tenant", Limit: 3, Window: time.Minute, By: []string{"tenant"}},
		{Name: "user", Limit: 2, Window: time.Minute, By: []string{"tenant", "user"}},
		{Name: "user-hour", Limit: 9, Window: time.Hour, By: []string{"tenant", "user"}},
		{Name: "org", Limit: 9, Window: time.Hour, By: []string{"org"}},
	}}
	l := namer{prefix: "s", perRule: true, layout: Layout2}.plan(policyRequest(p, map[string]string{"tenant": "t{1}", "user": "u:2", "org": "t{1}"}))
	wantKeys := []string{
		"s:{tiers}2l:global",
		"s:{tiers,t%7B1%7D}2l:tenant",
		"s:{tiers,t%7B1%7D,u%3A2}2l:user",
		"s:{tiers,t%7B1%7D,u%3A2}2l:user-hour",
		"s:{tiers,t%7B1%7D}2l:org",
	}
	if !reflect.DeepEqual(l.keys, wantKeys) {
		t.Errorf("keys:\n got %q\nwant %q", l.keys, wantKeys)
	}
	// Most attributes first, ties in policy order; equal tags (tenant and
	// org have the same value) are one group.
	var groups [][]int
	for _, g := range l.groups {
		groups = append(groups, g.checks)
		for k, i := range g.checks {
			if g.keys[k] != l.keys[i] {
				t.Errorf("group %v holds key %q for rule %d, want %q", g.checks, g.keys[k], i, l.keys[i])
			}
		}
	}
	if want := [][]int{{2, 3}, {1, 4}, {0}}; !reflect.DeepEqual(groups, want) {
		t.Errorf("groups %v, want %v", groups, want)
	}
}

// FuzzRuleKeys checks that no attribute value can add hash-tag structure
// or make a key long: every key has one '{' and one '}', and its tag holds
// the policy and the rule's values only.
func FuzzRuleKeys(f *testing.F) {
	f.Add("alice", "t1")
	f.Add("}{:,", "{x}")
	f.Add(strings.Repeat("ü", 100), "")
	p := &sluice.Policy{Name: "p", Rules: []sluice.Rule{
		{Name: "global", Limit: 1, Window: time.Second},
		{Name: "user", Limit: 1, Window: time.Second, By: []string{"tenant", "user"}},
	}}
	// The longest key: the user rule's, whose two values (at most
	// maxPartLen encoded bytes each, joined by ',') stand in the tag and
	// after the rule's name.
	maxLen := len("s:{p,}2l:user") + 2*maxPartLen + 1
	f.Fuzz(func(t *testing.T, user, tenant string) {
		l := namer{prefix: "s", perRule: true, layout: Layout2}.plan(policyRequest(p, map[string]string{"user": user, "tenant": tenant}))
		for _, k := range l.keys {
			if strings.Count(k, "{") != 1 || strings.Count(k, "}") != 1 || len(k) > maxLen {
				t.Fatalf("key %q", k)
			}
			tag := k[strings.Index(k, "{")+1 : strings.Index(k, "}")]
			if n := strings.Count(tag, ","); n != 0 && n != 2 {
				t.Fatalf("key %q: tag %q", k, tag)
			}
		}
		if l.keys[0] != "s:{p}2l:global" || len(l.groups) != 2 {
			t.Fatalf("keys %q, groups %v", l.keys, l.groups)
		}
	})
}
