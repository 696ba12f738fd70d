package edge

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/storetest"
)

// request is what the tests' keys read: attribute values, and the errors
// of the keys that fail.
type request map[string]any

var errAbsent = errors.New("absent")

// read is the key of attribute a: its value in the request, absent when
// the request lacks it, and the request's error for it when that is one.
func read(a string) Key[request] {
	return func(r request) (string, error) {
		switch v := r[a].(type) {
		case string:
			return v, nil
		case error:
			return "", v
		}
		return "", fmt.Errorf("no %s: %w", a, errAbsent)
	}
}

func newPolicy(name string, limit int64, by ...string) *sluice.Policy {
	return &sluice.Policy{Name: name, Rules: []sluice.Rule{{Name: name + "-rule", By: by, Limit: limit, Window: time.Minute}}}
}

// newLimiter is a Limiter over a memory store with a frozen clock.
func newLimiter(t *testing.T) *sluice.Limiter {
	t.Helper()
	store := memstore.New(memstore.Config{Clock: storetest.NewClock(storetest.T0).Now})
	t.Cleanup(func() { _ = store.Close() })
	return sluice.NewLimiter(store, sluice.Config{})
}

func mustNew(t *testing.T, lim *sluice.Limiter, logs *bytes.Buffer, ps ...*sluice.Policy) *Edge[request] {
	t.Helper()
	cfg := Config[request]{Limiter: lim, Policies: ps, Keys: read, Absent: errAbsent}
	if logs != nil {
		cfg.Log = PackageLog(slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), "test", "request")
	}
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// used is how many units policy p's window holds for attrs.
func used(t *testing.T, lim *sluice.Limiter, p *sluice.Policy, attrs map[string]string) int64 {
	t.Helper()
	d, err := lim.Peek(context.Background(), p, attrs, 1)
	if err != nil {
		t.Fatal(err)
	}
	return d.Limits()[0].Used - 1
}

func TestDecideAllowsThenDenies(t *testing.T) {
	t.Parallel()
	lim := newLimiter(t)
	user, global := newPolicy("user", 1, "user"), newPolicy("global", 10)
	e := mustNew(t, lim, nil, user, global)
	ann := request{"user": "ann"}

	o := e.Decide(context.Background(), ann, Call{Cost: 1})
	if o.Kind != Allowed || len(o.Decisions()) != 2 || o.Policy != global || o.Class().Status != http.StatusOK {
		t.Fatalf("first = %+v, want allowed by both policies", o)
	}
	o = e.Decide(context.Background(), ann, Call{Cost: 1})
	if o.Kind != Denied || o.Policy != user || len(o.Decisions()) != 1 || o.Decision().DeniedBy != "user-rule" {
		t.Fatalf("second = %+v, want denied by user, global not decided", o)
	}
	if got, want := o.Class(), (Class{Status: http.StatusTooManyRequests}); got != want {
		t.Errorf("class %+v, want %+v", got, want)
	}
	if got := used(t, lim, global, nil); got != 1 {
		t.Errorf("global holds %d, want 1: a policy after the denial records nothing", got)
	}
}

func TestDecideOps(t *testing.T) {
	t.Parallel()
	e := mustNew(t, newLimiter(t), nil, newPolicy("p", 5, "user"))
	attrs := map[string]string{"user": "ann"}
	for _, c := range []struct {
		op   Op
		cost int64
		want Kind
		used int64 // as the decision leaves the window
	}{
		{OpPeek, 2, Allowed, 2},
		{OpDecide, 2, Allowed, 2}, // the peek recorded nothing
		{OpRecord, 3, Allowed, 5},
		{OpDecide, 1, Denied, 5},
	} {
		o := e.DecideAttrs(context.Background(), attrs, Call{Cost: c.cost, Op: c.op})
		if d := o.Decision(); o.Kind != c.want || d.Limits()[0].Used != c.used {
			t.Errorf("%v of %d: %v, used %d; want %v, used %d", c.op, c.cost, o.Kind, d.Limits()[0].Used, c.want, c.used)
		}
	}
}

