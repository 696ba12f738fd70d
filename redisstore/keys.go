package redisstore

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/sluicerate/sluice"
)

// maxPartLen is the longest encoded name or attribute value kept in a key as
// is; a longer one is replaced by hashPrefix and a hash of the raw value, so
// no input can make a key long.
const maxPartLen = 64

// hashPrefix starts a hashed part. The encoding never writes it, so a hashed
// part never equals an encoded one.
const hashPrefix = '#'

// keys returns the key of every rule of p, in policy order:
//
//	<prefix>:{<hash tag>}:<policy>:<rule>[:<values>]
//
// The hash tag is the policy name followed by the values of the attributes
// that every rule shares (p.SharedAttributes()), so every key of one decision
// lands in one Redis Cluster slot. <values> are the values of the rule's By
// attributes, absent for a rule without By. Names and values are encoded by
// appendPart and joined by ','; no input can produce '{', '}', ':' or ','
// inside a part. The caller has checked that attrs holds every attribute the
// rules name.
func keys(prefix string, p *sluice.Policy, attrs map[string]string) []string {
	var room [128]byte // enough for most keys: no allocation but the keys'
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
	buf = append(buf, "}:"...)
	buf = appendPart(buf, p.Name)
	buf = append(buf, ':')
	head := len(buf)

	out := make([]string, len(p.Rules))
	for i := range p.Rules {
		r := &p.Rules[i]
		buf = appendPart(buf[:head], r.Name)
		for j, a := range r.By {
			if j == 0 {
				buf = append(buf, ':')
			} else {
				buf = append(buf, ',')
			}
			buf = appendPart(buf, attrs[a])
		}
		out[i] = string(buf)
	}
	return out
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
