package overrides_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/overrides"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/store"
	"github.com/sluicerate/sluice/storetest"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// policies are the rules overrides may name in these tests.
var policies = []sluice.Policy{
	{Name: "api", Rules: []sluice.Rule{
		{Name: "per-user", By: []string{"user"}, Limit: 10, Window: time.Minute},
		{Name: "per-tenant-user", By: []string{"tenant", "user"}, Limit: 20, Window: time.Minute},
		{Name: "bucket", By: []string{"user"}, Limit: 100, Window: time.Hour, Algorithm: sluice.GCRA},
		{Name: "global", Limit: 1000, Window: time.Minute},
	}},
}

// instance is one server's Manager over a shared store, with its log.
type instance struct {
	m   *overrides.Manager
	log *bytes.Buffer
}

func newInstance(t *testing.T, s store.OverrideStore, c *storetest.Clock, max int) *instance {
	t.Helper()
	var buf bytes.Buffer
	m := overrides.New(overrides.Options{Store: s, Now: c.Now, Max: max, Logger: slog.New(slog.NewTextHandler(&buf, nil))})
	m.SetTargets("policies", overrides.PolicyTargets(policies))
	if err := m.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &instance{m: m, log: &buf}
}

func limit(n int64) *int64 { return &n }

// get returns the override of the window, or -1 when none applies.
func get(m *overrides.Manager, rule string, values ...string) int64 {
	o, ok := m.Override("api", rule, values)
	if !ok {
		return -1
	}
	return o.Limit
}

// TestSetAppliesEverywhere: an override set through one Manager applies
// there at once and at the other's next poll; a delete ends it on both.
// The log names who did what.
func TestSetAppliesEverywhere(t *testing.T) {
	t.Parallel()
	c := storetest.NewClock(t0)
	s := memstore.New(memstore.Config{Clock: c.Now})
	a, b := newInstance(t, s, c, 0), newInstance(t, s, c, 0)
	set, err := a.m.Set(context.Background(), "ops-alice", overrides.Override{Policy: "api", Rule: "per-user", Values: []string{"acme"},
		Limit: limit(500), Reason: "launch day"})
	if err != nil {
		t.Fatal(err)
	}
	if set.ID != "api:per-user:acme" || set.SetBy != "ops-alice" || !set.SetAt.Equal(t0) {
		t.Errorf("set %+v, want id api:per-user:acme by ops-alice at t0", set)
	}
	if got := get(a.m, "per-user", "acme"); got != 500 {
		t.Errorf("on the instance that set it: %d, want 500 at once", got)
	}
	if got := get(b.m, "per-user", "acme"); got != -1 {
		t.Errorf("on the other before it polls: %d, want none yet", got)
	}
	if err := b.m.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := get(b.m, "per-user", "acme"); got != 500 {
		t.Errorf("on the other after its poll: %d, want 500", got)
	}
	if got := get(b.m, "per-user", "other"); got != -1 {
		t.Errorf("another user: %d, want none", got)
	}
	for _, want := range []string{`msg="runtime override set" who=ops-alice id=api:per-user:acme target="policy \"api\"" rule=per-user values=acme limit=500 reason="launch day"`} {
		if !strings.Contains(a.log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, a.log)
		}
	}
	found, err := b.m.Delete(context.Background(), "ops-bob", set.ID)
	if err != nil || !found {
		t.Fatalf("delete = %v, %v", found, err)
	}
	if err := a.m.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a, b := get(a.m, "per-user", "acme"), get(b.m, "per-user", "acme"); a != -1 || b != -1 {
		t.Errorf("after the delete: %d and %d, want none on both", a, b)
	}
	if !strings.Contains(b.log.String(), `msg="runtime override deleted" who=ops-bob id=api:per-user:acme`) {
		t.Errorf("log lacks the delete:\n%s", b.log)
	}
}

