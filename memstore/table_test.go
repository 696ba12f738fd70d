package memstore

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"unsafe"
)

// TestTableModel inserts and removes windows at random, with hashes drawn
// from a small set so that probe runs collide, wrap around the table's end
// and cross its growth, and checks every key's lookup against a map.
func TestTableModel(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, hashes := range []uint64{1, 5, 64, 1 << 20} {
		sh := &shard{}
		model := map[key]*window{}
		var all []key
		for i := range 300 {
			all = append(all, key{"p", "r" + strconv.Itoa(i%3), strconv.Itoa(i)})
		}
		hashOf := func(k key) uint64 { // a few hashes, spread over every bit
			h := uint64(len(k.values)*7+int(k.values[len(k.values)-1])+int(k.rule[1])) % hashes
			return h * 0x9E3779B97F4A7C15
		}
		for step := range 20_000 {
			k := all[r.IntN(len(all))]
			if w, ok := model[k]; ok && r.IntN(2) == 0 {
				sh.remove(w)
				delete(model, k)
			} else if !ok {
				w := &window{h: hashOf(k)}
				sh.insert(&k, w)
				model[k] = w
			}
			if sh.count != len(model) {
				t.Fatalf("%d hashes, step %d: count %d, want %d", hashes, step, sh.count, len(model))
			}
			if step%97 != 0 {
				continue
			}
			for _, k := range all {
				got, want := sh.lookup(hashOf(k), &k), model[k]
				if got != want {
					t.Fatalf("%d hashes, step %d: lookup %v = %p, want %p", hashes, step, k, got, want)
				}
			}
		}
		for k, w := range model {
			sh.remove(w)
			delete(model, k)
		}
		for i, tag := range sh.tags {
			if tag != 0 {
				t.Errorf("%d hashes: slot %d still taken after every window left", hashes, i)
			}
		}
		if len(sh.names) != 0 {
			t.Errorf("%d hashes: %d names kept after every window left", hashes, len(sh.names))
		}
	}
}

// TestShardLayout checks that a shard's first cache line holds what every
// decision reads and that shards are two whole lines apart.
func TestShardLayout(t *testing.T) {
	var sh shard
	if got := unsafe.Sizeof(sh); got != 128 {
		t.Errorf("shard is %d bytes, want 128", got)
	}
	if got := unsafe.Offsetof(sh.due) + unsafe.Sizeof(sh.due); got > 64 {
		t.Errorf("shard's hot fields end at byte %d, past its first line", got)
	}
}
