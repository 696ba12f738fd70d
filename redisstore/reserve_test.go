package redisstore_test

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/store"
	"github.com/sluicerate/sluice/storetest"
)

// Focused tests of reserve.lua and cancel.lua on the package's server, over
// each client.

func carrierSchedule(rate int64, maxDelay time.Duration) *sluice.Schedule {
	return &sluice.Schedule{Name: "carrier", By: []string{"carrier"},
		Rate: sluice.Rate{Events: rate, Per: time.Second}, MaxDelay: maxDelay}
}

// queueOf returns the queue of sched for attrs, which hold its attributes.
func queueOf(sched *sluice.Schedule, attrs map[string]string) store.Queue {
	q := store.Queue{Schedule: sched.Name}
	for _, a := range sched.By {
		q.Values = append(q.Values, attrs[a])
	}
	return q
}

func reserve(t *testing.T, s *redisstore.Store, sched *sluice.Schedule, attrs map[string]string, cost int64) store.Reservation {
	t.Helper()
	r, err := s.Reserve(context.Background(), &store.ReserveRequest{Queue: queueOf(sched, attrs), Interval: sched.Interval(),
		Cost: cost, MaxDelay: sched.MaxDelay, MaxQueue: sched.MaxQueue})
	if err != nil {
		t.Fatalf("Reserve(%s, %v, cost %d): %v", sched.Name, attrs, cost, err)
	}
	return r
}

func cancelOn(t *testing.T, s *redisstore.Store, sched *sluice.Schedule, attrs map[string]string, id string) (bool, error) {
	return s.Cancel(context.Background(), &store.CancelRequest{Queue: queueOf(sched, attrs), ID: id})
}

func queueKeyOf(t *testing.T, s *redisstore.Store, sched *sluice.Schedule, attrs map[string]string) string {
	return s.QueueKey(queueOf(sched, attrs))
}

var memberForm = regexp.MustCompile(`^[0-9a-f]{16}\.[1-9][0-9]*$`)

func TestQueueLayout(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		clock := storetest.NewClock(storetest.T0)
		prefix := newPrefix()
		s := b.open(t, redisstore.Config{Prefix: prefix, Clock: clock.Now})
		sched := carrierSchedule(4, 10*time.Second)
		attrs := map[string]string{"carrier": "a:b{c}"}
		key := queueKeyOf(t, s, sched, attrs)
		if want := prefix + ":{carrier,a%3Ab%7Bc%7D}2q"; key != want {
			t.Errorf("QueueKey = %q, want %q", key, want)
		}
		var ids []string
		for i := range 5 {
			r := reserve(t, s, sched, attrs, int64(1+i%2))
			ids = append(ids, r.ID)
		}
		keys, err := ttls(context.Background(), admin(t), prefix)
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != 1 || keys[key] <= 0 {
			t.Fatalf("keys on the server: %v, want only %s with a TTL", keys, key)
		}
		// Members are the IDs, scored by slot: cost 1, 2, 1, 2, 1 at 4/s.
		es := members(t, admin(t), key)
		slots := []time.Duration{0, 250 * time.Millisecond, 750 * time.Millisecond, time.Second, 1500 * time.Millisecond}
		if len(es) != len(slots) {
			t.Fatalf("queue holds %v, want %d members", es, len(slots))
		}
		for i, e := range es {
			if e.Member != ids[i] || !memberForm.MatchString(e.Member) || e.Score != storetest.T0.Add(slots[i]).UnixMicro() {
				t.Errorf("member %d = %+v, want ID %s at T0+%v", i, e, ids[i], slots[i])
			}
		}
		// Once slots have passed only the latest passed one is kept.
		clock.Set(storetest.T0.Add(1200 * time.Millisecond))
		reserve(t, s, sched, attrs, 1)
		if es := members(t, admin(t), key); len(es) != 3 || es[0].Member != ids[3] {
			t.Errorf("after three slots passed: %v, want %s (passed, still held) and two pending", es, ids[3])
		}
	})
}

