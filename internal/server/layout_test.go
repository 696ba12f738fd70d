package server

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The shape of internal/, checked so that it stays one package per job:
// no file of a package's own code over 400 lines, no function over 80, no
// package over 1,700, and this package, the composition root, at most 6
// files and 800 lines. Test files and the test harnesses
// (redistest, soak) are not counted.
const (
	maxFileLines     = 400
	maxFuncLines     = 80
	maxPackageLines  = 1700
	maxRootFiles     = 6
	maxRootLines     = 800
	internalDir      = ".."
	compositionRoot  = "server"
	layoutExplainFix = "split it where it tells two stories (docs/design.md, Layout)"
)

var testHarnesses = []string{"redistest", "soak"}

// sourceFiles returns the non-test Go files of internal/, by package
// directory relative to it.
func sourceFiles(t *testing.T) map[string][]string {
	t.Helper()
	pkgs := map[string][]string{}
	err := filepath.WalkDir(internalDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(internalDir, path)
		if d.IsDir() && slices.Contains(testHarnesses, rel) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		pkgs[filepath.Dir(rel)] = append(pkgs[filepath.Dir(rel)], path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

func TestLayout(t *testing.T) {
	fset := token.NewFileSet()
	for pkg, files := range sourceFiles(t) {
		total := 0
		for _, path := range files {
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Count(string(src), "\n")
			total += lines
			if lines > maxFileLines {
				t.Errorf("%s has %d lines, more than %d; %s", path, lines, maxFileLines, layoutExplainFix)
			}
			f, err := parser.ParseFile(fset, path, src, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
				if n > maxFuncLines {
					t.Errorf("%s: func %s has %d lines, more than %d", fset.Position(fn.Pos()), fn.Name.Name, n, maxFuncLines)
				}
			}
		}
		if total > maxPackageLines {
			t.Errorf("internal/%s has %d lines, more than %d", pkg, total, maxPackageLines)
		}
		if pkg == compositionRoot && (len(files) > maxRootFiles || total > maxRootLines) {
			t.Errorf("internal/%s, the composition root, has %d files and %d lines; at most %d and %d", pkg, len(files), total, maxRootFiles, maxRootLines)
		}
		t.Logf("internal/%s: %d files, %d lines", pkg, len(files), total)
	}
}

// The command is flags → call → print, one file per command: its own
// code (tests and help texts aside) at most 1,200 lines, and no function
// over 80. What a command does beyond that belongs in a package of
// internal/, where it can be tested as one.
const (
	commandDir      = "../../cmd"
	maxCommandLines = 1200
)

func TestCommandLayout(t *testing.T) {
	fset := token.NewFileSet()
	total := 0
	err := filepath.WalkDir(commandDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		total += strings.Count(string(src), "\n")
		f, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Body != nil {
				if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > maxFuncLines {
					t.Errorf("%s: func %s has %d lines, more than %d; move the work into a package of internal/", fset.Position(fn.Pos()), fn.Name.Name, n, maxFuncLines)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if total > maxCommandLines {
		t.Errorf("cmd/ has %d lines of Go, more than %d; move the work into a package of internal/", total, maxCommandLines)
	}
	t.Logf("cmd/: %d lines", total)
}
