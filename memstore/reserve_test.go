package memstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/storetest"
)

// queueTTLs adds to out every live queue's name and time left until it may
// be dropped. Queues whose last reservation has ended are as good as absent
// and are left out, as Redis would have expired them.
func (s *Store) queueTTLs(now time.Time, out map[string]time.Duration) {
	qs := &s.queues
	qs.init(len(s.shards))
	for i := range qs.shards {
		sh := &qs.shards[i]
		sh.mu.Lock()
		for k, q := range sh.queues {
			if ttl := time.Duration(q.expires-now.UnixMicro()) * time.Microsecond; ttl > 0 {
				out["schedule:"+k.name+":"+k.values] = ttl
			}
		}
		sh.mu.Unlock()
	}
}

func TestIdleQueuesAreDropped(t *testing.T) {
	clock := storetest.NewClock(storetest.T0)
	s := New(Config{Clock: clock.Now, Shards: 8})
	lim := sluice.NewLimiter(s, sluice.Config{})
	sched := &sluice.Schedule{Name: "calls", By: []string{"carrier"},
		Rate: sluice.Rate{Events: 100, Per: time.Second}, MaxDelay: time.Second}
	ctx := context.Background()
	// One new carrier every 100µs, each reserving two 10ms slots: about 200
	// queues are live at any time (20ms each) while 50,000 are written.
	maxLen := 0
	for i := range 50_000 {
		clock.Advance(100 * time.Microsecond)
		for range 2 {
			if r, err := lim.Reserve(ctx, sched, map[string]string{"carrier": fmt.Sprint(i)}, 1); err != nil || !r.OK {
				t.Fatalf("reservation %d: %+v, %v", i, r, err)
			}
		}
		if i%1000 == 0 {
			maxLen = max(maxLen, s.queueCount())
		}
	}
	if maxLen > 400 {
		t.Errorf("held up to %d queues with about 200 live; want at most 400", maxLen)
	}
}

func TestReserveOnClosedStore(t *testing.T) {
	s := New(Config{})
	sched := &sluice.Schedule{Name: "s", Rate: sluice.Rate{Events: 1, Per: time.Second}}
	lim := sluice.NewLimiter(s, sluice.Config{})
	if _, err := lim.Reserve(context.Background(), sched, nil, 1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	r, err := lim.Reserve(context.Background(), sched, nil, 1)
	if err != sluice.ErrStoreClosed || r.OK || !r.Degraded {
		t.Errorf("Reserve on a closed store: %+v, %v; want a degraded rejection and ErrStoreClosed", r, err)
	}
	if ok, err := lim.Cancel(context.Background(), sched, nil, "1"); err != sluice.ErrStoreClosed || ok {
		t.Errorf("Cancel on a closed store: %v, %v; want ErrStoreClosed", ok, err)
	}
}

func BenchmarkReserve(b *testing.B) {
	clock := storetest.NewClock(storetest.T0)
	s := New(Config{Clock: clock.Now})
	lim := sluice.NewLimiter(s, sluice.Config{})
	sched := &sluice.Schedule{Name: "calls", By: []string{"carrier"},
		Rate: sluice.Rate{Events: 1000, Per: time.Second}, MaxDelay: time.Second}
	attrs := map[string]string{"carrier": "45"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		clock.Advance(time.Millisecond) // one slot per reservation: the queue stays short
		if _, err := lim.Reserve(ctx, sched, attrs, 1); err != nil {
			b.Fatal(err)
		}
	}
}
