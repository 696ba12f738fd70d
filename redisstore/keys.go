package redisstore

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strconv"

	"github.com/sluicerate/sluice/store"
)

// Keys. In the current layout (Layout2) every rule's window of a request
// has the key
//
//	<prefix>:{<hash tag>}2<kind>:<rule>[:<values>]
//
// where "2" is the layout, <kind> is one letter for what the key holds (l a
// log, g a GCRA bucket, c a sliding counter, n a concurrency rule's leases,
// p a calendar quota's count, b a credits balance (calendar.go), q a
// schedule's queue, e a lease's record, see lease.go), and
// <values> are the values of the rule's By attributes, written only when
// the hash tag does not already hold them. The hash tag, which picks a key's
// Redis Cluster slot, is the policy name followed by values:
//
//   - SlotsShared: the values of the attributes every rule of the policy
//     goes by (store.Request.Shared), so all of a decision's keys share one
//     tag, and one script call decides them; a rule going by more than
//     those writes its values after its name;
//   - SlotsPerRule: the values of the rule's own By attributes, so per-user
//     windows spread over the cluster while a global cap has a slot of its
//     own; the rules whose tags are equal form a slot group, decided by one
//     script call, and a decision over several groups is a reserve / commit
//     / rollback sequence (crossslot.go).
//
// Layout1, the names before layout 2, repeated the policy and the values
// after the tag and marked the kind after the rule's name:
//
//	<prefix>:{<hash tag>}:<policy>:<rule>[!gcra|!counter][:<values>]
//
// A store reads and writes the keys of its own layout only (Config.Layout),
// so two layouts side by side on one Redis never misread or overwrite each
// other's keys: each counts its own admissions (docs/design.md, Upgrades).
//
// Names and values are encoded by appendPart and joined by ','; no input
// can produce '{', '}', ':' or ',' inside a part, so no user can choose a
// slot or change a key's structure.

// Layout is a version of the names a Store gives its keys in Redis.
type Layout uint8

const (
	// LayoutCurrent, the zero value, is the newest layout: Layout2.
	LayoutCurrent Layout = iota

	// Layout1 is the names of the versions of sluice before layout 2, for
	// a rolling upgrade from them (docs/design.md, Upgrades).
	Layout1

	// Layout2 names a key by its hash tag, the layout, its kind and its
	// rule, without repeating what the tag holds: 16 bytes shorter for a
	// per-user rule of policy "api" than Layout1, which for a GCRA bucket
	// or a counter is a quarter of the key's memory.
	Layout2
)

// namer names the keys of one Store.
type namer struct {
	prefix  string
	perRule bool // SlotsPerRule: each rule's keys get a hash tag of their own
	layout  Layout
}

// maxPartLen is the longest encoded name or attribute value kept in a key as
// is; a longer one is replaced by hashPrefix and a hash of the raw value, so
// no input can make a key long.
const maxPartLen = 64

// hashPrefix starts a hashed part. The encoding never writes it, so a hashed
// part never equals an encoded one.
const hashPrefix = '#'

// plan is where a request's windows live: each check's key, and the slot
// groups the keys fall into, in the order they are decided.
type plan struct {
	keys   []string // per check, in request order
	groups []group
}

// group is the checks of a plan whose keys share a hash tag: one script call
// decides them atomically.
type group struct {
	checks []int    // indexes of the request's checks, in request order
	keys   []string // their keys
}

// plan returns the plan of req's windows, whose hash tags are per rule
// or shared as the namer says.
func (n namer) plan(req *store.Request) plan {
	var room [128]byte // enough for most keys: no allocation but the keys'
	pl := plan{keys: make([]string, len(req.Checks))}
	if !n.perRule {
		buf := append(room[:0], n.prefix...)
		buf = append(buf, ":{"...)
		buf = n.appendTag(buf, req, nil)
		buf = append(buf, '}')
		head := len(buf)
		for i := range req.Checks {
			c := &req.Checks[i]
			pl.keys[i] = string(n.appendWindow(buf[:head], req.Policy, c, !slices.Equal(c.Values, req.Shared)))
		}
		pl.groups = []group{{checks: firstChecks(len(req.Checks)), keys: pl.keys}}
		return pl
	}
	tags := make([]int, len(req.Checks)) // where each key's tag ends
	for i := range req.Checks {
		c := &req.Checks[i]
		buf := append(room[:0], n.prefix...)
		buf = append(buf, ":{"...)
		buf = n.appendTag(buf, req, c)
		buf = append(buf, '}')
		tags[i] = len(buf)
		pl.keys[i] = string(n.appendWindow(buf, req.Policy, c, false))
	}
	for i, k := range pl.keys {
		g := slices.IndexFunc(pl.groups, func(g group) bool {
			first := g.checks[0]
			return pl.keys[first][:tags[first]] == k[:tags[i]]
		})
		if g < 0 {
			pl.groups = append(pl.groups, group{})
			g = len(pl.groups) - 1
		}
		pl.groups[g].checks = append(pl.groups[g].checks, i)
		pl.groups[g].keys = append(pl.groups[g].keys, k)
	}
	// Groups whose rules go by more attributes first, ties in request
	// order: the global cap, the hottest key and the likeliest to deny,
	// comes last.
	slices.SortStableFunc(pl.groups, func(a, b group) int {
		return len(req.Checks[b.checks[0]].Values) - len(req.Checks[a.checks[0]].Values)
	})
	return pl
}

