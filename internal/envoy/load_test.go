package envoy_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sluicerate/sluice/internal/envoy"
)

// TestLoadErrors: every problem with its file, line and column.
func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name, file, want string
	}{
		{"bad unit", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n",
			`a.yaml:4:24: invalid rate limit unit "fortnight"`},
		{"unknown key", "domain: d\ndescriptors:\n  - key: k\n    rate_limt: {unit: second}\n",
			`a.yaml:4:5: unknown key "rate_limt" in a descriptor; did you mean "rate_limit"?`},
		{"no domain", "descriptors: []\n", "a.yaml:1:1: the file has no domain"},
		{"no key", "domain: d\ndescriptors:\n  - value: v\n", "a.yaml:3:5: a descriptor has no key"},
		{"duplicate", "domain: d\ndescriptors:\n  - key: k\n  - key: k\n", `a.yaml:4:10: descriptor "k" is already defined at a.yaml:3:5`},
		{"unlimited with unit", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unlimited: true, unit: second}\n", "a.yaml:4:29: an unlimited rate_limit"},
		{"share without wildcard", "domain: d\ndescriptors:\n  - key: k\n    share_threshold: true\n", "a.yaml:4:22: share_threshold needs a wildcard value"},
		{"syntax", "domain: d\ndescriptors: [\n", "a.yaml:"},
		{"window of days with a negative rest", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {window: 2d-3h, requests_per_unit: 1}\n",
			`a.yaml:4:26: window: duration "2d-3h" is not valid`},
		{"window under 1µs", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {window: 0s, requests_per_unit: 1}\n",
			`a.yaml:4:26: window: duration "0s" is shorter than 1µs`},
		{"too large", "domain: d\n#" + strings.Repeat("x", 4<<20) + "\n", "a.yaml: the file is 4194316 bytes; a configuration file is at most 4194304"},
		{"budget past a quarter of the window", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 10, budget: 16s}\n",
			`a.yaml:4:17: budget 16s is not from 1ms to 15s`},
		{"budget under 1ms", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 10, budget: 1us}\n",
			`budget 1µs is not from 1ms to 15s`},
		{"budget not a duration", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: minute, requests_per_unit: 10, budget: soon}\n",
			`a.yaml:4:63: budget: duration "soon" is not valid`},
		{"replaces itself", "domain: d\ndescriptors:\n  - key: k\n    rate_limit: {unit: second, name: n, replaces: [{name: n}]}\n", `replaces itself`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := envoy.Parse([]envoy.Source{{Name: "a.yaml", Data: []byte(tt.file)}}, envoy.LoadOptions{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want it to contain %q", err, tt.want)
			}
			var e *envoy.Error
			if err != nil && !errors.As(err, &e) {
				t.Errorf("%v is not an *envoy.Error", err)
			}
		})
	}
	// Two files with one domain: an error, unless merged.
	srcs := []envoy.Source{{Name: "a.yaml", Data: []byte("domain: d\ndescriptors:\n  - key: a\n")}, {Name: "b.yaml", Data: []byte("domain: d\ndescriptors:\n  - key: b\n")}}
	if _, err := envoy.Parse(srcs, envoy.LoadOptions{}); err == nil || !strings.Contains(err.Error(), `b.yaml:1:9: domain "d" is already configured at a.yaml:1:9`) {
		t.Errorf("duplicate domain: %v", err)
	}
	if _, err := envoy.Parse(srcs, envoy.LoadOptions{MergeDomains: true}); err != nil {
		t.Errorf("merged: %v", err)
	}
}

// TestCalendarUnitsErrors: a calendar period is one unit, counted per
// period: unit_multiplier, algorithm and budget are refused with it, and
// accepted without the option.
func TestCalendarUnitsErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ limit, want string }{
		{"{unit: month, unit_multiplier: 2, requests_per_unit: 1}", "a.yaml:4:48: unit_multiplier 2 with calendar units (SLUICE_CALENDAR_UNITS): a period is one calendar month"},
		{"{unit: day, requests_per_unit: 10, algorithm: gcra}", "a.yaml:4:17: a calendar day (SLUICE_CALENDAR_UNITS) counts per period: it takes no algorithm or budget"},
		{"{unit: week, requests_per_unit: 10, budget: 1s}", "a.yaml:4:17: a calendar week (SLUICE_CALENDAR_UNITS) counts per period"},
	} {
		file := "domain: d\ndescriptors:\n  - key: k\n    rate_limit: " + tt.limit + "\n"
		_, err := envoy.Parse([]envoy.Source{{Name: "a.yaml", Data: []byte(file)}}, envoy.LoadOptions{CalendarUnits: true})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.limit, err, tt.want)
		}
		if _, err := envoy.Parse([]envoy.Source{{Name: "a.yaml", Data: []byte(file)}}, envoy.LoadOptions{}); err != nil {
			t.Errorf("%s without calendar units: %v", tt.limit, err)
		}
	}
}

// TestMetadataErrors: metadata that is not a mapping, or whose keys are
// not text, is refused where it is written.
func TestMetadataErrors(t *testing.T) {
	for _, tt := range []struct{ name, file, want string }{
		{"not a mapping", "domain: d\ndescriptors:\n  - key: k\n    metadata: [a]\n", "a.yaml:4:15: metadata is not a mapping"},
		{"key not text", "domain: d\ndescriptors:\n  - key: k\n    metadata: {x: {[a]: b}}\n", "a.yaml:4:20: metadata has a key that is not text"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := envoy.Parse([]envoy.Source{{Name: "a.yaml", Data: []byte(tt.file)}}, envoy.LoadOptions{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want it to contain %q", err, tt.want)
			}
		})
	}
}
