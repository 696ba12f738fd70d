package tracing

import (
	"testing"

	"github.com/sluicerate/sluice/store"
)

func TestFits(t *testing.T) {
	quota := func(quotaFits, creditsFit bool, shadow bool) *store.Request {
		return &store.Request{Policy: "api",
			Checks: []store.Check{
				{Rule: "monthly", Algorithm: store.Periodic, Shadow: shadow},
				{Rule: "overage", Algorithm: store.Credits, Covers: 1},
			},
			Results: []store.Result{{Fits: quotaFits}, {Fits: creditsFit}}}
	}
	for _, c := range []struct {
		name string
		req  *store.Request
		want bool
	}{
		{"quota fits", quota(true, true, false), true},
		{"credits pay the overage", quota(false, true, false), true},
		{"credits too low", quota(false, false, false), false},
		{"shadow quota, credits too low", quota(false, false, true), false},
		{"shadow quota, credits pay", quota(false, true, true), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Fits(c.req); got != c.want {
				t.Errorf("Fits = %v, want %v", got, c.want)
			}
		})
	}
}
