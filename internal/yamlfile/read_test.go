package yamlfile

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// write writes files (name, contents, ...) under dir.
func write(t *testing.T, dir string, files ...string) {
	t.Helper()
	for i := 0; i+1 < len(files); i += 2 {
		p := filepath.Join(dir, filepath.FromSlash(files[i]))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(files[i+1]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFiles: the YAML files of a directory and its subdirectories, sorted,
// names starting with '.' skipped (a config map's timestamped directory,
// an editor's swap file); Sum follows what Files lists.
func TestFiles(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "b.yaml", "b", "a.yml", "a", "sub/c.yaml", "c", "notes.txt", "x", ".swap.yaml", "x", "..2026_01_01/d.yaml", "d")
	got, err := Files(dir)
	if err != nil {
		t.Fatal(err)
	}
	var rel []string
	for _, f := range got {
		r, _ := filepath.Rel(dir, f)
		rel = append(rel, filepath.ToSlash(r))
	}
	if want := []string{"a.yml", "b.yaml", "sub/c.yaml"}; !slices.Equal(rel, want) {
		t.Errorf("Files = %q, want %q", rel, want)
	}
	srcs, err := ReadDir(dir)
	if err != nil || len(srcs) != 3 || string(srcs[0].Data) != "a" {
		t.Fatalf("ReadDir = %v, %v", srcs, err)
	}
	before := Sum(dir)
	write(t, dir, ".swap.yaml", "changed", "..2026_01_01/d.yaml", "changed")
	if !bytes.Equal(Sum(dir), before) {
		t.Error("the sum changed with files the loader does not read")
	}
	write(t, dir, "sub/c.yaml", "changed")
	if bytes.Equal(Sum(dir), before) {
		t.Error("the sum did not change with a file the loader reads")
	}
	if _, err := Files(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "reading ") {
		t.Errorf("Files of a missing directory: %v", err)
	}
}

// TestReadFileSize: a file over MaxFileSize is an ErrorList naming it.
func TestReadFileSize(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "big.yaml", strings.Repeat("#", MaxFileSize+1), "ok.yaml", "a: 1\n")
	var list ErrorList
	if _, err := ReadFile(filepath.Join(dir, "big.yaml")); !errors.As(err, &list) || !strings.Contains(err.Error(), "a configuration file is at most 4194304") {
		t.Errorf("ReadFile of a large file: %v", err)
	}
	if _, err := ReadDir(dir); !errors.As(err, &list) {
		t.Errorf("ReadDir with a large file: %v", err)
	}
	if b, err := ReadFile(filepath.Join(dir, "ok.yaml")); err != nil || string(b) != "a: 1\n" {
		t.Errorf("ReadFile = %q, %v", b, err)
	}
}

// TestDocument: one document, or why there is none, at its line and
// column.
func TestDocument(t *testing.T) {
	tests := []struct{ name, data, want string }{
		{"empty", "", "f.yaml: empty"},
		{"comment only", "# nothing\n", "f.yaml: empty"},
		{"second document", "a: 1\n---\nb: 2\n", "f.yaml:2:1: second"},
		{"syntax", "a: [\n", "f.yaml:1:4: YAML syntax: did not find expected node content"},
		{"syntax in the second document", "a: 1\n---\nb: [\n", "f.yaml:3:4: YAML syntax:"},
		// The library itself says line 1 for these: the line its block began.
		{"key indented less than its mapping", "p:\n  - name: a\n    limits:\n      - {name: g}\n     bad: 1\n", "f.yaml:5:6: YAML syntax: did not find expected key"},
		{"key indented less than its item", "p:\n  - name: a\n    limits:\n      - name: g\n        limit: 1\n       window: 1s\n", "f.yaml:6:8: YAML syntax:"},
		{"a second colon", "p:\n  - name: a\n    limits: x: y\n", "f.yaml:3:14: YAML syntax: mapping values are not allowed"},
		{"a tab", "p:\n  - name: a\n\t- b\n", "f.yaml:3:1: YAML syntax: found a tab character"},
		{"after a flow list over two lines", "p:\n  - [a,\n     b]\n  - name: b\n   x: 1\n", "f.yaml:5:4: YAML syntax:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := File{Name: "f.yaml"}
			if n := f.Document([]byte(tt.data), "empty", "second"); n != nil || len(f.Errs) != 1 || !strings.HasPrefix(f.Errs[0].Error(), tt.want) {
				t.Errorf("Document = %v, %v; want nil and %q", n, f.Errs, tt.want)
			}
		})
	}
	f := File{Name: "f.yaml"}
	if n := f.Document([]byte("a: 1\n"), "empty", "second"); n == nil || n.Kind != yaml.MappingNode || len(f.Errs) > 0 {
		t.Errorf("Document of a mapping = %v, %v", n, f.Errs)
	}
}

// TestResolveBudget: nested aliases are followed until the file has
// expanded to MaxNodes, then reported once.
func TestResolveBudget(t *testing.T) {
	f := File{Name: "f.yaml"}
	root := f.Document([]byte("a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"+
		"c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"+
		"e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"), "empty", "second")
	var walk func(n *yaml.Node) int
	walk = func(n *yaml.Node) int {
		if n = f.Resolve(n); n == nil {
			return 0
		}
		seen := 1
		for _, c := range n.Content {
			seen += walk(c)
		}
		return seen
	}
	if got := walk(root); got != MaxNodes {
		t.Errorf("walked %d nodes, want the budget, %d", got, MaxNodes)
	}
	if len(f.Errs) != 1 || !strings.Contains(f.Errs[0].Msg, "more than 200000 YAML nodes") {
		t.Errorf("problems %v, want one about the budget", f.Errs)
	}
}
