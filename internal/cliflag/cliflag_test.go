package cliflag

import (
	"bytes"
	"errors"
	"flag"
	"slices"
	"testing"
)

// newSet returns a flag set like sluice check's, printing to out.
func newSet(out *bytes.Buffer) (*flag.FlagSet, *List, *OptionalInt) {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() { out.WriteString("usage: sluice check\n") }
	fs.String("policy", "", "the policy")
	fs.Int64("cost", 1, "the cost")
	fs.Bool("json", false, "JSON")
	var l List
	var n OptionalInt
	fs.Var(&l, "value", "a value")
	fs.Var(&n, "limit", "the limit")
	return fs, &l, &n
}

// TestParseErrors: a bad flag is one error naming the closest flag, within
// two edits or by a prefix, and where the help is; nothing is printed.
func TestParseErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--polcy", "api"}, "unknown flag --polcy; did you mean --policy? (see sluice check -h)"},
		{[]string{"--pol=api"}, "unknown flag --pol; did you mean --policy? (see sluice check -h)"},
		{[]string{"--zzzzzz"}, "unknown flag --zzzzzz (see sluice check -h)"},
		{[]string{"--cost", "abc"}, `invalid value "abc" for flag -cost: parse error (see sluice check -h)`},
		{[]string{"--limit", "1.5"}, `invalid value "1.5" for flag -limit: not a whole number (see sluice check -h)`},
	} {
		var out bytes.Buffer
		fs, _, _ := newSet(&out)
		if err := Parse(fs, tt.args); err == nil || err.Error() != tt.want || out.Len() != 0 {
			t.Errorf("Parse(%q) = %v, printed %q; want %q and nothing", tt.args, err, out.String(), tt.want)
		}
	}
}

// TestParseHelp: -h prints the command's usage and is flag.ErrHelp.
func TestParseHelp(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	fs, _, _ := newSet(&out)
	if err := Parse(fs, []string{"-h"}); !errors.Is(err, flag.ErrHelp) || out.String() != "usage: sluice check\n" {
		t.Errorf("Parse(-h) = %v, printed %q; want ErrHelp and the usage", err, out.String())
	}
}

// TestValues: List keeps repeated values in order, OptionalInt tells a
// flag left out from one given, and arguments after the flags stay.
func TestValues(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	fs, l, n := newSet(&out)
	if _, set := n.Int(); set || n.String() != "" {
		t.Errorf("OptionalInt before Parse: set %v, %q; want not set", set, n.String())
	}
	if err := Parse(fs, []string{"--value", "a", "--limit", "0", "--value", "b*", "id"}); err != nil {
		t.Fatal(err)
	}
	if v, set := n.Int(); !set || v != 0 || n.String() != "0" {
		t.Errorf("--limit 0: %d, set %v; want 0, set", v, set)
	}
	if !slices.Equal(*l, []string{"a", "b*"}) || l.String() != "a,b*" || !slices.Equal(fs.Args(), []string{"id"}) {
		t.Errorf("values %q, args %q; want [a b*] and [id]", *l, fs.Args())
	}
}
