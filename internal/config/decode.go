package config

import (
	"cmp"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/yamlfile"
)

// decoder reads a YAML file into the schema (schema.go), each value by its
// Go type, and checks it (validate.go), collecting every problem found.
type decoder struct {
	yamlfile.File
	disk bool // the file is on disk: the files it names must be readable
}

// decode reads data into a Config; d.Errs holds the problems, in file order.
func (d *decoder) decode(data []byte) *Config {
	var c *Config
	if root := d.Document(data, "the file is empty; add a policies: list (see docs/config.md)",
		"the file holds a second YAML document; keep one document (remove the '---' separator)"); root != nil {
		var f node[fileYAML]
		d.value(root, reflect.ValueOf(&f).Elem(), "the file", "", "")
		c = d.config(&f.V, root)
	}
	slices.SortStableFunc(d.Errs, func(a, b *Error) int {
		return cmp.Or(cmp.Compare(a.Line, b.Line), cmp.Compare(a.Column, b.Column))
	})
	return c
}

// value reads n into v, a schema value, by v's type: what names it in
// messages, owner is the mapping it is in, tag holds its field's tags. A
// node[T] also keeps n, what and whether it was read without a problem.
func (d *decoder) value(n *yaml.Node, v reflect.Value, what, owner string, tag reflect.StructTag) {
	if n = d.Resolve(n); n == nil {
		return
	}
	if f, isNode := v.Addr().Interface().(wrapper); isNode {
		var ok *bool
		v, ok = f.wrap(n, what)
		defer func(nerr int) { *ok = len(d.Errs) == nerr }(len(d.Errs))
	}
	switch p := v.Addr().Interface().(type) {
	case *string, *int64, *bool, *time.Duration, *sluice.Rate, *netip.Prefix:
		d.scalar(n, p, what, tag)
	case *map[string]string:
		d.attributeMap(n, p, what, tag)
	default:
		switch v.Kind() {
		case reflect.Pointer: // a section
			v.Set(reflect.New(v.Type().Elem()))
			d.fields(n, what, v.Elem())
		case reflect.Slice:
			d.list(n, v, what, owner, tag)
		default: // the mapping of a list item, or of the file
			d.fields(n, what, v)
		}
	}
}

// fields reads the mapping n, described as what, into the schema struct v,
// by yaml tags, reporting unknown keys and absent fields with a need tag.
func (d *decoder) fields(n *yaml.Node, what string, v reflect.Value) {
	t := v.Type()
	keys := make([]string, t.NumField())
	for i := range keys {
		keys[i] = t.Field(i).Tag.Get("yaml")
	}
	if n.Kind != yaml.MappingNode {
		d.Errorf(n, "%s must be a mapping with the fields %s", what, strings.Join(keys, ", "))
		return
	}
	d.entries(n, what, "field", func(k, val *yaml.Node) bool {
		j := slices.Index(keys, k.Value)
		if j < 0 {
			d.Errorf(k, "unknown field %q in %s; %s", k.Value, what, yamlfile.Suggest(k.Value, keys))
		} else {
			d.value(val, v.Field(j), cmp.Or(t.Field(j).Tag.Get("what"), k.Value), what, t.Field(j).Tag)
		}
		return j >= 0
	})
	for j, key := range keys {
		if need := t.Field(j).Tag.Get("need"); need != "" && v.Field(j).FieldByName("Node").IsNil() {
			d.Errorf(n, "%s has no %s; add %s", what, key, need)
		}
	}
}

// entries calls set with each key and value of the mapping n, described as
// what, reporting keys that are not plain, merge keys and keys set twice
// (noun: a field or an attribute). set reports whether it took the key, so
// that an unknown key is reported as unknown every time.
func (d *decoder) entries(n *yaml.Node, what, noun string, set func(k, v *yaml.Node) bool) {
	first := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := d.Resolve(n.Content[i])
		if k == nil {
			return
		}
		if at := n.Content[i]; k != at { // an alias: report where it is used
			resolved := *k
			resolved.Line, resolved.Column = at.Line, at.Column
			k = &resolved
		}
		switch line, dup := first[k.Value]; {
		case k.Kind != yaml.ScalarNode:
			d.Errorf(k, "%s has a key that is not a plain name; keys are %s names", what, noun)
		case k.Value == "<<":
			d.Errorf(k, "merge keys (<<) are not supported in %s; write the %ss out", what, noun)
		case dup:
			d.Errorf(k, "%s %q is set twice in %s (first on line %d); keep one", noun, k.Value, what, line)
		case set(k, n.Content[i+1]):
			first[k.Value] = k.Line
		}
	}
}

