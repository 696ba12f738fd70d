package memstore

import (
	"hash/maphash"
	"strconv"
	"strings"
)

// key names one rule's window: policy, rule and the encoded values of the
// rule's By attributes.
type key struct {
	policy, rule, values string
}

// hash returns k's hash under seed: it picks the key's shard and its slot in
// the shard's table. The values, which clients choose, go through the seeded
// hash; the policy's and the rule's names, which are configured, only through
// namesHash, which costs a few instructions where a seeded hash of each name
// costs as much as the rest of the lookup. Keys are compared in full, so
// names that mix alike cost probes, never a wrong window.
func (k *key) hash(seed maphash.Seed) uint64 {
	h := maphash.String(seed, k.values) ^ namesHash(k.policy, k.rule)
	h ^= h >> 32
	h *= 0x9E3779B97F4A7C15
	return h ^ h>>29
}

// namesHash mixes the lengths and the first and last bytes of a policy's and
// a rule's names.
func namesHash(policy, rule string) uint64 {
	h := uint64(len(policy))<<32 | uint64(len(rule))
	if n := len(policy); n > 0 {
		h ^= uint64(policy[0])<<8 | uint64(policy[n-1])<<16
	}
	if n := len(rule); n > 0 {
		h ^= uint64(rule[0])<<40 | uint64(rule[n-1])<<48
	}
	h *= 0xBF58476D1CE4E5B9
	return h ^ h>>31
}

// encodeValues returns values encoded so that distinct value lists give
// distinct strings. One value is itself (no allocation); several are
// length-prefixed.
func encodeValues(values []string) string {
	if len(values) == 1 {
		return values[0] // the common case, inlined
	}
	return encodeMany(values)
}

// encodeMany is encodeValues for no value or several.
func encodeMany(values []string) string {
	if len(values) == 0 {
		return ""
	}
	var b strings.Builder
	for _, v := range values {
		b.WriteString(strconv.Itoa(len(v)))
		b.WriteByte(':')
		b.WriteString(v)
	}
	return b.String()
}
