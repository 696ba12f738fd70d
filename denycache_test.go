package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/resolve"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/store"
	"github.com/sluicerate/sluice/storetest"
)

// countingStore is a memory store that counts the decisions it is asked
// for. It is a store.Local, as the memory store is, so that a Limiter
// calls it as it calls the memory store: without a deadline. With the
// Limiter's 50 ms deadline on the real clock, a call held up that long on
// a loaded machine (the race detector, parallel tests) failed with
// context.DeadlineExceeded and a degraded decision, which no manual
// clock controls.
type countingStore struct {
	store.Store
	calls atomic.Int64
}

var _ store.Local = (*countingStore)(nil)

// Local implements store.Local.
func (*countingStore) Local() {}

func (s *countingStore) Decide(ctx context.Context, req *store.Request) error {
	s.calls.Add(1)
	if _, ok := ctx.Deadline(); ok {
		return errors.New("countingStore: the Limiter gave a memory store's call a deadline, as it does a network store's")
	}
	return s.Store.Decide(ctx, req)
}

// cacheEnv is a Limiter with a deny cache over a memory store, both on one
// manual clock.
type cacheEnv struct {
	t     *testing.T
	clock *storetest.Clock
	store *countingStore
	lim   *sluice.Limiter
}

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newCacheEnv(t *testing.T, size int) *cacheEnv {
	t.Helper()
	clock := storetest.NewClock(t0)
	s := &countingStore{Store: memstore.New(memstore.Config{Clock: clock.Now})}
	t.Cleanup(func() { s.Close() })
	return &cacheEnv{t: t, clock: clock, store: s,
		lim: sluice.NewLimiter(s, sluice.Config{Clock: clock, DenyCache: size})}
}

func (e *cacheEnv) set(d time.Duration) {
	e.clock.Set(t0.Add(d))
}

// allow decides and reports the decision and whether the store was asked.
func (e *cacheEnv) allow(p *sluice.Policy, attrs map[string]string, cost int64) (sluice.Decision, bool) {
	e.t.Helper()
	before := e.store.calls.Load()
	d, err := e.lim.AllowN(context.Background(), p, attrs, cost)
	if err != nil {
		e.t.Fatalf("policy %s, attributes %v, cost %d: %v (decision %+v)", p.Name, attrs, cost, err, d)
	}
	asked := e.store.calls.Load() > before
	if d.Cached == asked {
		e.t.Fatalf("Cached %v, store asked %v", d.Cached, asked)
	}
	return d, asked
}

// expect checks a decision's outcome and whether the store was asked.
func (e *cacheEnv) expect(what string, d sluice.Decision, asked bool, allowed bool, retry time.Duration, wantAsked bool) {
	e.t.Helper()
	if d.Allowed != allowed || d.RetryAfter != retry || asked != wantAsked {
		e.t.Errorf("%s: allowed %v retry %v, store asked %v; want allowed %v retry %v, store asked %v",
			what, d.Allowed, d.RetryAfter, asked, allowed, retry, wantAsked)
	}
}

func cached(name string, limit int64, window time.Duration, by ...string) *sluice.Policy {
	return &sluice.Policy{Name: name, CacheDenials: true, Rules: []sluice.Rule{{Name: "r", Limit: limit, Window: window, By: by}}}
}

func TestDenyCacheExpiry(t *testing.T) {
	t.Parallel()
	e := newCacheEnv(t, 0)
	p := cached("expiry", 2, 10*time.Second)
	for _, at := range []time.Duration{0, time.Second} {
		e.set(at)
		d, asked := e.allow(p, nil, 1)
		e.expect(fmt.Sprint("admit at ", at), d, asked, true, 0, true)
	}
	e.set(2 * time.Second)
	d, asked := e.allow(p, nil, 1)
	e.expect("first denial", d, asked, false, 8*time.Second, true)
	// Answered locally, the wait counting down to the instant the first
	// entry leaves, to the microsecond.
	for _, at := range []time.Duration{2 * time.Second, 5 * time.Second, 10*time.Second - time.Microsecond} {
		e.set(at)
		d, asked = e.allow(p, nil, 1)
		e.expect(fmt.Sprint("cached at ", at), d, asked, false, 10*time.Second-at, false)
	}
	// At that instant the entry has expired: the store admits.
	e.set(10 * time.Second)
	d, asked = e.allow(p, nil, 1)
	e.expect("at the retry", d, asked, true, 0, true)
	if st := e.lim.DenyCacheStats(); st.Hits != 3 || st.Misses != 4 || st.Entries != 0 {
		t.Errorf("stats %+v, want 3 hits, 4 misses, the expired entry gone", st)
	}
}