func TestRejectedReservationChangesNothing(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		clock := storetest.NewClock(storetest.T0)
		s := b.open(t, redisstore.Config{Prefix: newPrefix(), Clock: clock.Now})
		sched := carrierSchedule(4, time.Second)
		sched.MaxQueue = 2
		attrs := map[string]string{"carrier": "45"}
		key := queueKeyOf(t, s, sched, attrs)
		reserve(t, s, sched, attrs, 1)
		reserve(t, s, sched, attrs, 1)
		c := admin(t)
		before := members(t, c, key)
		pttl := func() int64 {
			ms, err := c.Do(ctx, c.B().Pttl().Key(key).Build()).AsInt64()
			if err != nil {
				t.Fatal(err)
			}
			return ms
		}
		ttlBefore := pttl()
		for _, r := range []store.Reservation{reserve(t, s, sched, attrs, 1), reserve(t, s, sched, attrs, 4)} {
			if r.OK || r.Reason != store.ReasonQueue {
				t.Fatalf("reservation on a full queue: %+v, want rejected by the queue", r)
			}
		}
		sched.MaxQueue, sched.MaxDelay = 0, 250*time.Millisecond
		if r := reserve(t, s, sched, attrs, 1); r.OK || r.Reason != store.ReasonDelay {
			t.Fatalf("reservation past MaxDelay: %+v, want rejected by the delay", r)
		}
		after := members(t, c, key)
		if len(after) != len(before) || after[0] != before[0] || after[1] != before[1] {
			t.Errorf("rejections changed the queue: %v, was %v", after, before)
		}
		if ttl := pttl(); ttl > ttlBefore {
			t.Errorf("rejections raised the TTL from %dms to %dms", ttlBefore, ttl)
		}
	})
}

func TestCancelIDs(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		clock := storetest.NewClock(storetest.T0)
		s := b.open(t, redisstore.Config{Prefix: newPrefix(), Clock: clock.Now})
		sched := carrierSchedule(4, time.Second)
		attrs := map[string]string{"carrier": "45"}
		r := reserve(t, s, sched, attrs, 1)
		for _, id := range []string{"", "1", "x", r.ID + "0", r.ID[:16], "0123456789abcdeF.250000", "0123456789abcdef.0", "0123456789abcdef.-1", "0123456789abcdef.0250000"} {
			ok, err := cancelOn(t, s, sched, attrs, id)
			if ok || err != nil {
				t.Errorf("Cancel(%q) = %v, %v; want false, nil", id, ok, err)
			}
		}
		ok, err := cancelOn(t, s, sched, attrs, r.ID)
		if !ok || err != nil {
			t.Errorf("Cancel(%q) = %v, %v; want true", r.ID, ok, err)
		}
		if n := len(members(t, admin(t), queueKeyOf(t, s, sched, attrs))); n != 0 {
			t.Errorf("the queue holds %d members after its only reservation was cancelled", n)
		}
	})
}

func TestReserveNoScriptReloads(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		clock := storetest.NewClock(storetest.T0)
		s := b.open(t, redisstore.Config{Prefix: newPrefix(), Clock: clock.Now})
		c := admin(t)
		sched := carrierSchedule(4, time.Second)
		attrs := map[string]string{"carrier": "45"}
		flush := func() {
			if err := c.Do(ctx, c.B().ScriptFlush().Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}
		var last store.Reservation
		for i := range 3 {
			flush()
			last = reserve(t, s, sched, attrs, 1)
			if !last.OK || last.Delay != time.Duration(i)*250*time.Millisecond {
				t.Fatalf("after SCRIPT FLUSH #%d: %+v, want OK in %v", i+1, last, time.Duration(i)*250*time.Millisecond)
			}
		}
		flush()
		if ok, err := cancelOn(t, s, sched, attrs, last.ID); !ok || err != nil {
			t.Fatalf("Cancel after SCRIPT FLUSH: %v, %v", ok, err)
		}
		if n := len(members(t, c, queueKeyOf(t, s, sched, attrs))); n != 2 {
			t.Errorf("queue holds %d reservations, want 2", n)
		}
	})
}

func TestReserveOnRedisClock(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		s := b.open(t, redisstore.Config{Prefix: newPrefix()})
		// Slots 1s apart: a reservation follows the one before unless a
		// loaded machine takes over a second between two calls.
		sched := carrierSchedule(1, 3*time.Second)
		attrs := map[string]string{"carrier": "45"}
		key := queueKeyOf(t, s, sched, attrs)
		before := time.Now()
		var rs []store.Reservation
		for range 3 {
			rs = append(rs, reserve(t, s, sched, attrs, 1))
		}
		after := time.Now()
		if rs[0].Slot.Before(before.Truncate(time.Microsecond)) || rs[0].Slot.After(after) {
			t.Errorf("first slot %v, want between %v and %v (Redis's TIME)", rs[0].Slot, before, after)
		}
		for i := 1; i < len(rs); i++ {
			if gap := rs[i].Slot.Sub(rs[i-1].Slot); gap != time.Second {
				t.Errorf("slots %d and %d are %v apart, want 1s", i-1, i, gap)
			}
		}
		c := admin(t)
		ms, err := c.Do(ctx, c.B().Pttl().Key(key).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		if ms <= 0 || ms > 3000 {
			t.Errorf("PTTL %dms, want in (0, 3000]: the end of the last slot", ms)
		}
	})
}