// appendTag appends to buf the hash tag of the key of req's check c, what
// lies between its braces: the policy and the values every rule shares, or
// with per-rule tags the policy, c's values and a spread rule's placement.
// Its CRC16 is the key's Cluster slot.
func (n namer) appendTag(buf []byte, req *store.Request, c *store.Check) []byte {
	from := len(buf)
	buf = appendPart(buf, req.Policy)
	if !n.perRule {
		return appendValues(buf, ',', req.Shared)
	}
	buf = appendValues(buf, ',', c.Values)
	if c.Parts > 1 {
		buf = appendPlacement(buf, from, c)
	}
	return buf
}

// appendPlacement appends to the hash tag buf[from:] of a sub-window of a
// spread rule "!n", n the least number that puts the tag's slot in the
// Part-th of Parts equal ranges of the slot space. A Cluster whose masters
// hold equal ranges of slots, as redis-cli --cluster create makes them,
// then has the parts evenly over its masters, where hashing the part's
// index alone lands them as chance has it. '!' never appears in an encoded
// part; n depends on the tag alone, so every client finds the same key.
func appendPlacement(buf []byte, from int, c *store.Check) []byte {
	for n := range 1 << 12 {
		b := strconv.AppendInt(append(buf, '!'), int64(n), 10)
		if int(clusterSlot(b[from:]))*c.Parts/clusterSlots == c.Part {
			return b
		}
	}
	return buf // not met in 4,096 tries (odds below 10^-9 for 64 parts): the index alone
}

// firstChecks returns the indexes 0 to n-1: the checks of a plan of one
// group. It allocates only for requests of more than 64 checks.
func firstChecks(n int) []int {
	if n <= len(checkIndexes) {
		return checkIndexes[:n:n]
	}
	r := make([]int, n)
	for i := range r {
		r[i] = i
	}
	return r
}

var checkIndexes = func() (r [64]int) {
	for i := range r {
		r[i] = i
	}
	return r
}()

// appendWindow appends to a key's tag what follows it in the key of c's
// window: "2<kind>:<rule>", and ":<values>" when values is set. In Layout1,
// ":<policy>:<rule>[<mark>]:<values>", values always.
func (n namer) appendWindow(buf []byte, policy string, c *store.Check, values bool) []byte {
	if n.layout == Layout1 {
		buf = append(buf, ':')
		buf = appendPart(buf, policy)
		buf = append(buf, ':')
		buf = appendPart(buf, c.Rule)
		buf = append(buf, layout1Marks[c.Algorithm]...)
		return appendValues(buf, ':', c.Values)
	}
	buf = append(buf, '2', kinds[c.Algorithm], ':')
	buf = appendPart(buf, c.Rule)
	if values {
		buf = appendValues(buf, ':', c.Values)
	}
	return buf
}

// kinds are the letters of Layout2 for what a window's key holds: a log's
// sorted set, GCRA's or the counter's string of their own layout. A rule
// whose algorithm changes starts afresh instead of misreading the other's
// key.
var kinds = [...]byte{store.Log: 'l', store.GCRA: 'g', store.SlidingCounter: 'c', store.Concurrency: 'n', store.Periodic: 'p', store.Credits: 'b'}

// queueKind is Layout2's letter for a schedule's queue.
const queueKind = 'q'

// layout1Marks followed the rule's name in Layout1's key of a window that
// is not a log. '!' is never part of an encoded name.
var layout1Marks = [...]string{store.Log: "", store.GCRA: "!gcra", store.SlidingCounter: "!counter", store.Concurrency: "!concurrency",
	store.Periodic: "!calendar", store.Credits: "!credits"}

// appendQueueTag appends to buf the hash tag of schedule queue q's key.
func appendQueueTag(buf []byte, q store.Queue) []byte {
	return appendValues(appendPart(buf, q.Schedule), ',', q.Values)
}

// queue returns the key of schedule queue q: "<prefix>:{<schedule>[,<values>]}2q",
// whose tag holds all there is to say; in Layout1
// "<prefix>:{<schedule>[,<values>]}:<schedule>:@queue[:<values>]" ("@queue"
// cannot be an encoded rule name: '@' is always percent-encoded).
func (n namer) queue(q store.Queue) string {
	var room [128]byte
	buf := append(room[:0], n.prefix...)
	buf = append(buf, ":{"...)
	buf = appendQueueTag(buf, q)
	buf = append(buf, '}')
	if n.layout != Layout1 {
		return string(append(buf, '2', queueKind))
	}
	buf = append(buf, ':')
	buf = appendPart(buf, q.Schedule)
	buf = append(buf, ":@queue"...)
	return string(appendValues(buf, ':', q.Values))
}

// appendValues appends values, the first after sep and the others after ','.
func appendValues(buf []byte, sep byte, values []string) []byte {
	for j, v := range values {
		if j == 0 {
			buf = append(buf, sep)
		} else {
			buf = append(buf, ',')
		}
		buf = appendPart(buf, v)
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
