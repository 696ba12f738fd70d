package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// cliDoc is the command-line reference page, every command's -h.
const cliDoc = "../../docs/cli.md"

// cliHelp returns what `sluice args...` prints, stdout then stderr, and
// its exit code.
func cliHelp(args ...string) (string, int) {
	var out bytes.Buffer
	code := run(context.Background(), args, &out, &out)
	return out.String(), code
}

// cliReference is docs/cli.md as the commands' help makes it.
func cliReference(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	b.WriteString(`# Command-line reference

Every command's help, as ` + "`sluice COMMAND -h`" + ` prints it. A mistyped flag prints one line instead,
with the closest flag and where the help is:

` + "```text" + `
$ sluice check --polcy api
sluice check: unknown flag --polcy; did you mean --policy? (see sluice check -h)
` + "```" + `

This page is checked against the commands' help by ` + "`TestCLIReference`" + ` (cmd/sluice/cli_test.go),
which fails when they disagree; ` + "`SLUICE_WRITE_CLI_DOCS=1 go test -run TestCLIReference ./cmd/sluice/`" + `
writes it again from the help.
`)
	pages := [][]string{{"-h"}}
	for _, c := range commands() {
		pages = append(pages, []string{c.name, "-h"})
		if c.name == "override" {
			for _, sub := range []string{"set", "list", "get", "delete"} {
				pages = append(pages, []string{c.name, sub, "-h"})
			}
		}
	}
	for _, args := range pages {
		help, code := cliHelp(args...)
		if code != exitOK || strings.TrimSpace(help) == "" {
			t.Fatalf("sluice %s: exit %d, %q; want 0 and the help", strings.Join(args, " "), code, help)
		}
		title := strings.TrimSpace("sluice " + strings.Join(args[:len(args)-1], " "))
		b.WriteString("\n## " + title + "\n\n```text\n" + strings.TrimRight(help, "\n") + "\n```\n")
	}
	return b.String()
}

// TestCLIReference: docs/cli.md is every command's -h as it prints now,
// and every command is on sluice -h.
func TestCLIReference(t *testing.T) {
	// The defaults of override's --admin and --token come from the
	// environment; the page shows them unset.
	t.Setenv("SLUICE_ADMIN_URL", "")
	t.Setenv(adminTokenEnv, "")
	want := cliReference(t)
	if os.Getenv("SLUICE_WRITE_CLI_DOCS") == "1" {
		if err := os.WriteFile(filepath.FromSlash(cliDoc), []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(filepath.FromSlash(cliDoc))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(want, "\n")
		for i := range max(len(gl), len(wl)) {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("docs/cli.md disagrees with the help at line %d:\n doc:  %q\n help: %q\nrun SLUICE_WRITE_CLI_DOCS=1 go test -run TestCLIReference ./cmd/sluice/ and review the change", i+1, g, w)
			}
		}
	}
	top, _ := cliHelp("-h")
	for _, c := range commands() {
		if !strings.Contains(top, "  "+c.name+" ") {
			t.Errorf("sluice -h does not list %s", c.name)
		}
	}
	if !strings.Contains(top, "get") {
		t.Errorf("sluice -h does not mention override get:\n%s", top)
	}
}

// TestFlagErrors: a mistyped or unknown flag is one line naming the closest
// flag and where the help is, not the help; a stray argument too.
func TestFlagErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"check", "--polcy", "api"}, "sluice check: unknown flag --polcy; did you mean --policy? (see sluice check -h)\n"},
		{[]string{"serve", "--redsi", "redis://x"}, "sluice serve: unknown flag --redsi; did you mean --redis? (see sluice serve -h)\n"},
		{[]string{"override", "get", "--jsn"}, "sluice override get: unknown flag --jsn; did you mean --json? (see sluice override get -h)\n"},
		{[]string{"demo", "--zzzzzz"}, "sluice demo: unknown flag --zzzzzz (see sluice demo -h)\n"},
		{[]string{"check", "--cost", "abc"}, "sluice check: invalid value \"abc\" for flag -cost: parse error (see sluice check -h)\n"},
		{[]string{"inspect", "stray"}, "sluice inspect: unexpected argument \"stray\"; see sluice inspect -h\n"},
	} {
		got, code := cliHelp(tt.args...)
		if code != exitUsage || got != tt.want {
			t.Errorf("sluice %s: exit %d,\n%q\nwant 2 and\n%q", strings.Join(tt.args, " "), code, got, tt.want)
		}
	}
}
