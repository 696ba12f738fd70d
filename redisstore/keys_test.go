package redisstore

import (
	"strings"
	"testing"

	"github.com/sluicerate/sluice"
)

func TestKeys(t *testing.T) {
	long := strings.Repeat("x", 65)
	tests := []struct {
		name  string
		p     *sluice.Policy
		attrs map[string]string
		want  []string
	}{
		{
			name: "global and category share the policy's slot",
			p: &sluice.Policy{Name: "notify", Rules: []sluice.Rule{
				{Name: "global"}, {Name: "category", By: []string{"category"}},
			}},
			attrs: map[string]string{"category": "errors"},
			want:  []string{"sluice:{notify}:notify:global", "sluice:{notify}:notify:category:errors"},
		},
		{
			name: "shared attributes join the hash tag",
			p: &sluice.Policy{Name: "push", Rules: []sluice.Rule{
				{Name: "per-user", By: []string{"user"}}, {Name: "per-pair", By: []string{"device", "user"}},
			}},
			attrs: map[string]string{"user": "u1", "device": "d9"},
			want:  []string{"sluice:{push,u1}:push:per-user:u1", "sluice:{push,u1}:push:per-pair:d9,u1"},
		},
		{
			name:  "structure characters are encoded",
			p:     &sluice.Policy{Name: "a:b", Rules: []sluice.Rule{{Name: "{r}", By: []string{"v"}}}},
			attrs: map[string]string{"v": "x}:{y,z%"},
			want:  []string{"sluice:{a%3Ab,x%7D%3A%7By%2Cz%25}:a%3Ab:%7Br%7D:x%7D%3A%7By%2Cz%25"},
		},
		{
			name:  "unicode and empty values",
			p:     &sluice.Policy{Name: "p", Rules: []sluice.Rule{{Name: "r", By: []string{"a", "b"}}}},
			attrs: map[string]string{"a": "ü", "b": ""},
			want:  []string{"sluice:{p,%C3%BC,}:p:r:%C3%BC,"},
		},
		{
			name:  "long values are hashed",
			p:     &sluice.Policy{Name: "p", Rules: []sluice.Rule{{Name: "r", By: []string{"a"}}}},
			attrs: map[string]string{"a": long},
			want:  []string{"sluice:{p,#9537c5fdf120482f7d58d25e9ed583f5}:p:r:#9537c5fdf120482f7d58d25e9ed583f5"},
		},
		{
			name:  "64 plain bytes are kept",
			p:     &sluice.Policy{Name: "p", Rules: []sluice.Rule{{Name: "r", By: []string{"a"}}}},
			attrs: map[string]string{"a": long[:64]},
			want:  []string{"sluice:{p," + long[:64] + "}:p:r:" + long[:64]},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := planOf("sluice", false, policyRequest(tt.p, tt.attrs)).keys
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("keys = %q\nwant   %q", got, tt.want)
			}
		})
	}
}

// FuzzKey checks that no attribute values, policy or rule names change a
// key's structure or make it long, and that distinct values give distinct
// keys.
func FuzzKey(f *testing.F) {
	f.Add("notify", "category", "errors", "x", "errors", "y")
	f.Add("p", "r", "x:y", "z", "x", "y:z")
	f.Add("{p}", "r:", "{x}", "", "", "{x}")
	f.Add("p", "r", "%C3%BC", "%25", "ü", "%")
	f.Add("p", "r", strings.Repeat("a", 64), "", strings.Repeat("a", 65), "")
	f.Fuzz(func(t *testing.T, policy, rule, a1, b1, a2, b2 string) {
		if policy == "" || rule == "" {
			t.Skip()
		}
		p := &sluice.Policy{Name: policy, Rules: []sluice.Rule{
			{Name: "global"},
			{Name: rule + "x", By: []string{"a", "b"}},
		}}
		k1 := planOf("pre", false, policyRequest(p, map[string]string{"a": a1, "b": b1})).keys
		k2 := planOf("pre", false, policyRequest(p, map[string]string{"a": a2, "b": b2})).keys
		for _, k := range append(k1, k2...) {
			if strings.Count(k, "{") != 1 || strings.Count(k, "}") != 1 || strings.Index(k, "{") != len("pre:") {
				t.Fatalf("key %q: braces other than the hash tag's", k)
			}
			if n := strings.Count(k, ":"); n != 3 && n != 4 {
				t.Fatalf("key %q has %d colons, want 3 or 4", k, n)
			}
			// prefix, 3 bytes of braces and colons, policy (tag and
			// part), rule, two values: each part at most 64 bytes.
			if len(k) > len("pre")+8+7*maxPartLen {
				t.Fatalf("key %q is %d bytes long", k, len(k))
			}
		}
		// The tag is the same for both requests: the policy has no shared
		// attributes.
		tag := k1[0][:strings.Index(k1[0], "}")]
		if !strings.HasPrefix(k1[1], tag+"}") || !strings.HasPrefix(k2[1], tag+"}") {
			t.Fatalf("keys %q and %q do not share the tag %q", k1, k2, tag)
		}
		if same := a1 == a2 && b1 == b2; same != (k1[1] == k2[1]) {
			t.Fatalf("values (%q, %q) and (%q, %q) give keys %q and %q", a1, b1, a2, b2, k1[1], k2[1])
		}
	})
}