// attributeMap reads the mapping n of attribute names to strings, such as
// match or headers, into *m; one with a nonempty tag must not be empty, and
// the names take the forms of its keys tag, by default name.
func (d *decoder) attributeMap(n *yaml.Node, m *map[string]string, what string, tag reflect.StructTag) {
	if _, nonempty := tag.Lookup("nonempty"); n.Kind != yaml.MappingNode || nonempty && len(n.Content) == 0 {
		d.Errorf(n, "%s must map attribute names to values, such as %s", what, tag.Get("eg"))
		return
	}
	*m = map[string]string{}
	keys := reflect.StructTag(`form:"` + cmp.Or(tag.Get("keys"), "name") + `"`)
	d.entries(n, what, "attribute", func(k, v *yaml.Node) bool {
		var a, s string
		d.scalar(k, &a, "attribute name", keys)
		d.value(v, reflect.ValueOf(&s).Elem(), tag.Get("item"), what, tag)
		(*m)[a] = s
		return true
	})
}

// list reads the list n into v; an item that is not valid is a zero value.
func (d *decoder) list(n *yaml.Node, v reflect.Value, what, owner string, tag reflect.StructTag) {
	if n.Kind != yaml.SequenceNode {
		d.Errorf(n, "%s must be a list, such as %s", what, tag.Get("eg"))
		return
	}
	for i, item := range n.Content {
		e, name := reflect.New(v.Type().Elem()).Elem(), tag.Get("item")
		if _, mapping := e.Addr().Interface().(wrapper); mapping {
			name = describe(item, name, i, owner)
		}
		d.value(item, e, name, owner, tag)
		v.Set(reflect.Append(v, e))
	}
}

// describe names the i-th list item n of kind in messages: by its name
// field when it has a plain one (`policy "notify"`), else by its position
// (`policy 2`); and, unless owner is the file, of its owner.
func describe(n *yaml.Node, kind string, i int, owner string) string {
	what := fmt.Sprintf("%s %d", kind, i+1)
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	for j := 0; n.Kind == yaml.MappingNode && j+1 < len(n.Content); j += 2 {
		k, v := n.Content[j], n.Content[j+1]
		if k.Kind == yaml.ScalarNode && k.Value == "name" && v.Kind == yaml.ScalarNode && nameRE.MatchString(v.Value) {
			what = fmt.Sprintf("%s %q", kind, v.Value)
			break
		}
	}
	if owner != "the file" {
		what += " of " + owner
	}
	return what
}

// scalar reads the single value n into p, a *string, *int64, *bool,
// *time.Duration, *sluice.Rate or *netip.Prefix.
func (d *decoder) scalar(n *yaml.Node, p any, what string, tag reflect.StructTag) {
	eg := tag.Get("eg")
	switch {
	case n.Kind != yaml.ScalarNode:
		d.Errorf(n, "%s must be a single value, as in %s", what, eg)
		return
	case n.Tag == "!!null":
		d.Errorf(n, "%s is empty; give it a value, as in %s", what, eg)
		return
	}
	var err error
	switch p := p.(type) {
	case *string:
		*p = n.Value
		for _, form := range strings.Split(tag.Get("form"), ",") {
			if f, ok := forms[form]; ok && err == nil && !f.ok(n.Value) {
				err = fmt.Errorf(f.msg, what, n.Value)
			}
		}
	case *int64:
		_, serr := strconv.ParseInt(n.Value, 10, 64)
		switch {
		case n.Tag == "!!str" && serr == nil:
			err = fmt.Errorf("%s must be a number, not the string %q; remove the quotes", what, n.Value)
		case n.Tag != "!!int":
			err = fmt.Errorf("%s must be a whole number such as %s, not %s", what, eg, n.Value)
		case n.Decode(p) != nil:
			err = fmt.Errorf("%s %s is not a whole number that fits in 64 bits", what, n.Value)
		}
	case *bool:
		if n.Tag != "!!bool" || n.Decode(p) != nil {
			err = fmt.Errorf("%s must be true or false, not %q", what, n.Value)
		}
	case *time.Duration:
		if *p, err = yamlfile.Duration(n); err != nil {
			err = fmt.Errorf("%s: %w", what, err)
		}
	case *sluice.Rate:
		*p, err = parseRate(n.Value)
	case *netip.Prefix:
		if *p, err = parsePrefix(n.Value); err != nil {
			err = fmt.Errorf("%s %w", what, err)
		}
	}
	x := reflect.ValueOf(p).Elem()
	if b, bounded := bounds[tag.Get("bound")]; bounded && err == nil && (x.Int() < b.lo || x.Int() > b.hi) {
		is := fmt.Sprint(x)
		if x.IsZero() {
			is = "zero"
		}
		err = fmt.Errorf("%s is %s; %s", what, is, b.fix)
	}
	if err != nil {
		d.Errorf(n, "%v", err)
	}
}