func TestBadInput(t *testing.T) {
	t.Parallel()
	errBroken := errors.New("broken header")
	cases := []struct {
		name    string
		req     request
		cost    int64
		attr    string
		code    string
		keyErr  error
		logged  string
		noError bool
	}{
		{"cost 0", request{"user": "ann"}, 0, "", "invalid_cost", nil, "", false},
		{"cost above the limit", request{"user": "ann"}, 3, "", "cost_exceeds_limit", nil, "", false},
		{"not UTF-8", request{"user": "\xff"}, 1, "user", "invalid_attribute", nil, "not valid UTF-8", false},
		{"cannot be read", request{"user": errBroken}, 1, "user", "bad_request", errBroken, "broken header", false},
		{"absent and needed", request{}, 1, "user", "missing_attribute", errAbsent, "no user: absent", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var logs bytes.Buffer
			lim := newLimiter(t)
			p := newPolicy("p", 2, "user")
			o := mustNew(t, lim, &logs, p).Decide(context.Background(), c.req, Call{Cost: c.cost})
			if o.Kind != BadInput || o.Attribute != c.attr || o.Class().Code != c.code || o.Class().Status != http.StatusBadRequest {
				t.Fatalf("outcome %+v (class %+v), want bad input of %q, code %s", o, o.Class(), c.attr, c.code)
			}
			if !errors.Is(o.KeyErr, c.keyErr) || (c.keyErr == nil) != (o.KeyErr == nil) {
				t.Errorf("key error %v, want %v", o.KeyErr, c.keyErr)
			}
			if !strings.Contains(logs.String(), c.logged) || (c.logged != "" && !strings.Contains(logs.String(), "cannot read a rate-limit key")) {
				t.Errorf("logs %q, want the key line with %q", logs.String(), c.logged)
			}
			if got := used(t, lim, p, map[string]string{"user": "ann"}); got != 0 {
				t.Errorf("%d recorded by bad input", got)
			}
		})
	}
}

func TestAbsentAttribute(t *testing.T) {
	t.Parallel()
	lim := newLimiter(t)
	ip, user := newPolicy("ip", 10, "ip"), newPolicy("user", 10, "user")

	// A policy that does not name the absent attribute decides without it.
	o := mustNew(t, lim, nil, ip).Decide(context.Background(), request{"ip": "192.0.2.1"}, Call{Cost: 1})
	if o.Kind != Allowed {
		t.Fatalf("ip alone = %+v, want allowed", o)
	}
	// A later policy that needs it fails the request before the earlier
	// one records it.
	o = mustNew(t, lim, nil, ip, user).Decide(context.Background(), request{"ip": "192.0.2.1"}, Call{Cost: 1})
	if o.Kind != BadInput || o.Attribute != "user" || o.Policy != user || !errors.Is(o.Err, sluice.ErrMissingAttribute) || !errors.Is(o.KeyErr, errAbsent) {
		t.Fatalf("ip then user = %+v, want bad input: user missing", o)
	}
	if got := used(t, lim, ip, map[string]string{"ip": "192.0.2.1"}); got != 1 {
		t.Errorf("ip holds %d, want 1: the rejected request recorded nothing", got)
	}
}

func TestConditionalRules(t *testing.T) {
	t.Parallel()
	lim := newLimiter(t)
	// Per user when the user is known, else per IP; free users have a
	// lower limit.
	p := &sluice.Policy{Name: "api", Rules: []sluice.Rule{
		{Name: "per-user", By: []string{"user"}, Optional: true, Limit: 3, Window: time.Minute,
			Overrides: []sluice.Override{{Match: map[string]string{"plan": "free"}, Limit: 1}}},
		{Name: "per-ip", By: []string{"ip"}, Unless: []string{"user"}, Limit: 2, Window: time.Minute},
	}}
	audit := newPolicy("audit", 100, "ip")
	e := mustNew(t, lim, nil, audit, p)
	if got, want := e.attrs, []string{"ip", "user", "plan"}; !slices.Equal(got, want) {
		t.Errorf("attributes read %q, want %q", got, want)
	}
	cases := []struct {
		req  request
		want []Kind
	}{
		{request{"ip": "192.0.2.1"}, []Kind{Allowed, Allowed, Denied}},
		{request{"ip": "192.0.2.1", "user": "ann", "plan": "free"}, []Kind{Allowed, Denied}},
		{request{"ip": "192.0.2.1", "user": "bob", "plan": "paid"}, []Kind{Allowed, Allowed, Allowed, Denied}},
	}
	for _, c := range cases {
		for i, want := range c.want {
			if o := e.Decide(context.Background(), c.req, Call{Cost: 1}); o.Kind != want {
				t.Errorf("%v, request %d: %+v, want %v", c.req, i, o, want)
			}
		}
	}
}

