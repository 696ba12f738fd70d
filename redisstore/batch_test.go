package redisstore_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/storetest"
)

// TestBatchedDecisionsAreExact sends many concurrent decisions of a global
// cap over a per-key cap at one instant, so that they are batched and most
// batches decide the global key several times: every decision must report
// the counts it would alone, and the windows must hold exactly what was
// admitted, the global entries ending at 1, 2, … in admission order.
func TestBatchedDecisionsAreExact(t *testing.T) {
	clock := storetest.NewClock(storetest.T0)
	s := openRueidis(t, redisstore.Config{Prefix: newPrefix(), Clock: clock.Now})
	const global, perKey, keys, tries = 50, 5, 20, 10
	p := &sluice.Policy{Name: "batch", Rules: []sluice.Rule{
		{Name: "global", Limit: global, Window: time.Minute},
		{Name: "per-key", Limit: perKey, Window: time.Minute, By: []string{"key"}},
	}}
	var (
		mu          sync.Mutex
		globalUsed  []int64
		admittedFor = map[string]int{}
		wg          sync.WaitGroup
	)
	for g := range keys * tries {
		wg.Go(func() {
			k := "k" + strconv.Itoa(g%keys)
			d, err := direct(s).Decide(context.Background(), request(t, p, map[string]string{"key": k}, 1))
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if d.Allowed {
				globalUsed = append(globalUsed, d.Limits()[0].Used)
				admittedFor[k]++
			} else if d.RetryAfter != time.Minute {
				t.Errorf("denied %s: retry after %v, want 1m (every entry is at T0)", k, d.RetryAfter)
			}
		})
	}
	wg.Wait()
	slices.Sort(globalUsed)
	want := make([]int64, 0, global)
	for i := range int64(global) {
		want = append(want, i+1)
	}
	if !slices.Equal(globalUsed, want) {
		t.Errorf("allowed decisions saw global used %v, want each of 1..%d once", globalUsed, global)
	}
	c := admin(t)
	ks := keysOf(t, s, p, map[string]string{"key": "k0"})
	es := entries(t, c, ks[0])
	if n := units(es); n != global || es[len(es)-1].End != int64(global) {
		t.Fatalf("global window holds %d units up to end %d, want %d up to %d", n, es[len(es)-1].End, global, global)
	}
	for k, n := range admittedFor {
		if n > perKey {
			t.Errorf("%s: admitted %d, limit %d", k, n, perKey)
		}
		got := units(entries(t, c, keysOf(t, s, p, map[string]string{"key": k})[1]))
		if got != n {
			t.Errorf("%s: window holds %d entries, %d admitted", k, got, n)
		}
	}
}
