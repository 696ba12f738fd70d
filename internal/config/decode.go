package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicerate/sluice"
)

// maxNodes bounds the YAML nodes a file may expand to, aliases included, so
// that a file of nested aliases cannot make loading explode.
const maxNodes = 200_000

// nameRE is what policy, rule, schedule and attribute names may look like:
// they appear in store keys, metric labels and URLs.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

const nameRule = "names are 1 to 64 letters, digits, '-', '_' or '.', starting with a letter or digit"

// decoder reads a YAML file into schema types (schema.go), collecting every
// problem with its position. Its methods that read a value take its node,
// nil when absent, and return the zero value for an absent or invalid one.
type decoder struct {
	file  string
	errs  ErrorList
	nodes int
}

// decode reads data into a Config; the problems found are in d.errs, in
// file order.
func (d *decoder) decode(data []byte) *Config {
	var c *Config
	if root := d.document(data); root != nil {
		c = d.config(root)
	}
	slices.SortStableFunc(d.errs, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
	})
	return c
}

func (d *decoder) errorf(n *yaml.Node, format string, args ...any) {
	e := &Error{File: d.file, Msg: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	d.errs = append(d.errs, e)
}

// document returns the root of the file's one YAML document, or nil.
func (d *decoder) document(data []byte) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc, extra yaml.Node
	err := dec.Decode(&doc)
	if errors.Is(err, io.EOF) || err == nil && len(doc.Content) == 0 {
		d.errorf(nil, "the file is empty; add a policies: list (see docs/config.md)")
		return nil
	}
	if err == nil {
		if err = dec.Decode(&extra); err == nil {
			d.errorf(&extra, "the file holds a second YAML document; keep one document (remove the '---' separator)")
			return nil
		}
	}
	if !errors.Is(err, io.EOF) {
		d.syntaxError(err)
		return nil
	}
	return doc.Content[0]
}

// yamlLineRE finds the line in the YAML library's syntax errors.
var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func (d *decoder) syntaxError(err error) {
	for _, line := range strings.Split(err.Error(), "\n") {
		line = strings.TrimSpace(line)
		if m := yamlLineRE.FindStringSubmatch(line); m != nil {
			n, _ := strconv.Atoi(m[1])
			d.errs = append(d.errs, &Error{File: d.file, Line: n, Msg: "YAML syntax: " + m[2]})
		} else if line != "" && line != "yaml: unmarshal errors:" {
			d.errs = append(d.errs, &Error{File: d.file, Msg: "YAML syntax: " + strings.TrimPrefix(line, "yaml: ")})
		}
	}
}

// deref follows aliases.
func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// resolve follows aliases and counts n against maxNodes; nil when n is nil
// or the budget is spent.
func (d *decoder) resolve(n *yaml.Node) *yaml.Node {
	if n = deref(n); n == nil {
		return nil
	}
	if d.nodes++; d.nodes == maxNodes+1 {
		d.errorf(n, "the file expands to more than %d YAML nodes (nested aliases?); write it out plainly", maxNodes)
	}
	if d.nodes > maxNodes {
		return nil
	}
	return n
}

// fields reads the mapping n, described as what, into *v, a schema struct:
// each key sets the field its yaml tag names. It reports keys that are not
// plain, merged, unknown or repeated, and absent fields that have a need
// tag; false when n is not a mapping.
func (d *decoder) fields(n *yaml.Node, what string, v any) bool {
	s := reflect.ValueOf(v).Elem()
	keys := make([]string, s.NumField())
	for i := range keys {
		keys[i] = s.Type().Field(i).Tag.Get("yaml")
	}
	if n = d.resolve(n); n == nil {
		return false
	} else if n.Kind != yaml.MappingNode {
		d.errorf(n, "%s must be a mapping with the fields %s", what, strings.Join(keys, ", "))
		return false
	}
	first := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := d.resolve(n.Content[i])
		if k == nil {
			return false
		}
		j := slices.Index(keys, k.Value)
		switch line, dup := first[k.Value]; {
		case k.Kind != yaml.ScalarNode:
			d.errorf(k, "%s has a key that is not a plain name; keys are field names such as %s", what, keys[0])
		case k.Value == "<<":
			d.errorf(k, "merge keys (<<) are not supported in %s; write the fields out", what)
		case j < 0:
			d.errorf(k, "unknown field %q in %s; %s", k.Value, what, Suggest(k.Value, keys))
		case dup:
			d.errorf(k, "field %q is set twice in %s (first on line %d); keep one", k.Value, what, line)
		default:
			first[k.Value] = k.Line
			s.Field(j).Field(0).Set(reflect.ValueOf(n.Content[i+1]))
		}
	}
	for j, key := range keys {
		if _, set := first[key]; !set && s.Type().Field(j).Tag.Get("need") != "" {
			d.errorf(n, "%s has no %s; add %s", what, key, s.Type().Field(j).Tag.Get("need"))
		}
	}
	return true
}

// section reads the mapping v, described as what; nil when v is absent or
// not a mapping.
func section[T any](d *decoder, v node[T], what string) *T {
	if t := new(T); v.Node != nil && d.fields(v.Node, what, t) {
		return t
	}
	return nil
}

