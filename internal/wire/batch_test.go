package wire

import (
	"bytes"
	"strings"
	"testing"
)

// FuzzSplitBatch checks that the batch splitter agrees with encoding/json:
// what it splits, encoding/json reads as the same array of objects, and
// what encoding/json rejects, it rejects.
func FuzzSplitBatch(f *testing.F) {
	for _, s := range []string{`[]`, ` [ ] `, `[{}]`, `[{"a":[1,2.5e-3,{"b":null}],"c":"\u00e9\n"},{"policy":"p"}]`, `[{"a":-0.0E+1}]`,
		`[{"a":01}]`, `[{"a":1.}]`, `[{"a":.1}]`, `[{"a":tru}]`, `[{"a":"\x"}]`, "[{\"a\":\"\x01\"}]", "[{\"a\":\"\xff\"}]", `[{},]`, `[,{}]`,
		`[{}`, `[{}] x`, `[1]`, `[{"a" 1}]`, `[{"a":1,}]`, `[{"a":"\ud800"}]`, strings.Repeat("[", 200) + strings.Repeat("]", 200)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if !IsBatch(body) {
			return
		}
		items, ok := splitBatch(body, nil)
		want, p := batchItems(body)
		switch {
		case ok && p != nil:
			t.Fatalf("%q: split into %q; encoding/json: %+v", body, items, p)
		case ok && len(items) != len(want):
			t.Fatalf("%q: split into %q; encoding/json into %q", body, items, want)
		case !ok && p == nil && !deeper(body, maxSkipDepth):
			t.Fatalf("%q: not split; encoding/json splits it into %q", body, want)
		}
		for i := range items {
			if ok && !bytes.Equal(items[i], want[i]) {
				t.Fatalf("%q: item %d is %q; encoding/json's %q", body, i, items[i], want[i])
			}
		}
	})
}

// deeper reports whether body nests brackets deeper than depth (counting
// those in strings too, which only overestimates).
func deeper(body []byte, depth int) bool {
	n := 0
	for _, c := range body {
		switch c {
		case '[', '{':
			if n++; n > depth+1 {
				return true
			}
		case ']', '}':
			n--
		}
	}
	return false
}