// TestPatterns: exact values win over patterns; among patterns the one
// with more exact values, then the longer prefix; "*" matches anything.
func TestPatterns(t *testing.T) {
	t.Parallel()
	c := storetest.NewClock(t0)
	in := newInstance(t, memstore.New(memstore.Config{Clock: c.Now}), c, 0)
	for _, o := range []overrides.Override{
		{Rule: "per-user", Values: []string{"premium_*"}, Limit: limit(100)},
		{Rule: "per-user", Values: []string{"premium_gold_*"}, Limit: limit(200)},
		{Rule: "per-user", Values: []string{"premium_gold_7"}, Limit: limit(300)},
		{Rule: "per-tenant-user", Values: []string{"*", "bot_*"}, Limit: limit(1)},
		{Rule: "per-tenant-user", Values: []string{"acme", "*"}, Limit: limit(50)},
		{Rule: "global", Values: nil, Limit: limit(5000)},
	} {
		o.Policy = "api"
		if _, err := in.m.Set(context.Background(), "t", o); err != nil {
			t.Fatalf("set %+v: %v", o, err)
		}
	}
	for _, tc := range []struct {
		rule   string
		values []string
		want   int64
	}{
		{"per-user", []string{"premium_1"}, 100},
		{"per-user", []string{"premium_gold_1"}, 200},
		{"per-user", []string{"premium_gold_7"}, 300},
		{"per-user", []string{"premium"}, -1},
		{"per-tenant-user", []string{"acme", "bot_1"}, 50}, // one exact value beats none
		{"per-tenant-user", []string{"other", "bot_1"}, 1},
		{"per-tenant-user", []string{"other", "ann"}, -1},
		{"global", []string{}, 5000},
	} {
		if got := get(in.m, tc.rule, tc.values...); got != tc.want {
			t.Errorf("%s %q: %d, want %d", tc.rule, tc.values, got, tc.want)
		}
	}
}

