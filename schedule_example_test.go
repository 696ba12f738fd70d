package sluice_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/storetest"
)

// The telecom platform's two limits on calls: upstream, calls coming in above 4 a second
// are rejected (a Policy); downstream, calls going out to a carrier are held
// back to 4 a second (a Schedule), and rejected only when the wait would be
// longer than a second. Six calls arrive at one instant.
func Example_upstreamAndDownstream() {
	clock := storetest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	lim := sluice.NewLimiter(memstore.New(memstore.Config{Clock: clock.Now}), sluice.Config{})
	ctx := context.Background()

	inbound := &sluice.Policy{Name: "inbound", Rules: []sluice.Rule{
		{Name: "cps", Limit: 4, Window: time.Second, By: []string{"customer"}},
	}}
	fmt.Println("upstream: reject what is above 4/s")
	for i := range 6 {
		d, err := lim.Allow(ctx, inbound, map[string]string{"customer": "c1"})
		if err != nil {
			fmt.Println(err)
			return
		}
		if d.Allowed {
			fmt.Printf("  call %d: accepted\n", i+1)
		} else {
			fmt.Printf("  call %d: rejected by %s, retry in %v\n", i+1, d.DeniedBy, d.RetryAfter)
		}
	}

	outbound := &sluice.Schedule{Name: "carrier", By: []string{"carrier"},
		Rate: sluice.Rate{Events: 4, Per: time.Second}, MaxDelay: time.Second}
	fmt.Println("downstream: queue what is above 4/s, for at most 1s")
	for i := range 6 {
		r, err := lim.Reserve(ctx, outbound, map[string]string{"carrier": "45"}, 1)
		if err != nil {
			fmt.Println(err)
			return
		}
		if r.OK {
			fmt.Printf("  call %d: leaves in %v, %d queued\n", i+1, r.Delay, r.Queue)
		} else {
			fmt.Printf("  call %d: rejected (%s): it would wait %v\n", i+1, r.Reason, r.Delay)
		}
	}
	// Output:
	// upstream: reject what is above 4/s
	//   call 1: accepted
	//   call 2: accepted
	//   call 3: accepted
	//   call 4: accepted
	//   call 5: rejected by cps, retry in 1s
	//   call 6: rejected by cps, retry in 1s
	// downstream: queue what is above 4/s, for at most 1s
	//   call 1: leaves in 0s, 1 queued
	//   call 2: leaves in 250ms, 2 queued
	//   call 3: leaves in 500ms, 3 queued
	//   call 4: leaves in 750ms, 4 queued
	//   call 5: leaves in 1s, 5 queued
	//   call 6: rejected (delay): it would wait 1.25s
}

// Wait reserves a slot and sleeps until it: a worker that places calls to a
// carrier at 20 a second, each waiting at most 2s and never past the
// context's deadline.
func ExampleLimiter_Wait() {
	lim := sluice.NewLimiter(memstore.New(memstore.Config{}), sluice.Config{})
	carrier := &sluice.Schedule{Name: "carrier", By: []string{"carrier"},
		Rate: sluice.Rate{Events: 20, Per: time.Second}, MaxDelay: 2 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		r, err := lim.Wait(ctx, carrier, map[string]string{"carrier": "45"}, 1)
		switch {
		case errors.Is(err, sluice.ErrRejected):
			// The queue is full: try another carrier, or back off.
			continue
		case err != nil:
			// The deadline is before the next slot, or the context ended
			// while waiting (the slot was given back).
			return
		}
		fmt.Println("call leaves now, slot", r.Slot)
	}
}
