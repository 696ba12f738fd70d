package config

import (
	"reflect"
	"testing"
	"time"
)

// TestSchemaTags checks that every form and bound tag of the schema names an
// entry of forms or bounds, so that a misspelt tag cannot drop a check, and
// that bounds are only on numbers and durations.
func TestSchemaTags(t *testing.T) {
	t.Parallel()
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || seen[typ] {
			return
		}
		seen[typ] = true
		v, isNode := typ.FieldByName("V")
		if isNode {
			walk(v.Type)
			return
		}
		for i := range typ.NumField() {
			f := typ.Field(i)
			if form := f.Tag.Get("form"); form != "" {
				if _, ok := forms[form]; !ok {
					t.Errorf("%s.%s: form %q is not in forms", typ.Name(), f.Name, form)
				}
			}
			if bound := f.Tag.Get("bound"); bound != "" {
				if _, ok := bounds[bound]; !ok {
					t.Errorf("%s.%s: bound %q is not in bounds", typ.Name(), f.Name, bound)
				}
				if v, _ := f.Type.FieldByName("V"); v.Type != reflect.TypeFor[int64]() && v.Type != reflect.TypeFor[time.Duration]() {
					t.Errorf("%s.%s: bound on a %s", typ.Name(), f.Name, v.Type)
				}
			}
			walk(f.Type)
		}
	}
	walk(reflect.TypeFor[fileYAML]())
	for _, want := range []string{"policyYAML", "ruleYAML", "overrideYAML", "scheduleYAML", "storeYAML", "redisYAML", "tlsYAML", "forwardAuthYAML"} {
		found := false
		for typ := range seen {
			found = found || typ.Name() == want
		}
		if !found {
			t.Errorf("the walk never reached %s", want)
		}
	}
}