// TestExpiry: an override with an end applies until that instant, on the
// Manager's clock, and not from it; the store stops returning it too.
func TestExpiry(t *testing.T) {
	t.Parallel()
	c := storetest.NewClock(t0)
	s := memstore.New(memstore.Config{Clock: c.Now})
	in := newInstance(t, s, c, 0)
	if _, err := in.m.Set(context.Background(), "t", overrides.Override{Policy: "api", Rule: "per-user", Values: []string{"abuser"},
		Blocked: true, For: overrides.Duration(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	end := t0.Add(time.Hour)
	c.Set(end.Add(-time.Nanosecond))
	if got := get(in.m, "per-user", "abuser"); got != 0 {
		t.Errorf("just before the end: %d, want blocked (0)", got)
	}
	if l := in.m.List(); len(l.Overrides) != 1 || !l.Overrides[0].Active || !l.Overrides[0].Until.Equal(end) {
		t.Errorf("listing before the end: %+v", l.Overrides)
	}
	c.Set(end)
	if got := get(in.m, "per-user", "abuser"); got != -1 {
		t.Errorf("at the end: %d, want none", got)
	}
	if l := in.m.List(); len(l.Overrides) != 1 || l.Overrides[0].Active || !l.Overrides[0].Expired {
		t.Errorf("listing at the end: %+v, want it expired", l.Overrides)
	}
	// A fresh instance reads nothing: the store dropped it.
	if l := newInstance(t, s, c, 0).m.List(); len(l.Overrides) != 0 {
		t.Errorf("a new instance after the end lists %+v", l.Overrides)
	}
	if _, err := in.m.Set(context.Background(), "t", overrides.Override{Policy: "api", Rule: "per-user", Values: []string{"x"},
		Limit: limit(1), Until: &t0}); !errors.Is(err, overrides.ErrInvalid) || !strings.Contains(err.Error(), "has passed") {
		t.Errorf("an end in the past: %v, want ErrInvalid", err)
	}
}

// TestInvalid: what cannot apply to a rule in use is refused, saying why.
func TestInvalid(t *testing.T) {
	t.Parallel()
	c := storetest.NewClock(t0)
	in := newInstance(t, memstore.New(memstore.Config{Clock: c.Now}), c, 0)
	for _, tc := range []struct {
		o    overrides.Override
		want string
	}{
		{overrides.Override{Rule: "per-user", Values: []string{"a"}, Limit: limit(1)}, "name a policy"},
		{overrides.Override{Policy: "nope", Rule: "r", Values: []string{"a"}, Limit: limit(1)}, `policy "nope" is not configured`},
		{overrides.Override{Policy: "api", Rule: "nope", Values: []string{"a"}, Limit: limit(1)}, "its rules are bucket, global, per-tenant-user, per-user"},
		{overrides.Override{Policy: "api", Rule: "per-tenant-user", Values: []string{"a"}, Limit: limit(1)}, `goes by 2 values ["tenant" "user"]`},
		{overrides.Override{Policy: "api", Rule: "per-user", Values: []string{"a*b"}, Limit: limit(1)}, "'*' before its end"},
		{overrides.Override{Policy: "api", Rule: "per-user", Values: []string{""}, Limit: limit(1)}, "an empty value"},
		{overrides.Override{Policy: "api", Rule: "per-user", Values: []string{"a"}}, "give the new limit"},
		{overrides.Override{Policy: "api", Rule: "per-user", Values: []string{"a"}, Limit: limit(3), Blocked: true}, "blocked with limit 3"},
		{overrides.Override{Policy: "api", Rule: "per-user", Values: []string{"a"}, Limit: limit(-1)}, "from 0 (blocks) to 2^53"},
		{overrides.Override{Policy: "api", Rule: "per-user", Values: []string{"a"}, Limit: limit(5), Burst: 3}, "takes no burst"},
		{overrides.Override{Policy: "api", Rule: "bucket", Values: []string{"a"}, Limit: limit(5), MinGap: overrides.Duration(time.Second)}, "min gap needs the log algorithm"},
	} {
		_, err := in.m.Set(context.Background(), "t", tc.o)
		if !errors.Is(err, overrides.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want ErrInvalid saying %q", tc.o, err, tc.want)
		}
	}
	if l := in.m.List(); len(l.Overrides) != 0 {
		t.Errorf("refused overrides were stored: %+v", l.Overrides)
	}
}

// TestBound: a store holds at most Max overrides; replacing one at the
// bound is allowed. A Manager with a smaller bound than the store's set
// applies the first by ID and says how many it left out.
func TestBound(t *testing.T) {
	t.Parallel()
	c := storetest.NewClock(t0)
	s := memstore.New(memstore.Config{Clock: c.Now})
	big := newInstance(t, s, c, 3)
	for _, u := range []string{"a", "b", "c"} {
		if _, err := big.m.Set(context.Background(), "t", overrides.Override{Policy: "api", Rule: "per-user", Values: []string{u}, Limit: limit(1)}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := big.m.Set(context.Background(), "t", overrides.Override{Policy: "api", Rule: "per-user", Values: []string{"d"}, Limit: limit(1)})
	if !errors.Is(err, store.ErrTooManyOverrides) || !overrides.IsBadRequest(err) {
		t.Errorf("a fourth under a bound of 3: %v, want ErrTooManyOverrides", err)
	}
	if _, err := big.m.Set(context.Background(), "t", overrides.Override{Policy: "api", Rule: "per-user", Values: []string{"c"}, Limit: limit(9)}); err != nil {
		t.Errorf("replacing one at the bound: %v", err)
	}
	small := newInstance(t, s, c, 2)
	if l := small.m.List(); len(l.Overrides) != 2 || l.Truncated != 1 || l.Max != 2 {
		t.Errorf("a Manager of 2 over 3: %d held, %d left out, max %d", len(l.Overrides), l.Truncated, l.Max)
	}
	if get(small.m, "per-user", "a") != 1 || get(small.m, "per-user", "c") != -1 {
		t.Error("the first two by ID should apply, not the third")
	}
	if !strings.Contains(small.log.String(), "left_out=1") {
		t.Errorf("the truncation is not logged:\n%s", small.log)
	}
}

// failingStore fails its reads while down.
type failingStore struct {
	store.OverrideStore
	mu   sync.Mutex
	down bool
}

func (f *failingStore) ReadOverrides(ctx context.Context, known string) (store.OverrideSet, error) {
	f.mu.Lock()
	down := f.down
	f.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return store.OverrideSet{}, err // as a network store's client does
	}
	if down {
		return store.OverrideSet{}, errors.New("connection refused")
	}
	return f.OverrideStore.ReadOverrides(ctx, known)
}

// TestPollCancelled: a poll its caller cancels (a shutdown) is not a store
// failure: nothing is logged and the listing is not marked stale.
func TestPollCancelled(t *testing.T) {
	t.Parallel()
	c := storetest.NewClock(t0)
	in := newInstance(t, &failingStore{OverrideStore: memstore.New(memstore.Config{Clock: c.Now})}, c, 0)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := in.m.Poll(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled poll = %v, want context.Canceled", err)
	}
	if l := in.m.List(); l.Stale || l.Error != "" {
		t.Errorf("after a cancelled poll: %+v, want a fresh listing", l)
	}
	if strings.Contains(in.log.String(), "did not answer") {
		t.Errorf("a cancelled poll is logged as a store failure:\n%s", in.log)
	}
}

// TestStoreDown: while the store fails, the last set read stays in use
// and the listing says since when it is stale; the failure and the
// recovery are logged once each.
func TestStoreDown(t *testing.T) {
	t.Parallel()
	c := storetest.NewClock(t0)
	fs := &failingStore{OverrideStore: memstore.New(memstore.Config{Clock: c.Now})}
	in := newInstance(t, fs, c, 0)
	if _, err := in.m.Set(context.Background(), "t", overrides.Override{Policy: "api", Rule: "per-user", Values: []string{"acme"}, Limit: limit(500)}); err != nil {
		t.Fatal(err)
	}
	fs.mu.Lock()
	fs.down = true
	fs.mu.Unlock()
	c.Set(t0.Add(time.Second))
	for range 3 {
		if err := in.m.Poll(context.Background()); err == nil {
			t.Fatal("a poll of a failing store succeeded")
		}
	}
	if got := get(in.m, "per-user", "acme"); got != 500 {
		t.Errorf("with the store down: %d, want the last set's 500", got)
	}
	l := in.m.List()
	if !l.Stale || l.Error != "connection refused" || l.ErrorSince == nil || !l.ErrorSince.Equal(t0.Add(time.Second)) || len(l.Overrides) != 1 {
		t.Errorf("listing with the store down: %+v", l)
	}
	fs.mu.Lock()
	fs.down = false
	fs.mu.Unlock()
	if err := in.m.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if l := in.m.List(); l.Stale || l.Error != "" {
		t.Errorf("after recovery: %+v", l)
	}
	if n := strings.Count(in.log.String(), "the store did not answer"); n != 1 {
		t.Errorf("the failure is logged %d times, want once:\n%s", n, in.log)
	}
	if !strings.Contains(in.log.String(), "the store answers again") {
		t.Errorf("the recovery is not logged:\n%s", in.log)
	}
}

// TestTargetsChange: an override whose rule goes away stays in the store,
// listed with the problem and applied to nothing, and applies again when
// the rule comes back.
func TestTargetsChange(t *testing.T) {
	t.Parallel()
	c := storetest.NewClock(t0)
	in := newInstance(t, memstore.New(memstore.Config{Clock: c.Now}), c, 0)
	if _, err := in.m.Set(context.Background(), "t", overrides.Override{Policy: "api", Rule: "per-user", Values: []string{"acme"}, Limit: limit(500)}); err != nil {
		t.Fatal(err)
	}
	in.m.SetTargets("policies", nil)
	if got := get(in.m, "per-user", "acme"); got != -1 {
		t.Errorf("with the policy gone: %d, want none", got)
	}
	if l := in.m.List(); len(l.Overrides) != 1 || l.Overrides[0].Active || !strings.Contains(l.Overrides[0].Problem, "not configured") {
		t.Errorf("listing with the policy gone: %+v", l.Overrides)
	}
	in.m.SetTargets("policies", overrides.PolicyTargets(policies))
	if got := get(in.m, "per-user", "acme"); got != 500 {
		t.Errorf("with the policy back: %d, want 500", got)
	}
}

// TestLookupAllocs: looking a window up allocates nothing.
func TestLookupAllocs(t *testing.T) {
	c := storetest.NewClock(t0)
	in := newInstance(t, memstore.New(memstore.Config{Clock: c.Now}), c, 0)
	for _, o := range []overrides.Override{
		{Policy: "api", Rule: "per-tenant-user", Values: []string{"acme", "ann"}, Limit: limit(1)},
		{Policy: "api", Rule: "per-tenant-user", Values: []string{"acme", "b*"}, Limit: limit(2)},
	} {
		if _, err := in.m.Set(context.Background(), "t", o); err != nil {
			t.Fatal(err)
		}
	}
	values := []string{"acme", "bob"}
	if n := testing.AllocsPerRun(100, func() { in.m.Override("api", "per-tenant-user", values) }); n != 0 {
		t.Errorf("a lookup allocates %v times", n)
	}
}
