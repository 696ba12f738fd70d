// Package cliflag parses a command's flags as sluice's command line
// reports them: -h prints the command's help, and a bad flag is one line
// that names the closest flag and where the help is, not the whole help.
package cliflag

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/sluicerate/sluice/internal/yamlfile"
)

// Parse parses args into fs, whose output and name it uses, leaving the
// arguments after the flags in fs.Args. On -h it prints fs.Usage (or the
// defaults) and returns flag.ErrHelp. A bad flag is an error of one line,
// "unknown flag --polcy; did you mean --policy? (see sluice check -h)";
// fs prints nothing of it.
func Parse(fs *flag.FlagSet, args []string) error {
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.SetOutput(out)
	fs.Usage = usage
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		if fs.Usage != nil {
			fs.Usage()
		} else {
			fs.PrintDefaults()
		}
		return flag.ErrHelp
	}
	msg := err.Error()
	if name, unknown := strings.CutPrefix(msg, "flag provided but not defined: -"); unknown {
		msg = "unknown flag --" + name
		if c := Closest(fs, name); c != "" {
			msg += "; did you mean --" + c + "?"
		}
	}
	return fmt.Errorf("%s (see sluice %s -h)", msg, fs.Name())
}

// Closest returns the flag of fs closest to name: within two edits, or
// one that name begins (of three letters or more); else "".
func Closest(fs *flag.FlagSet, name string) string {
	var names []string
	fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	name = strings.TrimLeft(strings.SplitN(name, "=", 2)[0], "-")
	if c, ok := yamlfile.Closest(name, names); ok {
		return c
	}
	for _, n := range names { // a prefix: --pol for --policy
		if len(name) >= 3 && strings.HasPrefix(n, name) {
			return n
		}
	}
	return ""
}

// List is a flag that may be repeated: its values, in order.
type List []string

func (l *List) String() string     { return strings.Join(*l, ",") }
func (l *List) Set(s string) error { *l = append(*l, s); return nil }

// OptionalInt is a number flag that may be left out: no default to show.
// Its zero value is a flag not given.
type OptionalInt struct {
	n   int64
	set bool
}

// Int returns the number, and whether the flag was given.
func (o *OptionalInt) Int() (int64, bool) { return o.n, o.set }

func (o *OptionalInt) String() string {
	if o == nil || !o.set {
		return ""
	}
	return strconv.FormatInt(o.n, 10)
}

func (o *OptionalInt) Set(s string) error {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return errors.New("not a whole number")
	}
	o.n, o.set = n, true
	return nil
}
