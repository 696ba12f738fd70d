package memstore

import (
	"math/rand/v2"
	"testing"
)

// TestWindowRing drives a window's ring buffer through random adds and trims,
// across wrap-arounds and growth, against a plain slice of the same entries.
func TestWindowRing(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, hint := range []int64{1, 3, 8, 200} {
		w := &window{}
		var model []entry
		now := int64(1_000)
		for step := range 5_000 {
			now += r.Int64N(5)
			switch {
			case r.IntN(3) > 0:
				cost := 1 + r.Int64N(3)
				w.add(now, cost, 100, hint)
				model = append(model, entry{ts: now, cost: cost})
			default:
				cutoff := now - r.Int64N(40)
				w.trim(cutoff)
				for len(model) > 0 && model[0].ts <= cutoff {
					model = model[1:]
				}
			}
			if w.n != len(model) {
				t.Fatalf("hint %d, step %d: %d entries, want %d", hint, step, w.n, len(model))
			}
			var used int64
			for i, e := range model {
				if got := *w.at(i); got != e {
					t.Fatalf("hint %d, step %d: entry %d is %+v, want %+v", hint, step, i, got, e)
				}
				used += e.cost
			}
			if w.used != used {
				t.Fatalf("hint %d, step %d: used %d, want %d", hint, step, w.used, used)
			}
			if w.n > 0 && (w.oldest != model[0].ts || w.first != model[0].cost) {
				t.Fatalf("hint %d, step %d: oldest %d cost %d, want %+v", hint, step, w.oldest, w.first, model[0])
			}
			if w.n > 0 {
				need := 1 + r.Int64N(used)
				var freed, want int64
				for _, e := range model {
					if freed += e.cost; freed >= need {
						want = e.ts + 60
						break
					}
				}
				if got := w.freedAt(need, 60); got != want {
					t.Fatalf("hint %d, step %d: freedAt(%d) = %d, want %d", hint, step, need, got, want)
				}
			}
		}
	}
}

// TestShardCollisions puts windows whose keys share a hash into one shard:
// each is found by its own key, and removing any leaves the others.
func TestShardCollisions(t *testing.T) {
	sh := &shard{}
	keys := []key{{"p", "r", "a"}, {"p", "r", "b"}, {"p", "s", "a"}, {"q", "r", "a"}}
	ws := make([]*window, len(keys))
	for i, k := range keys {
		ws[i] = &window{h: 42}
		sh.insert(&k, ws[i])
	}
	check := func(present ...int) {
		t.Helper()
		if sh.count != len(present) {
			t.Errorf("count %d, want %d", sh.count, len(present))
		}
		in := map[int]bool{}
		for _, i := range present {
			in[i] = true
		}
		for i, k := range keys {
			got := sh.lookup(42, &k)
			if in[i] && got != ws[i] || !in[i] && got != nil {
				t.Errorf("lookup %v: %p, want present %v", k, got, in[i])
			}
		}
	}
	check(0, 1, 2, 3)
	sh.remove(ws[1]) // in the middle of the run
	check(0, 2, 3)
	sh.remove(ws[3]) // the end of the run (inserted last)
	check(0, 2)
	sh.remove(ws[0]) // the start of the run
	check(2)
	sh.remove(ws[2])
	check()
	for i, tag := range sh.tags {
		if tag != 0 {
			t.Errorf("slot %d still taken after every window left", i)
		}
	}
	if len(sh.names) != 0 {
		t.Errorf("table keeps %d names after every window left", len(sh.names))
	}
}
