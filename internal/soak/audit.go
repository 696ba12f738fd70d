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
			tick := time.NewTicker(period)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				sent := time.Now().UnixNano()
				d, err := lim.Peek(context.Background(), tg.Policy, tg.Attrs, 1)
				replied := time.Now().UnixNano()
				if err != nil {
					continue
				}
				mu.Lock()
				for _, w := range tg.Wins {
					for _, st := range d.Limits {
						if st.Rule != mix.Wins[w].Rule {
							continue
						}
						held := st.Used
						if d.Allowed {
							held--
						}
						looks[w] = append(looks[w], Look{Sent: sent, Replied: replied, Held: held})
					}
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return looks
}