func TestMissingNamesTheAttribute(t *testing.T) {
	t.Parallel()
	p := &sluice.Policy{Name: "p", Rules: []sluice.Rule{
		{Name: "a", By: []string{"ip"}, Limit: 1, Window: time.Second},
		{Name: "b", By: []string{"user", "ip"}, Limit: 1, Window: time.Second},
	}}
	o := mustNew(t, newLimiter(t), nil, p).Decide(context.Background(), request{}, Call{Cost: 1})
	if o.Kind != BadInput || o.Attribute != "ip" || !strings.Contains(o.Err.Error(), `attribute "ip"`) {
		t.Errorf("outcome %+v, want ip missing, as the Limiter says", o)
	}
}

func TestDecideAttrsUTF8(t *testing.T) {
	t.Parallel()
	lim := newLimiter(t)
	e := mustNew(t, lim, nil, newPolicy("p", 10, "user", "ip"))
	o := e.DecideAttrs(context.Background(), map[string]string{"user": "ann", "ip": "\xfe"}, Call{Cost: 1})
	if o.Kind != BadInput || o.Attribute != "ip" || !errors.Is(o.Err, ErrInvalidAttribute) || o.Class().Code != "invalid_attribute" {
		t.Errorf("outcome %+v, want ip invalid", o)
	}
	// An attribute no rule names is not read.
	o = e.DecideAttrs(context.Background(), map[string]string{"user": "ann", "ip": "192.0.2.1", "extra": "\xff"}, Call{Cost: 1})
	if o.Kind != Allowed {
		t.Errorf("outcome %+v, want allowed", o)
	}
}

func TestShadowLogged(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	p := newPolicy("p", 1)
	p.Shadow = true
	e := mustNew(t, newLimiter(t), &logs, p)
	for range 2 {
		if o := e.DecideAttrs(context.Background(), nil, Call{Cost: 1}); o.Kind != Allowed {
			t.Fatalf("outcome %+v, want allowed: a shadow policy never denies", o)
		}
	}
	if want := `msg="test: shadow policy would deny" policy=p denied_by=p-rule retry_after=1m0s`; !strings.Contains(logs.String(), want) {
		t.Errorf("logs %q, want %q", logs.String(), want)
	}
}

func TestNewErrors(t *testing.T) {
	t.Parallel()
	lim := newLimiter(t)
	cases := []struct {
		name string
		cfg  Config[request]
		want string
	}{
		{"no limiter", Config[request]{Policies: []*sluice.Policy{newPolicy("p", 1)}}, "Config.Limiter is nil"},
		{"no policies", Config[request]{Limiter: lim}, "Config.Policies is empty"},
		{"nil policy", Config[request]{Limiter: lim, Policies: []*sluice.Policy{nil}}, "Config.Policies[0] is nil"},
		{"invalid policy", Config[request]{Limiter: lim, Policies: []*sluice.Policy{newPolicy("p", -1)}}, "limit -1 is negative"},
		{"listed twice", Config[request]{Limiter: lim, Policies: []*sluice.Policy{newPolicy("p", 1), newPolicy("p", 2)}}, `policy "p" is listed twice`},
		{"no key", Config[request]{Limiter: lim, Policies: []*sluice.Policy{newPolicy("p", 1, "user")}}, `rule "p-rule" is keyed by attribute "user", which has no function in Config.Keys`},
		{"no key for a condition", Config[request]{Limiter: lim, Policies: []*sluice.Policy{{Name: "p", Rules: []sluice.Rule{
			{Name: "free", Limit: 1, Window: time.Second, Match: map[string]string{"plan": "free"}}}}}}, `rule "free" applies by attribute "plan", which has no function`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if _, err := New(c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("New = %v, want an error containing %q", err, c.want)
			}
		})
	}
	cfg := Config[request]{Limiter: lim, Policies: []*sluice.Policy{newPolicy("p", 1, "user")}, KeysOptional: true}
	if _, err := New(cfg); err != nil {
		t.Errorf("New with optional keys = %v", err)
	}
}

