package sluice_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/storetest"
)

// A notifier caps all notifications at 10 a minute and each category at 3:
// the fourth "errors" notification is denied by the category rule, and once
// 10 went out across categories the global rule denies the rest.
func Example_hierarchy() {
	clock := storetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	lim := sluice.NewLimiter(memstore.New(memstore.Config{Clock: clock.Now}), sluice.Config{})
	notify := &sluice.Policy{Name: "notify", Rules: []sluice.Rule{
		{Name: "global", Limit: 10, Window: time.Minute},
		{Name: "category", Limit: 3, Window: time.Minute, By: []string{"category"}},
	}}
	ctx := context.Background()
	for _, c := range []string{"errors", "errors", "errors", "errors", "info", "info", "info", "debug", "debug", "debug", "audit", "audit"} {
		d, err := lim.Allow(ctx, notify, map[string]string{"category": c})
		if err != nil {
			fmt.Println(err)
			return
		}
		if d.Allowed {
			fmt.Printf("%-6s allowed, %d left\n", c, d.Remaining)
		} else {
			fmt.Printf("%-6s denied by %s, retry in %v\n", c, d.DeniedBy, d.RetryAfter)
		}
		clock.Advance(time.Second)
	}
	// Output:
	// errors allowed, 2 left
	// errors allowed, 1 left
	// errors allowed, 0 left
	// errors denied by category, retry in 57s
	// info   allowed, 2 left
	// info   allowed, 1 left
	// info   allowed, 0 left
	// debug  allowed, 2 left
	// debug  allowed, 1 left
	// debug  allowed, 0 left
	// audit  allowed, 0 left
	// audit  denied by global, retry in 49s
}

// A push service allows at most 10 messages a minute per user and at least
// 100ms between two of them; the decision says how long to wait.
func Example_minGap() {
	clock := storetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	lim := sluice.NewLimiter(memstore.New(memstore.Config{Clock: clock.Now}), sluice.Config{})
	push := &sluice.Policy{Name: "push", Rules: []sluice.Rule{
		{Name: "per-user", Limit: 10, Window: time.Minute, MinGap: 100 * time.Millisecond, By: []string{"user"}},
	}}
	ctx := context.Background()
	user := map[string]string{"user": "ada"}
	for _, step := range []time.Duration{0, 30 * time.Millisecond, 70 * time.Millisecond} {
		clock.Advance(step)
		d, _ := lim.Allow(ctx, push, user)
		fmt.Printf("allowed=%v retry_after=%v\n", d.Allowed, d.RetryAfter)
	}
	// Output:
	// allowed=true retry_after=0s
	// allowed=false retry_after=70ms
	// allowed=true retry_after=0s
}

// Peek answers without recording; Record adds an event to every window of a
// policy whatever the limits say (one call into many windows).
func ExampleLimiter_Record() {
	clock := storetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	lim := sluice.NewLimiter(memstore.New(memstore.Config{Clock: clock.Now}), sluice.Config{})
	calls := &sluice.Policy{Name: "calls", Rules: []sluice.Rule{
		{Name: "platform", Limit: 100, Window: time.Second},
		{Name: "peer", Limit: 10, Window: time.Second, By: []string{"peer"}},
	}}
	ctx := context.Background()
	peer := map[string]string{"peer": "45"}
	lim.Record(ctx, calls, peer, 1)
	d, _ := lim.Record(ctx, calls, peer, 1)
	for _, s := range d.Limits() {
		fmt.Printf("%s: %d of %d used\n", s.Rule, s.Used, s.Limit)
	}
	// A peek answers what Allow would: a third call fits, and would leave
	// 3 of 10 used.
	d, _ = lim.Peek(ctx, calls, peer, 1)
	fmt.Printf("a third: allowed %v, peer %d of 10 after it\n", d.Allowed, d.Limits()[1].Used)
	// Output:
	// platform: 2 of 100 used
	// peer: 2 of 10 used
	// a third: allowed true, peer 3 of 10 after it
}

// An API limits each user to 10,000 requests an hour as GCRA, one small key
// per user however large the limit, with bursts of at most 3: a client
// that sends a burst waits an interval (an hour / 10,000 = 360ms) per
// request after it.
func Example_gcra() {
	clock := storetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	lim := sluice.NewLimiter(memstore.New(memstore.Config{Clock: clock.Now}), sluice.Config{})
	api := &sluice.Policy{Name: "api", Rules: []sluice.Rule{
		{Name: "per-user", Limit: 10000, Window: time.Hour, Algorithm: sluice.GCRA, Burst: 3, By: []string{"user"}},
	}}
	ctx := context.Background()
	user := map[string]string{"user": "ada"}
	for range 4 {
		d, _ := lim.Allow(ctx, api, user)
		fmt.Printf("allowed=%v remaining=%d retry_after=%v\n", d.Allowed, d.Remaining, d.RetryAfter)
	}
	clock.Advance(360 * time.Millisecond)
	d, _ := lim.Allow(ctx, api, user)
	fmt.Printf("after 360ms: allowed=%v\n", d.Allowed)
	// Output:
	// allowed=true remaining=2 retry_after=0s
	// allowed=true remaining=1 retry_after=0s
	// allowed=true remaining=0 retry_after=0s
	// allowed=false remaining=0 retry_after=360ms
	// after 360ms: allowed=true
}

// An API under a flood: a client over its limit keeps retrying. With
// CacheDenials the Limiter asks the store once, then answers the retries
// itself, each with the wait left, until the window has room again.
func Example_denyCache() {
	clock := storetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	lim := sluice.NewLimiter(memstore.New(memstore.Config{Clock: clock.Now}),
		sluice.Config{Clock: clock, DenyCache: 10_000})
	api := &sluice.Policy{Name: "api", CacheDenials: true, Rules: []sluice.Rule{
		{Name: "per-client", Limit: 2, Window: 10 * time.Second, By: []string{"client"}},
	}}
	ctx := context.Background()
	client := map[string]string{"client": "203.0.113.7"}
	for range 7 {
		d, _ := lim.Allow(ctx, api, client)
		fmt.Printf("allowed=%-5v cached=%-5v retry_after=%v\n", d.Allowed, d.Cached, d.RetryAfter)
		clock.Advance(2 * time.Second)
	}
	st := lim.DenyCacheStats()
	fmt.Printf("store asked %d times, cache answered %d\n", st.Misses, st.Hits)
	// Output:
	// allowed=true  cached=false retry_after=0s
	// allowed=true  cached=false retry_after=0s
	// allowed=false cached=false retry_after=6s
	// allowed=false cached=true  retry_after=4s
	// allowed=false cached=true  retry_after=2s
	// allowed=true  cached=false retry_after=0s
	// allowed=true  cached=false retry_after=0s
	// store asked 5 times, cache answered 2
}