// TestDenyCacheShape: a cached answer is the store's answer to the same
// request at that instant, field for field: every rule's status in policy
// order, not only the denying rule's. A request whose rules resolve to
// other windows is another entry, answered by the store first.
func TestDenyCacheShape(t *testing.T) {
	t.Parallel()
	e := newCacheEnv(t, 0)
	p := &sluice.Policy{Name: "figures", CacheDenials: true, Rules: []sluice.Rule{
		{Name: "global", Limit: 100, Window: time.Minute},
		{Name: "per-user", Limit: 3, Window: 30 * time.Second, By: []string{"user"}},
		{Name: "per-ip", Limit: 50, Window: time.Minute, By: []string{"ip"}},
		{Name: "uploads", Limit: 1, Window: time.Minute, By: []string{"ip"}, Shadow: true},
	}}
	raw := sluice.NewLimiter(e.store, sluice.Config{Clock: e.clock, DenyCache: -1})
	// storeAnswer is the store's decision of the request now, asked by a
	// peek through a Limiter without a cache.
	storeAnswer := func(attrs map[string]string) sluice.Decision {
		t.Helper()
		d, err := raw.Peek(context.Background(), p, attrs, 1)
		if err != nil || d.Cached {
			t.Fatalf("peek without a cache: %+v, %v", d, err)
		}
		return d
	}
	same := func(what string, got, want sluice.Decision) {
		t.Helper()
		want.Cached = true
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v\nwant %+v (the store's, Cached)", what, got, want)
		}
	}
	ada := map[string]string{"user": "ada", "ip": "192.0.2.1"}
	for i := range 3 {
		e.set(time.Duration(i) * time.Second)
		e.allow(p, ada, 1)
	}
	stored, asked := e.allow(p, ada, 1)
	e.expect("the store's denial", stored, asked, false, 28*time.Second, true)
	if len(stored.Limits()) != 4 {
		t.Fatalf("the store's denial: %+v", stored)
	}
	for _, at := range []time.Duration{2 * time.Second, 12 * time.Second, 30*time.Second - time.Microsecond} {
		e.set(at)
		d, asked := e.allow(p, ada, 1)
		e.expect(fmt.Sprint("cached at ", at), d, asked, false, 30*time.Second-at, false)
		same(fmt.Sprint("decide at ", at), d, storeAnswer(ada))
		pd, err := e.lim.Peek(context.Background(), p, ada, 1)
		if err != nil {
			t.Fatal(err)
		}
		same(fmt.Sprint("peek at ", at), pd, storeAnswer(ada))
	}
	// The same user from another address: other windows, so the store
	// answers first, with that address's figures; then the cache does.
	e.set(20 * time.Second)
	elsewhere := map[string]string{"user": "ada", "ip": "192.0.2.99"}
	d, asked := e.allow(p, elsewhere, 1)
	e.expect("another address", d, asked, false, 10*time.Second, true)
	if ip := d.Limits()[2]; ip.Rule != "per-ip" || ip.Used != 0 || !ip.Fits {
		t.Errorf("another address's per-ip status: %+v", ip)
	}
	e.set(25 * time.Second)
	d, asked = e.allow(p, elsewhere, 1)
	e.expect("another address again", d, asked, false, 5*time.Second, false)
	same("another address again", d, storeAnswer(elsewhere))
	// Another user's request is not the denied request: the store decides.
	d, asked = e.allow(p, map[string]string{"user": "bob", "ip": "192.0.2.7"}, 1)
	e.expect("other user", d, asked, true, 0, true)
}

