package httplimit

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/storetest"
)

// sfItem is one parsed item of a RateLimit or RateLimit-Policy field.
type sfItem struct {
	name   string
	params map[string]int64
}

// parseField parses the List field name of h with a structured-field
// parser, failing the test when it is not a valid List of String items
// with Integer parameters.
func parseField(t *testing.T, h http.Header, name string) []sfItem {
	t.Helper()
	values := h.Values(name)
	if len(values) == 0 {
		t.Fatalf("no %s field in %v", name, h)
	}
	list, err := httpsfv.UnmarshalList(values)
	if err != nil {
		t.Fatalf("%s: %q is not a structured-field List: %v", name, values, err)
	}
	var items []sfItem
	for _, m := range list {
		it, ok := m.(httpsfv.Item)
		if !ok {
			t.Fatalf("%s: member %#v is not an Item", name, m)
		}
		s, ok := it.Value.(string)
		if !ok {
			t.Fatalf("%s: item value %#v is not a String", name, it.Value)
		}
		item := sfItem{name: s, params: map[string]int64{}}
		for _, k := range it.Params.Names() {
			v, _ := it.Params.Get(k)
			n, ok := v.(int64)
			if !ok {
				t.Fatalf("%s: parameter %s=%#v is not an Integer", name, k, v)
			}
			item.params[k] = n
		}
		items = append(items, item)
	}
	return items
}

var notify = sluice.Policy{
	Name: "notify",
	Rules: []sluice.Rule{
		{Name: "global", Limit: 100, Window: 30 * time.Minute},
		{Name: "category", By: []string{"category"}, Limit: 10, Window: 30 * time.Minute},
	},
}

// checkFields checks the RateLimit-Policy and RateLimit fields of h against
// the decision d.
func checkFields(t *testing.T, h http.Header, d sluice.Decision) {
	t.Helper()
	policy := parseField(t, h, HeaderRateLimitPolicy)
	limit := parseField(t, h, HeaderRateLimit)
	if len(policy) != len(d.Limits()) || len(limit) != len(d.Limits()) {
		t.Fatalf("%d policy items and %d limit items for %d rules", len(policy), len(limit), len(d.Limits()))
	}
	for i, s := range d.Limits() {
		p, l := policy[i], limit[i]
		if p.name != s.Rule || l.name != s.Rule {
			t.Errorf("item %d named %q and %q, want %q", i, p.name, l.name, s.Rule)
		}
		if p.params["q"] != s.Limit {
			t.Errorf("%s: q = %d, want %d", s.Rule, p.params["q"], s.Limit)
		}
		if want := int64(s.Window / time.Second); p.params["w"] != want {
			t.Errorf("%s: w = %d, want %d", s.Rule, p.params["w"], want)
		}
		if l.params["r"] != s.Remaining {
			t.Errorf("%s: r = %d, want %d", s.Rule, l.params["r"], s.Remaining)
		}
		wantT := Seconds(s.ResetAfter)
		if !s.Fits {
			wantT = Seconds(s.RetryAfter)
		}
		if l.params["t"] != wantT {
			t.Errorf("%s: t = %d, want %d", s.Rule, l.params["t"], wantT)
		}
	}
}

func TestWriteHeadersMatchDecision(t *testing.T) {
	t.Parallel()
	clock := storetest.NewClock(storetest.T0)
	lim := sluice.NewLimiter(memstore.New(memstore.Config{Clock: clock.Now}), sluice.Config{})
	ctx := context.Background()
	errs := map[string]string{"category": "errors"}

	var d sluice.Decision
	for i := range 10 {
		var err error
		d, err = lim.Allow(ctx, &notify, errs)
		if err != nil || !d.Allowed {
			t.Fatalf("notification %d: %+v, %v", i, d, err)
		}
		clock.Advance(time.Minute)
	}
	h := http.Header{}
	WriteHeaders(h, d, HeaderOptions{})
	checkFields(t, h, d)
	if got := h.Get(HeaderRetryAfter); got != "" {
		t.Errorf("allowed: Retry-After = %q, want none", got)
	}
	limit := parseField(t, h, HeaderRateLimit)
	if limit[1].params["r"] != 0 || limit[0].params["r"] != 90 {
		t.Errorf("after 10: r = %d, %d; want 90, 0", limit[0].params["r"], limit[1].params["r"])
	}

	// The 11th, 10 minutes after the first, waits 20 minutes for it to
	// leave the 30-minute window.
	d, err := lim.Allow(ctx, &notify, errs)
	if err != nil || d.Allowed {
		t.Fatalf("11th: %+v, %v; want a denial", d, err)
	}
	h = http.Header{}
	WriteHeaders(h, d, HeaderOptions{Legacy: true})
	checkFields(t, h, d)
	if got, want := h.Get(HeaderRetryAfter), "1200"; got != want {
		t.Errorf("denied: Retry-After = %q, want %q", got, want)
	}
	if got := parseField(t, h, HeaderRateLimit)[1].params["t"]; got != 1200 {
		t.Errorf(`denied: "category" t = %d, want 1200`, got)
	}
	for name, want := range map[string]string{HeaderLimit: "10", HeaderRemaining: "0", HeaderReset: "1200"} {
		if got := h.Get(name); got != want {
			t.Errorf("legacy %s = %q, want %q", name, got, want)
		}
	}
	if got := h.Get(HeaderDegraded); got != "" {
		t.Errorf("Sluice-Degraded = %q on a healthy decision", got)
	}

	// Another category still fits; its own rule, with 9 left, is the
	// tightest.
	d, err = lim.Allow(ctx, &notify, map[string]string{"category": "billing"})
	if err != nil || !d.Allowed {
		t.Fatalf("billing: %+v, %v", d, err)
	}
	h = http.Header{}
	WriteHeaders(h, d, HeaderOptions{Legacy: true})
	checkFields(t, h, d)
	for name, want := range map[string]string{HeaderLimit: "10", HeaderRemaining: "9", HeaderReset: "1800"} {
		if got := h.Get(name); got != want {
			t.Errorf("legacy %s = %q, want %q", name, got, want)
		}
	}
}

