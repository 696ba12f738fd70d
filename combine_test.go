package sluice

import (
	"reflect"
	"testing"
	"time"

	"github.com/sluicerate/sluice/store"
)

// TestCombineOneOverwrites checks that combineOne sets every field of a
// Decision, whatever it held before, to what combineAll gives a zero one.
func TestCombineOneOverwrites(t *testing.T) {
	t.Parallel()
	for _, fits := range []bool{true, false} {
		req := &store.Request{Policy: "p",
			Checks:  []store.Check{{Rule: "r", Limit: 10, Window: time.Minute, Cost: 2, Values: []string{"v"}}},
			Results: []store.Result{{Fits: fits, Used: 10, Remaining: -1, ResetAfter: time.Second}}}
		if !fits {
			req.Results[0].Cause, req.Results[0].RetryAfter = store.CauseLimit, 3*time.Second
		}
		var want Decision
		want.combineAll(req, nil)

		var got Decision
		fill(reflect.ValueOf(&got).Elem())
		if reflect.DeepEqual(got, want) {
			t.Fatal("filling the Decision left it as combineAll's")
		}
		got.combineOne(req, nil)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("fits %v: combineOne over a filled Decision\n%+v\ncombineAll\n%+v", fits, got, want)
		}
	}
}

// fill sets every field of v, exported or not, to a value that is not its
// zero value.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			fill(v.Field(i))
		}
		return
	case reflect.Array:
		for i := range v.Len() {
			fill(v.Index(i))
		}
		return
	}
	v = reflect.NewAt(v.Type(), v.Addr().UnsafePointer()).Elem() // unexported fields too
	switch v.Kind() {
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int64:
		v.SetInt(7)
	case reflect.String:
		v.SetString("x")
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
	default:
		panic("fill: a field of kind " + v.Kind().String())
	}
}
