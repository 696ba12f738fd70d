package memstore

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/store"
	"github.com/sluicerate/sluice/storetest"
)

func TestConformance(t *testing.T) {
	storetest.Run(t, openConformance)
}

// TestConformanceDenyCache runs the suite with the Limiter's deny cache on.
func TestConformanceDenyCache(t *testing.T) {
	storetest.RunDenyCache(t, openConformance)
}

func openConformance(t *testing.T, now func() time.Time) storetest.Target {
	s := New(Config{Clock: now, Shards: 4})
	return storetest.Target{Store: s, TTLs: func(context.Context) (map[string]time.Duration, error) {
		return s.ttls(now()), nil
	}}
}

// ttls returns every window's key and time left until it may be dropped.
func (s *Store) ttls(now time.Time) map[string]time.Duration {
	out := map[string]time.Duration{}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		for j, tag := range sh.tags {
			if tag != 0 {
				w := sh.slots[j]
				name := w.names.policy + ":" + w.names.rule + ":" + w.values
				out[name] = time.Duration(w.expires-now.UnixMicro()) * time.Microsecond
			}
		}
		sh.mu.Unlock()
	}
	s.queueTTLs(now, out)
	return out
}

func TestEvictionBoundsMemory(t *testing.T) {
	clock := storetest.NewClock(storetest.T0)
	s := New(Config{Clock: clock.Now, Shards: 8})
	lim := sluice.NewLimiter(s, sluice.Config{})
	p := &sluice.Policy{Name: "users", Rules: []sluice.Rule{
		{Name: "per-user", Limit: 5, Window: 10 * time.Millisecond, By: []string{"user"}},
	}}
	ctx := context.Background()
	// A window that lives an hour, queued first, in every shard: the
	// eviction of the short ones below must not wait for it.
	long := &sluice.Policy{Name: "daily", Rules: []sluice.Rule{{Name: "per-user", Limit: 5, Window: time.Hour, By: []string{"user"}}}}
	for i := range 64 {
		if _, err := lim.Allow(ctx, long, map[string]string{"user": fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	// One new key per 10µs with a 10ms window: about 1,000 keys live at any
	// time while 500,000 are written.
	maxLen := 0
	for i := range 500_000 {
		clock.Advance(10 * time.Microsecond)
		if _, err := lim.Allow(ctx, p, map[string]string{"user": fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
		if i%1000 == 0 {
			maxLen = max(maxLen, s.Len())
		}
	}
	if maxLen > 2100 {
		t.Errorf("held up to %d windows with about 1,064 live; want at most 2,100", maxLen)
	}
}

func TestClosed(t *testing.T) {
	s := New(Config{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	lim := sluice.NewLimiter(s, sluice.Config{})
	p := &sluice.Policy{Name: "p", Rules: []sluice.Rule{{Name: "r", Limit: 1, Window: time.Second}}}
	d, err := lim.Allow(context.Background(), p, nil)
	if !errors.Is(err, sluice.ErrStoreClosed) || d.Allowed || !d.Degraded {
		t.Fatalf("Allow on a closed store: %+v, %v; want a degraded denial and ErrStoreClosed", d, err)
	}
}

func TestCanceledContext(t *testing.T) {
	s := New(Config{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := &store.Request{Policy: "p", Checks: []store.Check{{Rule: "r", Limit: 1, Window: time.Second, Cost: 1}}}
	if err := s.Decide(ctx, req); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if s.Len() != 0 {
		t.Fatalf("a canceled decision left %d windows", s.Len())
	}
}

// TestConformanceBudget runs the budget cases: slices of budgeted rules.
func TestConformanceBudget(t *testing.T) {
	storetest.RunBudget(t, openConformance)
}