func TestRetryAfterRounding(t *testing.T) {
	t.Parallel()
	cases := []struct {
		retry time.Duration
		want  string // "" means no Retry-After field
	}{
		{0, ""},
		{time.Microsecond, "1"},
		{999 * time.Millisecond, "1"},
		{time.Second, "1"},
		{time.Second + time.Microsecond, "2"},
		{2 * time.Second, "2"},
		{59*time.Second + 999999*time.Microsecond, "60"},
	}
	for _, c := range cases {
		t.Run(c.retry.String(), func(t *testing.T) {
			t.Parallel()
			d := sluice.Decision{
				Allowed:    false,
				RetryAfter: c.retry,
				DeniedBy:   "per-user",
			}
			d.SetLimits([]sluice.LimitStatus{{
				Rule: "per-user", Limit: 1, Window: time.Minute, Used: 1,
				RetryAfter: c.retry, ResetAfter: c.retry,
			}})
			h := http.Header{}
			WriteHeaders(h, d, HeaderOptions{})
			if got := h.Get(HeaderRetryAfter); got != c.want {
				t.Errorf("Retry-After for %v = %q, want %q", c.retry, got, c.want)
			}
			if c.want != "" {
				if got := parseField(t, h, HeaderRateLimit)[0].params["t"]; strconv.FormatInt(got, 10) != c.want {
					t.Errorf("t for %v = %d, want %s", c.retry, got, c.want)
				}
			}
		})
	}
}

func TestSeconds(t *testing.T) {
	t.Parallel()
	cases := []struct {
		d    time.Duration
		want int64
	}{
		{-time.Second, 0},
		{0, 0},
		{1, 1},
		{999 * time.Millisecond, 1},
		{time.Second, 1},
		{time.Second + time.Microsecond, 2},
		{time.Second + 1, 2},
		{30 * time.Minute, 1800},
	}
	for _, c := range cases {
		if got := Seconds(c.d); got != c.want {
			t.Errorf("Seconds(%v) = %d, want %d", c.d, got, c.want)
		}
	}
}

func TestWriteHeadersDegraded(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	WriteHeaders(h, sluice.Decision{Allowed: true, Degraded: true}, HeaderOptions{Legacy: true})
	if got := h.Get(HeaderDegraded); got != "1" {
		t.Errorf("Sluice-Degraded = %q, want 1", got)
	}
	for _, name := range []string{HeaderRateLimit, HeaderRateLimitPolicy, HeaderRetryAfter, HeaderLimit} {
		if v := h.Values(name); len(v) != 0 {
			t.Errorf("%s = %q on a degraded decision without rule statuses", name, v)
		}
	}
}

func TestWriteHeadersSubSecondWindow(t *testing.T) {
	t.Parallel()
	d := sluice.Decision{Allowed: true}
	d.SetLimits([]sluice.LimitStatus{{
		Rule: "burst", Limit: 5, Window: 100 * time.Millisecond, Used: 1, Remaining: 4,
		Fits: true, ResetAfter: 100 * time.Millisecond,
	}})
	h := http.Header{}
	WriteHeaders(h, d, HeaderOptions{})
	p := parseField(t, h, HeaderRateLimitPolicy)
	if p[0].params["w"] != 1 {
		t.Errorf("w of a 100ms window = %d, want 1 (w must be a positive integer)", p[0].params["w"])
	}
}

func TestWriteHeadersEscapesNames(t *testing.T) {
	t.Parallel()
	d := sluice.Decision{Allowed: true}
	d.SetLimits([]sluice.LimitStatus{
		{Rule: `say "hi" \o/`, Limit: 3, Window: time.Second, Remaining: 3, Fits: true},
		{Rule: "café", Limit: 3, Window: time.Second, Remaining: 3, Fits: true},
	})
	h := http.Header{}
	WriteHeaders(h, d, HeaderOptions{})
	items := parseField(t, h, HeaderRateLimit)
	if items[0].name != `say "hi" \o/` {
		t.Errorf("escaped name parsed as %q", items[0].name)
	}
	if items[1].name != "caf??" {
		t.Errorf("non-ASCII name parsed as %q, want caf??", items[1].name)
	}
}