func TestSet(t *testing.T) {
	t.Parallel()
	lim := newLimiter(t)
	s, err := NewSet(Config[request]{Limiter: lim, Policies: []*sluice.Policy{newPolicy("a", 1, "user"), newPolicy("b", 1, "ip")},
		Keys: func(a string) Key[request] {
			if a == "user" {
				return read(a)
			}
			return nil // ip only comes with the attributes given
		}, KeysOptional: true, Absent: errAbsent})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if o := s.Decide(ctx, "a", request{"user": "ann"}, Call{Cost: 1}); o.Kind != Allowed || o.Policy.Name != "a" {
		t.Errorf("a = %+v", o)
	}
	if o := s.DecideAttrs(ctx, "b", map[string]string{"ip": "192.0.2.1"}, Call{Cost: 1}); o.Kind != Allowed || o.Policy.Name != "b" {
		t.Errorf("b = %+v", o)
	}
	if o := s.Decide(ctx, "b", request{"ip": "192.0.2.1"}, Call{Cost: 1}); o.Kind != BadInput || o.Attribute != "ip" || o.KeyErr != nil {
		t.Errorf("b read with keys = %+v, want ip missing: it has no key", o)
	}
	o := s.DecideAttrs(ctx, "nope", nil, Call{Cost: 1})
	if want := `sluice: unknown policy: "nope"; the configured policies are ["a" "b"]`; o.Kind != BadInput || o.Err.Error() != want || o.Class().Code != "unknown_policy" {
		t.Errorf("unknown = %+v, want %q", o, want)
	}
	if o := s.DecideAttrs(ctx, "nope", nil, Call{Cost: 0}); o.Class().Code != "invalid_cost" {
		t.Errorf("unknown with cost 0 = %+v, want invalid_cost: the cost is checked first", o)
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err  error
		code string // "" when not bad input
	}{
		{fmt.Errorf("%w: x", ErrUnknownPolicy), "unknown_policy"},
		{fmt.Errorf("%w: x", ErrUnknownSchedule), "unknown_schedule"},
		{fmt.Errorf("%w: x", sluice.ErrMissingAttribute), "missing_attribute"},
		{InvalidAttribute("user"), "invalid_attribute"},
		{CheckCost(0), "invalid_cost"},
		{fmt.Errorf("%w: x", sluice.ErrCostExceedsLimit), "cost_exceeds_limit"},
		{fmt.Errorf("%w: x", sluice.ErrInvalidPolicy), "bad_request"},
		{fmt.Errorf("%w: x", sluice.ErrEmptyPolicy), "bad_request"},
		{fmt.Errorf("%w: x", sluice.ErrInvalidSchedule), "bad_request"},
		{sluice.ErrCircuitOpen, ""},
		{errors.New("connection refused"), ""},
		{nil, ""},
	}
	for _, c := range cases {
		got, ok := Classify(c.err)
		if ok != (c.code != "") || got.Code != c.code || (ok && got.Status != http.StatusBadRequest) {
			t.Errorf("Classify(%v) = %+v, %v; want code %q", c.err, got, ok, c.code)
		}
	}
	if got, want := CheckCost(-2).Error(), "cost is -2; a cost is 1 to 2^53 (9007199254740992); leave it out for 1"; got != want {
		t.Errorf("cost error %q, want %q", got, want)
	}
	for _, c := range []int64{1, sluice.MaxCost} {
		if err := CheckCost(c); err != nil {
			t.Errorf("cost %d: %v", c, err)
		}
	}
	for _, c := range []int64{0, sluice.MaxCost + 1, math.MaxInt64, math.MinInt64} {
		if err := CheckCost(c); !errors.Is(err, sluice.ErrInvalidCost) {
			t.Errorf("cost %d: error %v, want ErrInvalidCost", c, err)
		}
	}
}

// BenchmarkDecide measures the edge around the Limiter: reading one key,
// deciding one policy on the memory store.
func BenchmarkDecide(b *testing.B) {
	store := memstore.New(memstore.Config{})
	defer store.Close()
	e, err := New(Config[request]{Limiter: sluice.NewLimiter(store, sluice.Config{}),
		Policies: []*sluice.Policy{newPolicy("p", 1<<40, "user")}, Keys: read, Absent: errAbsent})
	if err != nil {
		b.Fatal(err)
	}
	r := request{"user": "ann"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if o := e.Decide(ctx, r, Call{Cost: 1}); o.Kind != Allowed {
			b.Fatal(o)
		}
	}
}