// TestDenyCacheUntilFirstRoom: with two rules denying, an entry holds until
// the first of them could fit, when DeniedBy may change; the store answers
// from then on.
func TestDenyCacheUntilFirstRoom(t *testing.T) {
	t.Parallel()
	e := newCacheEnv(t, 0)
	p := &sluice.Policy{Name: "two", CacheDenials: true, Rules: []sluice.Rule{
		{Name: "short", Limit: 1, Window: 10 * time.Second},
		{Name: "long", Limit: 1, Window: time.Minute},
	}}
	e.allow(p, nil, 1)
	d, asked := e.allow(p, nil, 1)
	e.expect("both full", d, asked, false, time.Minute, true)
	if d.DeniedBy != "short" {
		t.Fatalf("denied by %q, want short", d.DeniedBy)
	}
	e.set(10*time.Second - time.Microsecond)
	d, asked = e.allow(p, nil, 1)
	e.expect("before short has room", d, asked, false, 50*time.Second+time.Microsecond, false)
	e.set(10 * time.Second)
	d, asked = e.allow(p, nil, 1)
	e.expect("short has room", d, asked, false, 50*time.Second, true)
	if d.DeniedBy != "long" || !d.Limits()[0].Fits {
		t.Errorf("short has room: %+v", d)
	}
}

func TestDenyCacheCost(t *testing.T) {
	t.Parallel()
	e := newCacheEnv(t, 0)
	p := cached("cost", 10, 10*time.Second)
	e.allow(p, nil, 7)
	e.set(time.Second)
	e.allow(p, nil, 1) // 8 used
	e.set(2 * time.Second)
	d, asked := e.allow(p, nil, 4) // needs the 7 of 0s to leave
	e.expect("cost 4", d, asked, false, 8*time.Second, true)
	// Another cost is another request, whose answer may differ: the store
	// decides it, and its denial is remembered too.
	d, asked = e.allow(p, nil, 5)
	e.expect("cost 5", d, asked, false, 8*time.Second, true)
	d, asked = e.allow(p, nil, 5)
	e.expect("cost 5 again", d, asked, false, 8*time.Second, false)
	// Less cost may fit: the store decides it.
	d, asked = e.allow(p, nil, 2)
	e.expect("cost 2", d, asked, true, 0, true)
	d, asked = e.allow(p, nil, 4)
	e.expect("cost 4 again", d, asked, false, 8*time.Second, false)
}

func TestDenyCacheAlgorithms(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		rule  sluice.Rule
		fill  int
		retry time.Duration
	}{
		{"gcra", sluice.Rule{Limit: 10, Window: time.Second, Algorithm: sluice.GCRA, Burst: 2}, 2, 100 * time.Millisecond},
		// At 1s the previous bucket counts whole; a µs later, 2 of its 3.
		{"sliding-counter", sluice.Rule{Limit: 3, Window: time.Second, Algorithm: sluice.SlidingCounter}, 3, time.Second + time.Microsecond},
		{"min gap", sluice.Rule{Limit: 10, Window: time.Second, MinGap: 300 * time.Millisecond}, 1, 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newCacheEnv(t, 0)
			tc.rule.Name = "r"
			p := &sluice.Policy{Name: tc.name, CacheDenials: true, Rules: []sluice.Rule{tc.rule}}
			for range tc.fill {
				e.allow(p, nil, 1)
			}
			d, asked := e.allow(p, nil, 1)
			e.expect("denied", d, asked, false, tc.retry, true)
			e.set(tc.retry - time.Microsecond)
			d, asked = e.allow(p, nil, 1)
			e.expect("1µs before", d, asked, false, time.Microsecond, false)
			e.set(tc.retry)
			d, asked = e.allow(p, nil, 1)
			e.expect("at the retry", d, asked, true, 0, true)
		})
	}
}

