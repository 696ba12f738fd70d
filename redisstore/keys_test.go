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
		want  []string // Layout2
		want1 []string // Layout1
	}{
		{
			name: "global and category share the policy's slot",
			p: &sluice.Policy{Name: "notify", Rules: []sluice.Rule{
				{Name: "global"}, {Name: "category", By: []string{"category"}},
			}},
			attrs: map[string]string{"category": "errors"},
			want:  []string{"sluice:{notify}2l:global", "sluice:{notify}2l:category:errors"},
			want1: []string{"sluice:{notify}:notify:global", "sluice:{notify}:notify:category:errors"},
		},
		{
			name: "shared attributes join the hash tag",
			p: &sluice.Policy{Name: "push", Rules: []sluice.Rule{
				{Name: "per-user", By: []string{"user"}}, {Name: "per-pair", By: []string{"device", "user"}},
			}},
			attrs: map[string]string{"user": "u1", "device": "d9"},
			want:  []string{"sluice:{push,u1}2l:per-user", "sluice:{push,u1}2l:per-pair:d9,u1"},
			want1: []string{"sluice:{push,u1}:push:per-user:u1", "sluice:{push,u1}:push:per-pair:d9,u1"},
		},
		{
			name:  "structure characters are encoded",
			p:     &sluice.Policy{Name: "a:b", Rules: []sluice.Rule{{Name: "{r}", By: []string{"v"}}}},
			attrs: map[string]string{"v": "x}:{y,z%"},
			want:  []string{"sluice:{a%3Ab,x%7D%3A%7By%2Cz%25}2l:%7Br%7D"},
			want1: []string{"sluice:{a%3Ab,x%7D%3A%7By%2Cz%25}:a%3Ab:%7Br%7D:x%7D%3A%7By%2Cz%25"},
		},
		{
			name:  "unicode and empty values",
			p:     &sluice.Policy{Name: "p", Rules: []sluice.Rule{{Name: "r", By: []string{"a", "b"}}}},
			attrs: map[string]string{"a": "ü", "b": ""},
			want:  []string{"sluice:{p,%C3%BC,}2l:r"},
			want1: []string{"sluice:{p,%C3%BC,}:p:r:%C3%BC,"},
		},
		{
			name:  "long values are hashed",
			p:     &sluice.Policy{Name: "p", Rules: []sluice.Rule{{Name: "r", By: []string{"a"}}}},
			attrs: map[string]string{"a": long},
			want:  []string{"sluice:{p,#9537c5fdf120482f7d58d25e9ed583f5}2l:r"},
			want1: []string{"sluice:{p,#9537c5fdf120482f7d58d25e9ed583f5}:p:r:#9537c5fdf120482f7d58d25e9ed583f5"},
		},
		{
			name:  "64 plain bytes are kept",
			p:     &sluice.Policy{Name: "p", Rules: []sluice.Rule{{Name: "r", By: []string{"a"}}}},
			attrs: map[string]string{"a": long[:64]},
			want:  []string{"sluice:{p," + long[:64] + "}2l:r"},
			want1: []string{"sluice:{p," + long[:64] + "}:p:r:" + long[:64]},
		},
		{
			name: "algorithms are kinds",
			p: &sluice.Policy{Name: "api", Rules: []sluice.Rule{
				{Name: "burst", By: []string{"user"}, Algorithm: sluice.GCRA},
				{Name: "hour", By: []string{"user"}, Algorithm: sluice.SlidingCounter},
				{Name: "tenant", By: []string{"tenant", "user"}, Algorithm: sluice.GCRA},
			}},
			attrs: map[string]string{"user": "ann", "tenant": "t1"},
			want:  []string{"sluice:{api,ann}2g:burst", "sluice:{api,ann}2c:hour", "sluice:{api,ann}2g:tenant:t1,ann"},
			want1: []string{"sluice:{api,ann}:api:burst!gcra:ann", "sluice:{api,ann}:api:hour!counter:ann", "sluice:{api,ann}:api:tenant!gcra:t1,ann"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, n := range []namer{{prefix: "sluice", layout: Layout2}, {prefix: "sluice", layout: Layout1}} {
				want := tt.want
				if n.layout == Layout1 {
					want = tt.want1
				}
				got := n.plan(policyRequest(tt.p, tt.attrs)).keys
				if strings.Join(got, " ") != strings.Join(want, " ") {
					t.Errorf("layout %d: keys = %q\nwant   %q", n.layout, got, want)
				}
				for i, k := range got {
					name, ok := n.parse(k)
					if !ok || name.layout != n.layout || name.rule != string(appendPart(nil, tt.p.Rules[i].Name)) {
						t.Errorf("parse(%q) = %+v, %v; want layout %d, rule %q", k, name, ok, n.layout, tt.p.Rules[i].Name)
					}
				}
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
		n := namer{prefix: "pre", layout: Layout2}
		k1 := n.plan(policyRequest(p, map[string]string{"a": a1, "b": b1})).keys
		k2 := n.plan(policyRequest(p, map[string]string{"a": a2, "b": b2})).keys
		for i, k := range append(k1, k2...) {
			if strings.Count(k, "{") != 1 || strings.Count(k, "}") != 1 || strings.Index(k, "{") != len("pre:") {
				t.Fatalf("key %q: braces other than the hash tag's", k)
			}
			if n := strings.Count(k, ":"); n != 2 && n != 3 {
				t.Fatalf("key %q has %d colons, want 2 or 3", k, n)
			}
			// prefix, 7 bytes of braces, layout, kind and colons, policy,
			// rule, two values: each part at most 64 bytes.
			if len(k) > len("pre")+7+4*maxPartLen+1 {
				t.Fatalf("key %q is %d bytes long", k, len(k))
			}
			name, ok := n.parse(k)
			if !ok || name.rule != string(appendPart(nil, p.Rules[i%2].Name)) || name.tag[0] != string(appendPart(nil, policy)) {
				t.Fatalf("parse(%q) = %+v, %v", k, name, ok)
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
