package deploy

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/envoy.md's table of environment variables from the table")

const envoyDoc = "../../docs/envoy.md"

// docsTable is docs/envoy.md's table of environment variables, written
// from the table.
func docsTable() string {
	var b strings.Builder
	b.WriteString("| variable | flag | default | what sluice does |\n| --- | --- | --- | --- |\n")
	for _, v := range Table() {
		if v.Env == "" {
			continue
		}
		fl, def, note := "no flag", "", v.Note
		if v.Flag != "" {
			fl = "`--" + v.Flag + "`"
		}
		if v.Default != "" {
			def = "`" + v.Default + "`"
		}
		if v.When != "" {
			note += " (read with `" + v.When + "`)"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", v.Env, fl, def, note)
	}
	return b.String()
}

// docsSection returns doc's table under "## Environment variables" and
// where it starts and ends in doc.
func docsSection(t *testing.T, doc string) (table string, start, end int) {
	t.Helper()
	sec := strings.Index(doc, "\n## Environment variables\n")
	if sec < 0 {
		t.Fatalf("%s has no section \"## Environment variables\"", envoyDoc)
	}
	start = sec + strings.Index(doc[sec:], "\n| variable |") + 1
	if start <= sec {
		t.Fatalf("%s: its section \"Environment variables\" has no table starting \"| variable |\"", envoyDoc)
	}
	end = start
	for end < len(doc) && doc[end] == '|' {
		end += strings.IndexByte(doc[end:], '\n') + 1
	}
	return doc[start:end], start, end
}

// TestDocsListEveryVariable: docs/envoy.md lists every variable of the
// table, and no other, as the table says; with -update it is rewritten
// from the table.
func TestDocsListEveryVariable(t *testing.T) {
	src, err := os.ReadFile(envoyDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(src)
	got, start, end := docsSection(t, doc)
	want := docsTable()
	if *update {
		if err := os.WriteFile(envoyDoc, []byte(doc[:start]+want+doc[end:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	known := map[string]bool{}
	for _, v := range Table() {
		known[v.Env] = v.Env != ""
		if v.Env != "" && !strings.Contains(got, "| `"+v.Env+"` |") {
			t.Errorf("%s does not list %s; run go test ./internal/deploy -run TestDocs -update", envoyDoc, v.Env)
		}
	}
	for _, m := range regexp.MustCompile("(?m)^\\| `([A-Z0-9_]+)`").FindAllStringSubmatch(got, -1) {
		if !known[m[1]] {
			t.Errorf("%s lists %s, which the table lacks", envoyDoc, m[1])
		}
	}
	if got != want {
		t.Errorf("%s's table of environment variables is not the table's; run go test ./internal/deploy -run TestDocs -update", envoyDoc)
	}
}

// TestTable: every variable has a note and is in the table once; every
// flag a row names is declared once, by serve or by the table.
func TestTable(t *testing.T) {
	t.Parallel()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	for _, name := range []string{"config", "http", "grpc", "redis", "log-level", "log-format"} {
		fs.String(name, "", "")
	}
	AddFlags(fs)
	seen := map[string]bool{}
	for _, v := range Table() {
		switch {
		case v.Env != "" && v.Note == "":
			t.Errorf("%s has no note", v.Env)
		case v.Env != "" && seen[v.Env]:
			t.Errorf("%s is in the table twice", v.Env)
		case v.Flag != "" && fs.Lookup(v.Flag) == nil:
			t.Errorf("%s names the flag --%s, which is not declared", v.Env, v.Flag)
		}
		seen[v.Env] = true
	}
}
