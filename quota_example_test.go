package sluice_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/storetest"
)

// An API plan: 10 requests a second, 100,000 a month (renewed on the 1st,
// in Berlin), then credits the customer buys for the overage. The month's
// traffic so far is recorded in one call; the last two requests of the
// quota pass, the next is denied by the credits, a purchase (sent twice
// with one id: added once) admits it, and the new month starts from 0.
func ExampleLimiter_AddCredits() {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	clock := storetest.NewClock(time.Date(2026, 3, 31, 23, 0, 0, 0, berlin))
	lim := sluice.NewLimiter(memstore.New(memstore.Config{Clock: clock.Now}), sluice.Config{})
	plan := &sluice.Policy{Name: "api", Rules: []sluice.Rule{
		{Name: "per-second", By: []string{"key"}, Limit: 10, Window: time.Second},
		{Name: "monthly", By: []string{"key"}, Period: sluice.Month, Location: berlin, Limit: 100_000, History: 12},
		{Name: "overage", By: []string{"key"}, Algorithm: sluice.Credits, Covers: "monthly"},
	}}
	ctx := context.Background()
	key := map[string]string{"key": "acme"}
	show := func(d sluice.Decision, err error) {
		switch {
		case err != nil:
			fmt.Println(err)
		case d.Allowed:
			fmt.Printf("allowed, %d left\n", d.Remaining)
		default:
			fmt.Printf("denied by %s (%s), retry in %v\n", d.DeniedBy, d.Cause, d.RetryAfter)
		}
	}
	if _, err := lim.Record(ctx, plan, key, 99_998); err != nil {
		fmt.Println(err)
		return
	}
	clock.Advance(time.Second)
	show(lim.Allow(ctx, plan, key))
	show(lim.Allow(ctx, plan, key))
	show(lim.Allow(ctx, plan, key))
	for range 2 {
		b, err := lim.AddCredits(ctx, plan, "overage", key, 500, "order-1")
		fmt.Printf("purchase: balance %d, applied %v, %v\n", b.Balance, b.Applied, err)
	}
	show(lim.Allow(ctx, plan, key))
	b, _ := lim.Credits(ctx, plan, "overage", key)
	fmt.Println("balance", b.Balance)
	clock.Set(time.Date(2026, 4, 1, 0, 0, 0, 0, berlin))
	show(lim.Allow(ctx, plan, key))
	usage, _ := lim.Usage(ctx, plan, "monthly", key)
	for _, u := range usage[:2] {
		fmt.Printf("%s: %d\n", u.Start.Format("January 2006"), u.Used)
	}
	// Output:
	// allowed, 1 left
	// allowed, 0 left
	// denied by overage (credits), retry in 59m59s
	// purchase: balance 500, applied true, <nil>
	// purchase: balance 500, applied false, <nil>
	// allowed, 7 left
	// balance 499
	// allowed, 9 left
	// April 2026: 1
	// March 2026: 100001
}
