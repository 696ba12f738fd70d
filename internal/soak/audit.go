package soak

import (
	"context"
	"sync"
	"time"

	"github.com/sluicerate/sluice"
)

// Audit peeks, through lim, at every target of mix that has exact windows
// (Target.Peek), each every period, until stop is closed, and returns per
// window (indexed as mix.Wins) what the store held at each peek that
// succeeded: the rule's Used less the peeked request when the peek would
// have admitted it.
func Audit(lim *sluice.Limiter, mix *Mix, period time.Duration, stop <-chan struct{}) [][]Look {
	looks := make([][]Look, len(mix.Wins))
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for _, tg := range mix.Targets {
		if !tg.Peek {
			continue
		}
		wg.Go(func() {
			peekEvery(lim, tg.Policy, tg.Attrs, period, stop, func(sent, replied int64, d *sluice.Decision) {
				mu.Lock()
				defer mu.Unlock()
				for _, w := range tg.Wins {
					if held, ok := heldBy(d, mix.Wins[w].Rule); ok {
						looks[w] = append(looks[w], Look{Sent: sent, Replied: replied, Held: held})
					}
				}
			})
		})
	}
	wg.Wait()
	return looks
}

// peekEvery peeks, through lim, at policy for attrs every period until stop
// is closed, and hands each peek that succeeded to look with the times it
// was sent and answered (Unix ns).
func peekEvery(lim *sluice.Limiter, policy *sluice.Policy, attrs map[string]string, period time.Duration,
	stop <-chan struct{}, look func(sent, replied int64, d *sluice.Decision)) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		sent := time.Now().UnixNano()
		d, err := lim.Peek(context.Background(), policy, attrs, 1)
		replied := time.Now().UnixNano()
		if err == nil {
			look(sent, replied, &d)
		}
	}
}

// heldBy returns what a peek d says the window of rule holds: its Used,
// less the peeked request when the peek would have admitted it; false
// when d has no status of rule.
func heldBy(d *sluice.Decision, rule string) (int64, bool) {
	for _, st := range d.Limits() {
		if st.Rule == rule {
			if d.Allowed {
				return st.Used - 1, true
			}
			return st.Used, true
		}
	}
	return 0, false
}