func TestDenyCacheSpread(t *testing.T) {
	t.Parallel()
	e := newCacheEnv(t, 0)
	p := &sluice.Policy{Name: "hot", CacheDenials: true, Rules: []sluice.Rule{
		{Name: "tenant", By: []string{"tenant"}, Limit: 4, Window: time.Minute, Spread: 2},
	}}
	acme := map[string]string{"tenant": "acme"}
	for i := range 4 {
		e.set(time.Duration(i) * time.Second)
		e.allow(p, acme, 1)
	}
	// Each sub-window took two, at 0-3s in some order: the soonest to free
	// a unit does so at 60s or 61s. A denial asks both sub-windows.
	before := e.store.calls.Load()
	e.set(10 * time.Second)
	stored, _ := e.allow(p, acme, 1)
	if calls := e.store.calls.Load() - before; stored.Allowed || calls != 2 {
		t.Fatalf("full tenant: %+v after %d store calls, want a denial after 2", stored, calls)
	}
	e.set(20 * time.Second)
	d, asked := e.allow(p, acme, 1)
	e.expect("cached", d, asked, false, stored.RetryAfter-10*time.Second, false)
	e.set(10*time.Second + stored.RetryAfter)
	d, asked = e.allow(p, acme, 1)
	e.expect("at the retry", d, asked, true, 0, true)
}

