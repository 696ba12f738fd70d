package memstore

import "unsafe"

// The table. Each shard keeps its windows in an open-addressed hash table
// (linear probing) of two parallel arrays: a 16-bit tag per slot and a
// pointer per slot. A lookup scans the tags and follows the one pointer whose
// tag matches: the tags and pointers of every shard together (10 bytes a
// window) stay in the caches, so a decision's one access to memory that
// is likely cold is its window's first cache line, which holds the key and
// the fields a decision reads (see window). Removal shifts the following
// slots back (no tombstones), so slots move: nothing keeps a slot's index
// across a change of its table.

// is reports whether w is the window of k. It reads the window's first cache
// line only.
func (w *window) is(k *key) bool {
	return same(w.values, k.values) && same(w.names.rule, k.rule) && same(w.names.policy, k.policy)
}

// same is a == b, without comparing the bytes of strings that share them,
// as a policy's and a rule's names usually do with the window's.
func same(a, b string) bool {
	return len(a) == len(b) && (unsafe.StringData(a) == unsafe.StringData(b) || a == b)
}

// names is a policy name and a rule name, shared by the windows of that rule
// in one shard, so that comparing a window's key reads memory that every
// decision of the rule reads.
type names struct {
	policy, rule string
	refs         int // windows that point here
}

// nameKey is a names' map key.
type nameKey struct{ policy, rule string }

// maxLoad is the table's largest load, in eighths: it doubles past it.
const maxLoad = 7

// tagOf returns the tag of hash h: never 0, which marks an empty slot.
func tagOf(h uint64) uint16 { return uint16(h>>48) | 1 }

// home returns the slot where a probe for hash h starts in a table of mask+1
// slots. It uses bits apart from the shard's (the low bits) and the tag's.
func home(h uint64, mask int) int { return int(h>>16) & mask }

// find returns the index of the slot of k, whose hash is h, or -1.
func (sh *shard) find(h uint64, k *key) int {
	mask := len(sh.tags) - 1
	if mask < 0 {
		return -1
	}
	tag := tagOf(h)
	for i := home(h, mask); ; i = (i + 1) & mask {
		switch sh.tags[i] {
		case tag:
			if sh.slots[i].is(k) {
				return i
			}
		case 0:
			return -1
		}
	}
}

// index returns the index of w's slot, or -1 when the table does not hold w.
func (sh *shard) index(w *window) int {
	mask := len(sh.tags) - 1
	if mask < 0 {
		return -1
	}
	for i := home(w.h, mask); sh.tags[i] != 0; i = (i + 1) & mask {
		if sh.slots[i] == w {
			return i
		}
	}
	return -1
}

// lookup returns the window of k, whose hash is h, or nil.
func (sh *shard) lookup(h uint64, k *key) *window {
	if i := sh.find(h, k); i >= 0 {
		return sh.slots[i]
	}
	return nil
}

// insert adds w, the window of k, which no table holds, and returns its
// slot's index.
func (sh *shard) insert(k *key, w *window) int {
	if (sh.count+1)*8 > len(sh.tags)*maxLoad {
		sh.grow()
	}
	n := sh.names[nameKey{k.policy, k.rule}]
	if n == nil {
		if sh.names == nil {
			sh.names = make(map[nameKey]*names)
		}
		n = &names{policy: k.policy, rule: k.rule}
		sh.names[nameKey{k.policy, k.rule}] = n
	}
	n.refs++
	w.names, w.values, w.live = n, k.values, true
	sh.count++
	return sh.place(w)
}

// place puts w in the first free slot of its probe sequence and returns the
// slot's index.
func (sh *shard) place(w *window) int {
	mask := len(sh.tags) - 1
	i := home(w.h, mask)
	for sh.tags[i] != 0 {
		i = (i + 1) & mask
	}
	sh.tags[i], sh.slots[i] = tagOf(w.h), w
	return i
}

// grow doubles the table (8 slots at first) and re-places every slot.
func (sh *shard) grow() {
	tags, slots := sh.tags, sh.slots
	n := max(8, 2*len(tags))
	sh.tags, sh.slots = make([]uint16, n), make([]*window, n)
	for i, t := range tags {
		if t != 0 {
			sh.place(slots[i])
		}
	}
}

// remove drops w from the shard's table.
func (sh *shard) remove(w *window) {
	i := sh.index(w)
	n := w.names
	if n.refs--; n.refs == 0 {
		delete(sh.names, nameKey{n.policy, n.rule})
	}
	w.live = false
	sh.count--
	// Shift back each following slot of the run whose probe sequence passes
	// over the hole, so that every probe still finds its slot.
	mask := len(sh.tags) - 1
	for j := (i + 1) & mask; sh.tags[j] != 0; j = (j + 1) & mask {
		if (j-home(sh.slots[j].h, mask))&mask >= (j-i)&mask {
			sh.tags[i], sh.slots[i] = sh.tags[j], sh.slots[j]
			i = j
		}
	}
	sh.tags[i], sh.slots[i] = 0, nil
}
