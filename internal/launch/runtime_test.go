package launch

import "testing"

func TestGCPercent(t *testing.T) {
	env := func(gogc string) func(string) string {
		return func(k string) string {
			if k == "GOGC" {
				return gogc
			}
			return ""
		}
	}
	for _, tc := range []struct {
		name  string
		gogc  string
		redis bool
		want  int
		set   bool
	}{
		{"redis, GOGC unset", "", true, redisGCPercent, true},
		{"redis, GOGC set", "100", true, 0, false},
		{"redis, GOGC off", "off", true, 0, false},
		{"memory", "", false, 0, false},
	} {
		got, set := gcPercent(env(tc.gogc), tc.redis)
		if got != tc.want || set != tc.set {
			t.Errorf("%s: gcPercent = %d, %v; want %d, %v", tc.name, got, set, tc.want, tc.set)
		}
	}
}
