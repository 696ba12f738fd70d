package redisstore

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"

	"github.com/sluicerate/sluice"
)

// Keys. Every rule's window of a request has the key
//
//	<prefix>:{<hash tag>}:<policy>:<rule>[:<values>]
//
// where <values> are the values of the rule's By attributes, absent for a
// rule without By. The hash tag, which picks a key's Redis Cluster slot, is
// the policy name followed by values:
//
//   - SlotsShared: the values of the attributes every rule of the policy
//     goes by (Policy.SharedAttributes), so all of a decision's keys share
//     one tag, and one script call decides them;
//   - SlotsPerRule: the values of the rule's own By attributes, so per-user
//     windows spread over the cluster while a global cap has a slot of its
//     own; the rules whose tags are equal form a slot group, decided by one
//     script call, and a decision over several groups is a reserve / commit
//     / rollback sequence (crossslot.go).
//
// Names and values are encoded by appendPart and joined by ','; no input
// can produce '{', '}', ':' or ',' inside a part, so no user can choose a
// slot or change a key's structure.

// maxPartLen is the longest encoded name or attribute value kept in a key as
// is; a longer one is replaced by hashPrefix and a hash of the raw value, so
// no input can make a key long.
const maxPartLen = 64

// hashPrefix starts a hashed part. The encoding never writes it, so a hashed
// part never equals an encoded one.
const hashPrefix = '#'

// plan is where a request's windows live: each rule's key, and the slot
// groups the keys fall into, in the order they are decided.
type plan struct {
	keys   []string // per rule, in policy order
	groups []group
}

// group is the rules of a plan whose keys share a hash tag: one script call
// decides them atomically.
type group struct {
	rules []int    // indexes of the policy's rules, in policy order
	keys  []string // their keys
}

// planOf returns the plan of p's windows for attrs, whose hash tags are per
// rule when perRule is set and shared otherwise. The caller has checked
// that attrs holds every attribute the rules name.
func planOf(prefix string, perRule bool, p *sluice.Policy, attrs map[string]string) plan {
	var room [128]byte // enough for most keys: no allocation but the keys'
	pl := plan{keys: make([]string, len(p.Rules))}
	if !perRule {
		buf := append(room[:0], prefix...)
		buf = append(buf, ":{"...)
		buf = appendPart(buf, p.Name)
		if len(p.Rules) > 0 {
			for _, a := range p.Rules[0].By { // p.SharedAttributes(), without a slice
				if p.Shares(a) {
					buf = append(buf, ',')
					buf = appendPart(buf, attrs[a])
				}
			}
		}
		buf = append(buf, '}')
		head := len(buf)
		for i := range p.Rules {
			pl.keys[i] = string(appendWindow(buf[:head], p, &p.Rules[i], attrs))
		}
		pl.groups = []group{{rules: firstRules(len(p.Rules)), keys: pl.keys}}
		return pl
	}
	tags := make([]int, len(p.Rules)) // where each key's tag ends
	for i := range p.Rules {
		r := &p.Rules[i]
		buf := append(room[:0], prefix...)
		buf = append(buf, ":{"...)
		buf = appendPart(buf, p.Name)
		buf = appendValues(buf, ',', r.By, attrs)
		buf = append(buf, '}')
		tags[i] = len(buf)
		pl.keys[i] = string(appendWindow(buf, p, r, attrs))
	}
	for i, k := range pl.keys {
		g := slices.IndexFunc(pl.groups, func(g group) bool {
			first := pl.keys[g.rules[0]]
			return first[:tags[g.rules[0]]] == k[:tags[i]]
		})
		if g < 0 {
			pl.groups = append(pl.groups, group{})
			g = len(pl.groups) - 1
		}
		pl.groups[g].rules = append(pl.groups[g].rules, i)
		pl.groups[g].keys = append(pl.groups[g].keys, k)
	}
	// Groups whose rules go by more attributes first, ties in policy order:
	// the global cap, the hottest key and the likeliest to deny, comes last.
	slices.SortStableFunc(pl.groups, func(a, b group) int {
		return len(p.Rules[b.rules[0]].By) - len(p.Rules[a.rules[0]].By)
	})
	return pl
}

// firstRules returns the indexes 0 to n-1: the rules of a plan of one
// group. It allocates only for policies of more than 64 rules.
func firstRules(n int) []int {
	if n <= len(ruleIndexes) {
		return ruleIndexes[:n:n]
	}
	r := make([]int, n)
	for i := range r {
		r[i] = i
	}
	return r
}

var ruleIndexes = func() (r [64]int) {
	for i := range r {
		r[i] = i
	}
	return r
}()

// appendWindow appends ":<policy>:<rule>[:<values>]" to a key's tag.
func appendWindow(buf []byte, p *sluice.Policy, r *sluice.Rule, attrs map[string]string) []byte {
	buf = append(buf, ':')
	buf = appendPart(buf, p.Name)
	buf = append(buf, ':')
	buf = appendPart(buf, r.Name)
	return appendValues(buf, ':', r.By, attrs)
}

// appendValues appends the values of the attributes by, the first after
// sep and the others after ','.
func appendValues(buf []byte, sep byte, by []string, attrs map[string]string) []byte {
	for j, a := range by {
		if j == 0 {
			buf = append(buf, sep)
		} else {
			buf = append(buf, ',')
		}
		buf = appendPart(buf, attrs[a])
	}
	return buf
}

// appendPart appends s percent-encoded: every byte outside A-Z a-z 0-9 and
// ".-_~" becomes %XX. When that would take more than maxPartLen bytes it
// appends hashPrefix and 32 hex digits of the SHA-256 of s instead.
func appendPart(dst []byte, s string) []byte {
	n := 0
	for i := 0; i < len(s); i++ {
		if plain(s[i]) {
			n++
		} else {
			n += 3
		}
	}
	if n > maxPartLen {
		sum := sha256.Sum256([]byte(s))
		dst = append(dst, hashPrefix)
		return hex.AppendEncode(dst, sum[:16])
	}
	const digits = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if plain(c) {
			dst = append(dst, c)
		} else {
			dst = append(dst, '%', digits[c>>4], digits[c&15])
		}
	}
	return dst
}

// plain reports whether c stands for itself in an encoded part.
func plain(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '.' || c == '-' || c == '_' || c == '~'
}
