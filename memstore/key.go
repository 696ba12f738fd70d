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
// the shard's table.
func (k *key) hash(seed maphash.Seed) uint64 {
	const m = 0x9E3779B97F4A7C15 // odd: each step is a bijection
	h := maphash.String(seed, k.policy)
	h = (h ^ maphash.String(seed, k.rule)) * m
	h = (h ^ maphash.String(seed, k.values)) * m
	return h ^ h>>29
}

// encodeValues returns the values of the attributes named in by, encoded so
// that distinct value lists give distinct strings. One attribute is its value
// as is (no allocation); several are length-prefixed.
func encodeValues(by []string, attrs map[string]string) string {
	switch len(by) {
	case 0:
		return ""
	case 1:
		return attrs[by[0]]
	}
	var b strings.Builder
	for _, a := range by {
		v := attrs[a]
		b.WriteString(strconv.Itoa(len(v)))
		b.WriteByte(':')
		b.WriteString(v)
	}
	return b.String()
}
