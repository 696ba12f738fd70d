package config

import (
	"errors"
	"reflect"
	"testing"
)

// FuzzParse checks that Parse never panics, that it either returns a
// Config whose policies all validate or an ErrorList of positioned errors,
// and that it is deterministic.
func FuzzParse(f *testing.F) {
	f.Add([]byte(designFile))
	f.Add([]byte("policies:\n  - name: p\n    limits: [{name: r, limit: 1, window: 1s, by: [a]}]\n"))
	f.Add([]byte("schedules:\n  - {name: s, rate: 4/s, max_delay: 2s, max_queue: 3}\n"))
	f.Add([]byte("a: &a [x, x]\nb: [*a, *a]\n"))
	f.Add([]byte("forward_auth: {trusted_proxies: [\"::1\"], headers: {u: X-U}}\npolicies: [{name: p, limits: [{name: r, limit: 1, window: 1d}]}]\n"))
	f.Add([]byte("policies:\n  - name: p\n    limits:\n      - {name: m, by: [k], period: month, timezone: Europe/Berlin, limit: 9, history: 3}\n" +
		"      - {name: c, by: [k], credits: 5, refill: {to: 5, every: week}, week_start: monday, covers: m}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.yaml", data)
		if err != nil {
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error %v (%T) is not a non-empty ErrorList", err, err)
			}
			for _, e := range list {
				if e.Msg == "" || e.File != "fuzz.yaml" || e.Line < 0 {
					t.Fatalf("bad error %+v", e)
				}
			}
			return
		}
		if len(c.Policies)+len(c.Schedules) == 0 && c.Store == nil {
			t.Fatal("a valid config has no policies, schedules or store")
		}
		for i := range c.Policies {
			if err := c.Policies[i].Validate(); err != nil {
				t.Fatalf("policy %q does not validate: %v", c.Policies[i].Name, err)
			}
			if c.Policy(c.Policies[i].Name) != &c.Policies[i] {
				t.Fatalf("policy %q is not unique", c.Policies[i].Name)
			}
		}
		for i := range c.Schedules {
			if err := c.Schedules[i].Validate(); err != nil {
				t.Fatalf("schedule %q does not validate: %v", c.Schedules[i].Name, err)
			}
		}
		again, err := Parse("fuzz.yaml", data)
		if err != nil || !reflect.DeepEqual(c, again) {
			t.Fatalf("second Parse differs: %+v, %v", again, err)
		}
	})
}