func TestDenyCacheBypassed(t *testing.T) {
	t.Parallel()
	e := newCacheEnv(t, 0)
	ctx := context.Background()
	// Penalize records every attempt: the store answers each.
	pen := cached("penalize", 1, time.Minute)
	pen.Penalize = true
	for i := range 3 {
		d, asked := e.allow(pen, nil, 1)
		e.expect(fmt.Sprint("penalized #", i+1), d, asked, i == 0, map[bool]time.Duration{true: 0, false: time.Minute}[i == 0], true)
	}
	// Without CacheDenials: the store answers each.
	off := cached("off", 1, time.Minute)
	off.CacheDenials = false
	for i := range 3 {
		_, asked := e.allow(off, nil, 1)
		if !asked {
			t.Errorf("off #%d: not asked", i+1)
		}
	}
	// A shadow rule never denies: nothing is cached for it.
	sh := &sluice.Policy{Name: "shadow-rule", CacheDenials: true, Rules: []sluice.Rule{{Name: "r", Limit: 1, Window: time.Minute, Shadow: true}}}
	for i := range 3 {
		d, asked := e.allow(sh, nil, 1)
		if !d.Allowed || !asked {
			t.Errorf("shadow rule #%d: %+v, asked %v", i+1, d, asked)
		}
	}
	// Record always asks the store and does not fill the cache.
	p := cached("record", 1, time.Minute)
	for range 2 {
		before := e.store.calls.Load()
		d, err := e.lim.Record(ctx, p, nil, 1)
		if err != nil || d.Cached || e.store.calls.Load() == before {
			t.Fatalf("record: %+v, %v", d, err)
		}
	}
	_, asked := e.allow(p, nil, 1)
	if !asked {
		t.Error("a denial Record reported filled the cache")
	}
	// A denial's entry does not answer Record either.
	before := e.store.calls.Load()
	if d, err := e.lim.Record(ctx, p, nil, 1); err != nil || d.Cached || e.store.calls.Load() == before {
		t.Errorf("record after a cached denial: %+v, %v", d, err)
	}
	// Nor Decide, which callers resolve themselves.
	req, err := resolve.Request(p, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	before = e.store.calls.Load()
	if d, err := e.lim.Decide(ctx, req); err != nil || d.Cached || e.store.calls.Load() == before {
		t.Errorf("Decide: %+v, %v", d, err)
	}
	// A negative size: no cache for any policy.
	none := sluice.NewLimiter(e.store, sluice.Config{Clock: e.clock, DenyCache: -1})
	for range 2 {
		before := e.store.calls.Load()
		if d, _ := none.Allow(ctx, p, nil); d.Cached || e.store.calls.Load() == before {
			t.Errorf("DenyCache -1: %+v", d)
		}
	}
	if st := none.DenyCacheStats(); st != (sluice.DenyCacheStats{}) {
		t.Errorf("DenyCache -1: stats %+v", st)
	}
}

func TestDenyCachePeekAndShadow(t *testing.T) {
	t.Parallel()
	e := newCacheEnv(t, 0)
	ctx := context.Background()
	p := cached("peek", 1, time.Minute)
	e.allow(p, nil, 1)
	// A peek's denial is the store's too: it fills the cache, and the next
	// peek and allow are answered from it.
	d, err := e.lim.Peek(ctx, p, nil, 1)
	if err != nil || d.Allowed || d.Cached {
		t.Fatalf("first peek: %+v, %v", d, err)
	}
	e.set(time.Second)
	before := e.store.calls.Load()
	if d, err = e.lim.Peek(ctx, p, nil, 1); err != nil || d.Allowed || !d.Cached || d.RetryAfter != 59*time.Second {
		t.Errorf("second peek: %+v, %v", d, err)
	}
	d, asked := e.allow(p, nil, 1)
	e.expect("allow", d, asked, false, 59*time.Second, false)
	if e.store.calls.Load() != before {
		t.Error("the store was asked")
	}
	// A shadow policy admits what the cache denies, reported as shadowed.
	sp := cached("shadow", 1, time.Minute)
	sp.Shadow = true
	e.allow(sp, nil, 1)
	e.allow(sp, nil, 1)
	d, asked = e.allow(sp, nil, 1)
	if !d.Allowed || !d.Shadowed || !d.Cached || d.DeniedBy != "r" || asked {
		t.Errorf("shadow policy: %+v, asked %v", d, asked)
	}
}

func TestDenyCacheLRU(t *testing.T) {
	t.Parallel()
	e := newCacheEnv(t, 2)
	p := cached("lru", 1, time.Minute, "user")
	u := func(name string) map[string]string { return map[string]string{"user": name} }
	for _, name := range []string{"a", "b", "c"} {
		e.allow(p, u(name), 1)
	}
	for _, name := range []string{"a", "b"} {
		if _, asked := e.allow(p, u(name), 1); !asked {
			t.Fatalf("%s: first denial not asked", name)
		}
	}
	if _, asked := e.allow(p, u("a"), 1); asked { // a is now the most recent
		t.Fatal("a: not cached")
	}
	if _, asked := e.allow(p, u("c"), 1); !asked { // evicts b, the least recent
		t.Fatal("c: first denial not asked")
	}
	st := e.lim.DenyCacheStats()
	if st.Entries != 2 || st.Evictions != 1 {
		t.Errorf("stats %+v, want 2 entries, 1 eviction", st)
	}
	for _, c := range []struct {
		name  string
		asked bool
	}{{"a", false}, {"c", false}, {"b", true}} {
		if _, asked := e.allow(p, u(c.name), 1); asked != c.asked {
			t.Errorf("%s: store asked %v, want %v", c.name, asked, c.asked)
		}
	}
	// A large cache: never more entries than its size. Each user is
	// admitted, then denied by the store, and the denial is remembered.
	t.Run("size 1000", func(t *testing.T) {
		big := newCacheEnv(t, 1000)
		for i := range 3000 {
			attrs := u(fmt.Sprint(i))
			d, asked := big.allow(p, attrs, 1)
			big.expect(fmt.Sprintf("user %d's first request", i), d, asked, true, 0, true)
			d, asked = big.allow(p, attrs, 1)
			big.expect(fmt.Sprintf("user %d's second request", i), d, asked, false, time.Minute, true)
			if t.Failed() {
				return
			}
		}
		if st := big.lim.DenyCacheStats(); st != (sluice.DenyCacheStats{Entries: 1000, Misses: 6000, Evictions: 2000}) {
			t.Errorf("after 3000 denied windows: %+v, want 1000 entries, 6000 misses, 2000 evictions", st)
		}
	})
}

func TestDenyCacheReload(t *testing.T) {
	t.Parallel()
	e := newCacheEnv(t, 0)
	v1 := cached("reload", 1, time.Minute)
	e.allow(v1, nil, 1)
	if _, asked := e.allow(v1, nil, 1); !asked {
		t.Fatal("first denial not asked")
	}
	// The policy loaded again with a higher limit is a new key: the store
	// decides, and admits.
	v2 := cached("reload", 3, time.Minute)
	if d, asked := e.allow(v2, nil, 1); !d.Allowed || !asked {
		t.Errorf("raised limit: %+v, asked %v", d, asked)
	}
	// So does any change to the window, gap, algorithm or burst.
	for _, r := range []sluice.Rule{
		{Name: "r", Limit: 1, Window: 2 * time.Minute},
		{Name: "r", Limit: 1, Window: time.Minute, MinGap: time.Second},
		{Name: "r", Limit: 1, Window: time.Minute, Algorithm: sluice.GCRA},
		{Name: "r", Limit: 1, Window: time.Minute, Algorithm: sluice.SlidingCounter},
	} {
		p := &sluice.Policy{Name: "reload", CacheDenials: true, Rules: []sluice.Rule{r}}
		if _, asked := e.allow(p, nil, 1); !asked {
			t.Errorf("changed rule %+v: answered from the old entry", r)
		}
	}
	// An override that changes a value's limit is a key of its own.
	ov := cached("reload", 1, time.Minute)
	ov.Rules[0].Overrides = []sluice.Override{{Match: map[string]string{"plan": "paid"}, Limit: 50}}
	if _, asked := e.allow(ov, map[string]string{"plan": "paid"}, 1); !asked {
		t.Error("an override's limit answered from the rule's entry")
	}
	// A new Limiter, as sluice serve makes on every reload, starts empty.
	fresh := sluice.NewLimiter(e.store, sluice.Config{Clock: e.clock})
	before := e.store.calls.Load()
	if d, _ := fresh.Allow(context.Background(), v1, nil); d.Cached || e.store.calls.Load() == before {
		t.Errorf("new Limiter: %+v", d)
	}
}

func TestDenyCacheConcurrent(t *testing.T) {
	t.Parallel()
	// Room for every user's request: once the global cap is full, each
	// user's denial is an entry of its own (its per-user figures differ).
	e := newCacheEnv(t, 128)
	p := &sluice.Policy{Name: "flood", CacheDenials: true, Rules: []sluice.Rule{
		{Name: "global", Limit: 50, Window: time.Minute},
		{Name: "per-user", Limit: 2, Window: time.Minute, By: []string{"user"}},
	}}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				d, err := e.lim.Allow(context.Background(), p, map[string]string{"user": fmt.Sprint((g*500 + i) % 100)})
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	st := e.lim.DenyCacheStats()
	if admitted.Load() != 50 || st.Hits == 0 || st.Hits+st.Misses != 4000 {
		t.Errorf("admitted %d, stats %+v; want exactly 50, hits and misses adding up to 4000", admitted.Load(), st)
	}
	if calls := e.store.calls.Load(); calls != int64(st.Misses) {
		t.Errorf("%d store calls, %d misses", calls, st.Misses)
	}
}

// BenchmarkDenyCache measures a decision of a one-rule policy on the memory
// store: a denial answered from the cache, one the store gives without a
// cache, and an admission with and without the cache's lookup before it.
func BenchmarkDenyCache(b *testing.B) {
	ctx := context.Background()
	for _, bc := range []struct {
		name    string
		limit   int64
		caching bool
	}{
		{"denied/cached", 1, true},
		{"denied/store", 1, false},
		{"allowed/lookup", 1 << 40, true},
		{"allowed/none", 1 << 40, false},
	} {
		b.Run(bc.name, func(b *testing.B) {
			s := memstore.New(memstore.Config{})
			defer s.Close()
			lim := sluice.NewLimiter(s, sluice.Config{})
			p := &sluice.Policy{Name: "bench", CacheDenials: bc.caching, Rules: []sluice.Rule{
				{Name: "per-ip", Limit: bc.limit, Window: time.Hour, By: []string{"ip"}},
			}}
			attrs := map[string]string{"ip": "203.0.113.7"}
			lim.Allow(ctx, p, attrs)
			lim.Allow(ctx, p, attrs)
			b.ReportAllocs()
			for b.Loop() {
				if d, _ := lim.Allow(ctx, p, attrs); d.Allowed != (bc.limit > 1) || d.Cached != (bc.limit == 1 && bc.caching) {
					b.Fatalf("%+v", d)
				}
			}
		})
	}
}