// items returns the elements of the list v, described as what.
func items[T any](d *decoder, v node[[]T], what, example string) []*yaml.Node {
	switch n := d.resolve(v.Node); {
	case n == nil:
	case n.Kind != yaml.SequenceNode:
		d.errorf(n, "%s must be a list, such as %s", what, example)
	default:
		return n.Content
	}
	return nil
}

// describe names the i-th list item n of kind in messages: by its name
// field when it has a plain one (`policy "notify"`), else by its position
// (`policy 2`). It does not count against the node budget.
func describe(n *yaml.Node, kind string, i int) string {
	if n = deref(n); n.Kind == yaml.MappingNode {
		for j := 0; j+1 < len(n.Content); j += 2 {
			k, v := n.Content[j], n.Content[j+1]
			if k.Kind == yaml.ScalarNode && k.Value == "name" && v.Kind == yaml.ScalarNode && nameRE.MatchString(v.Value) {
				return fmt.Sprintf("%s %q", kind, v.Value)
			}
		}
	}
	return fmt.Sprintf("%s %d", kind, i+1)
}

// unique reports whether no earlier list item, recorded in first, has the
// name of the item n, and records it. Of a repeated name it reports format
// with args, the name and the first item's line.
func (d *decoder) unique(first map[string]int, name string, n *yaml.Node, format string, args ...any) bool {
	if line, dup := first[name]; dup {
		d.errorf(deref(n), format, append(args, name, line)...)
		return false
	}
	first[name] = deref(n).Line
	return true
}

// scalar returns the single value n, described as what; nil when it is
// absent, or null or not a single value, which it reports.
func (d *decoder) scalar(n *yaml.Node, what, example string) *yaml.Node {
	switch n = d.resolve(n); {
	case n == nil:
	case n.Kind != yaml.ScalarNode:
		d.errorf(n, "%s must be a single value such as %s", what, example)
	case n.Tag == "!!null":
		d.errorf(n, "%s is empty; give it a value such as %s", what, example)
	default:
		return n
	}
	return nil
}

// text is the value of the scalar s; "" when s is nil.
func text(s *yaml.Node) string {
	if s == nil {
		return ""
	}
	return s.Value
}

func (d *decoder) str(v node[string], what, example string) string {
	return text(d.scalar(v.Node, what, example))
}

// oneOf reads a string that must be one of valid; use lists them.
func (d *decoder) oneOf(v node[string], what, use string, valid ...string) string {
	s := d.scalar(v.Node, what, valid[0])
	if s != nil && !slices.Contains(valid, s.Value) {
		d.errorf(s, "%s is %q; use %s", what, s.Value, use)
		return ""
	}
	return text(s)
}

// name reads a policy, rule, schedule or attribute name.
func (d *decoder) name(v node[string], what string) string {
	s := d.scalar(v.Node, what, "checkout")
	if s != nil && !nameRE.MatchString(s.Value) {
		d.errorf(s, "%s %q is not a valid name; %s", what, s.Value, nameRule)
		return ""
	}
	return text(s)
}

func (d *decoder) integer(v node[int64], what, example string) int64 {
	s := d.scalar(v.Node, what, example)
	if s == nil {
		return 0
	}
	var i int64
	_, err := strconv.ParseInt(s.Value, 10, 64)
	switch {
	case s.Tag == "!!int" && s.Decode(&i) == nil:
		return i
	case s.Tag == "!!int":
		d.errorf(s, "%s %s is not a whole number that fits in 64 bits", what, s.Value)
	case s.Tag == "!!float":
		d.errorf(s, "%s must be a whole number, not %s", what, s.Value)
	case s.Tag != "!!str":
		d.errorf(s, "%s must be a whole number such as %s, not %s", what, example, s.Value)
	case err == nil:
		d.errorf(s, "%s must be a number, not the string %q; remove the quotes", what, s.Value)
	default:
		d.errorf(s, "%s must be a whole number such as %s, not %q", what, example, s.Value)
	}
	return 0
}

func (d *decoder) boolean(v node[bool], what string) bool {
	s := d.scalar(v.Node, what, "true")
	var b bool
	if s != nil && (s.Tag != "!!bool" || s.Decode(&b) != nil) {
		d.errorf(s, "%s must be true or false, not %q", what, s.Value)
	}
	return b
}

// duration reads a duration; positive requires it to be more than zero.
func (d *decoder) duration(v node[time.Duration], what string, positive bool) time.Duration {
	s := d.scalar(v.Node, what, "30m")
	if s == nil {
		return 0
	}
	t, err := parseDuration(s.Value)
	if err != nil {
		d.errorf(s, "%s: %v", what, err)
	} else if positive && t == 0 {
		d.errorf(s, "%s is zero; it must be longer than zero, such as 1s or 30m", what)
	}
	return t
}

func (d *decoder) rate(v node[sluice.Rate]) sluice.Rate {
	s := d.scalar(v.Node, "rate", "4/s")
	if s == nil {
		return sluice.Rate{}
	}
	r, err := parseRate(s.Value)
	if err != nil {
		d.errorf(s, "%v", err)
	}
	return r
}
