package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sluicerate/sluice"
)

// carrier is the dialer's schedule: 4 calls a second per carrier, each
// waiting at most maxDelay.
func carrier(maxDelay time.Duration) *sluice.Schedule {
	return &sluice.Schedule{Name: "carrier", By: []string{"carrier"},
		Rate: sluice.Rate{Events: 4, Per: time.Second}, MaxDelay: maxDelay}
}

func peer(id string) map[string]string { return map[string]string{"carrier": id} }

const ms = time.Millisecond

// scheduleCases are the conformance cases of the scheduler (Reserve, Cancel).
var scheduleCases = []testCase{
	{"ReserveSpacesSlots", func(e *env) {
		// The dialer: 4/s, eight calls at one instant leave 250ms apart.
		s := carrier(2 * time.Second)
		ids := map[string]bool{}
		for i := range 8 {
			r := e.reserve(s, peer("45"), 1)
			e.expectRes(fmt.Sprintf("call %d", i+1), r, okAt(time.Duration(i)*250*ms, int64(i+1)))
			if r.ID == "" || ids[r.ID] {
				e.t.Errorf("call %d: ID %q is empty or repeated", i+1, r.ID)
			}
			ids[r.ID] = true
		}
	}},

	{"ReserveMaxDelay", func(e *env) {
		// With MaxDelay 1s, the 6th call and later would wait 1.25s: each
		// is rejected and leaves the queue as it was.
		s := carrier(time.Second)
		for i := range 5 {
			e.expectRes(fmt.Sprintf("call %d", i+1), e.reserve(s, peer("45"), 1), okAt(time.Duration(i)*250*ms, int64(i+1)))
		}
		for i := 5; i < 8; i++ {
			e.expectRes(fmt.Sprintf("call %d", i+1), e.reserve(s, peer("45"), 1), rejected(sluice.ReasonDelay, 1250*ms, 5))
		}
		// Nothing was recorded for them: a quarter second later the next
		// slot is still T0+1.25s, and it now fits.
		e.clock.Advance(250 * ms)
		e.expectRes("250ms later", e.reserve(s, peer("45"), 1), okAt(time.Second, 5))
		e.expectRes("and again", e.reserve(s, peer("45"), 1), rejected(sluice.ReasonDelay, 1250*ms, 5))

		// MaxDelay 0 admits only calls that may go at once.
		now := carrier(0)
		now.Name = "now"
		e.expectRes("max delay 0, first", e.reserve(now, peer("45"), 1), okAt(0, 1))
		e.expectRes("max delay 0, second", e.reserve(now, peer("45"), 1), rejected(sluice.ReasonDelay, 250*ms, 1))
		e.clock.Advance(250 * ms)
		e.expectRes("max delay 0, an interval later", e.reserve(now, peer("45"), 1), okAt(0, 1))
	}},

	{"ReserveMaxQueue", func(e *env) {
		s := carrier(10 * time.Second)
		s.MaxQueue = 3
		for i := range 3 {
			e.expectRes(fmt.Sprintf("call %d", i+1), e.reserve(s, peer("45"), 1), okAt(time.Duration(i)*250*ms, int64(i+1)))
		}
		e.expectRes("call 4", e.reserve(s, peer("45"), 1), rejected(sluice.ReasonQueue, 750*ms, 3))
		// A reservation holds the queue until its time has ended: the
		// first one, due at T0, still does at T0+249.999ms and leaves the
		// queue at T0+250ms.
		e.clock.Advance(250*ms - time.Microsecond)
		e.expectRes("call 4, at T0+249.999ms", e.reserve(s, peer("45"), 1), rejected(sluice.ReasonQueue, 500*ms+time.Microsecond, 3))
		e.clock.Advance(time.Microsecond)
		e.expectRes("call 4, at T0+250ms", e.reserve(s, peer("45"), 1), okAt(500*ms, 3))
		// A delay over MaxDelay is reported before a full queue.
		s.MaxDelay = 500 * ms
		e.expectRes("call 5", e.reserve(s, peer("45"), 1), rejected(sluice.ReasonDelay, 750*ms, 3))
	}},

	{"ReserveQueueIsPlaceInLine", func(e *env) {
		// Reservations a millisecond apart, as a caller's successive
		// requests are: each one's Queue is its place in line, the
		// reservation whose slot has come but whose time has not ended
		// included, so the second is 2, not 1 as if the first had gone.
		s := carrier(2 * time.Second)
		for i := range 4 {
			e.expectRes(fmt.Sprintf("call %d", i+1), e.reserve(s, peer("45"), 1),
				okAt(time.Duration(i)*250*ms-time.Duration(i)*ms, int64(i+1)))
			e.clock.Advance(ms)
		}
		// At T0+250ms the first call's time has ended: three in line, and
		// a new one is the fourth.
		e.clock.Set(T0.Add(250 * ms))
		e.expectRes("at T0+250ms", e.reserve(s, peer("45"), 1), okAt(750*ms, 4))
		// A reservation of cost 2 holds the queue for two intervals.
		s.Name = "cost2"
		e.expectRes("cost 2", e.reserve(s, peer("45"), 2), okAt(0, 1))
		e.clock.Advance(400 * ms)
		e.expectRes("400ms into it", e.reserve(s, peer("45"), 1), okAt(100*ms, 2))
	}},

	{"ReserveCost", func(e *env) {
		// Cost N takes N intervals: the next slot after a reservation of
		// cost N at slot S is S + N*250ms.
		s := carrier(5 * time.Second)
		e.expectRes("cost 2", e.reserve(s, peer("45"), 2), okAt(0, 1))
		e.expectRes("cost 1 after it", e.reserve(s, peer("45"), 1), okAt(500*ms, 2))
		big := e.reserve(s, peer("45"), 3)
		e.expectRes("cost 3", big, okAt(750*ms, 3))
		e.expectRes("cost 1 after cost 3", e.reserve(s, peer("45"), 1), okAt(1500*ms, 4))
		// A cost too large to ever be represented is an error.
		if _, err := e.lim.Reserve(e.ctx, s, peer("45"), 1<<50); !errors.Is(err, sluice.ErrInvalidCost) {
			e.t.Errorf("cost 2^50: error %v, want ErrInvalidCost", err)
		}
	}},

	{"ReserveQueueDrains", func(e *env) {
		s := carrier(2 * time.Second)
		for range 8 {
			e.reserve(s, peer("45"), 1)
		}
		// At T0+1.75s the last slot is due now: it is still pending.
		e.clock.Set(T0.Add(1750 * ms))
		e.expectRes("at the last slot", e.reserve(s, peer("45"), 1), okAt(250*ms, 2))
		// Long after, the schedule is idle again and starts at now: no
		// burst is saved up.
		e.clock.Set(T0.Add(10 * time.Second))
		e.expectRes("idle", e.reserve(s, peer("45"), 1), okAt(0, 1))
		e.expectRes("idle, second", e.reserve(s, peer("45"), 1), okAt(250*ms, 2))
	}},

	{"CancelLastSlot", func(e *env) {
		s := carrier(2 * time.Second)
		a := e.reserve(s, peer("45"), 1)
		b := e.reserve(s, peer("45"), 1)
		c := e.reserve(s, peer("45"), 1)
		e.expectCancel("the last", s, peer("45"), c.ID, true)
		e.expectCancel("the last, again", s, peer("45"), c.ID, false)
		// The last slot is free again.
		c2 := e.reserve(s, peer("45"), 1)
		e.expectRes("after cancelling the last", c2, okAt(500*ms, 3))
		if c2.ID == c.ID {
			e.t.Errorf("a new reservation reused the cancelled ID %q", c.ID)
		}
		e.expectCancel("the cancelled ID, after its slot was reused", s, peer("45"), c.ID, false)
		// A hole in the middle is not filled.
		e.expectCancel("the middle", s, peer("45"), b.ID, true)
		d := e.reserve(s, peer("45"), 1)
		e.expectRes("after cancelling the middle", d, okAt(750*ms, 3))
		e.expectCancel("an unknown ID", s, peer("45"), "no-such-id", false)
		e.expectCancel("an empty ID", s, peer("45"), "", false)
		e.expectCancel("another queue", s, peer("46"), d.ID, false)
		// After its slot has passed a reservation can no longer be
		// cancelled.
		e.clock.Set(T0.Add(600 * ms))
		e.expectCancel("a passed slot", s, peer("45"), a.ID, false)
		e.expectCancel("a passed slot (2)", s, peer("45"), c2.ID, false)
		// c2 (T0+500ms to T0+750ms) still holds the queue, d waits: the
		// new one is the third in line.
		e.expectRes("queue after the passed slots", e.reserve(s, peer("45"), 1), okAt(400*ms, 3))
	}},

	{"CancelKeepsRate", func(e *env) {
		// Cancelling every pending reservation moves the next slot back to
		// the end of the latest one held, even when its slot has passed: a
		// call that left at T0 is followed by one at T0+250ms, never
		// earlier.
		s := carrier(2 * time.Second)
		e.reserve(s, peer("45"), 1)
		b := e.reserve(s, peer("45"), 1)
		c := e.reserve(s, peer("45"), 1)
		e.clock.Advance(100 * ms)
		e.expectCancel("c", s, peer("45"), c.ID, true)
		e.expectCancel("b", s, peer("45"), b.ID, true)
		// The first, until T0+250ms, is still in line ahead of it.
		e.expectRes("after cancelling all pending", e.reserve(s, peer("45"), 1), okAt(150*ms, 2))
		// The same with cost 2: its end is 500ms after its slot.
		w := carrier(2 * time.Second)
		w.Name = "wide"
		e.reserve(w, peer("45"), 2)
		x := e.reserve(w, peer("45"), 1)
		e.clock.Advance(100 * ms)
		e.expectCancel("x", w, peer("45"), x.ID, true)
		e.expectRes("after cost 2", e.reserve(w, peer("45"), 1), okAt(400*ms, 2))
	}},

	{"ReserveSelectsQueues", func(e *env) {
		s := carrier(2 * time.Second)
		for range 3 {
			e.reserve(s, peer("45"), 1)
		}
		e.expectRes("carrier 46", e.reserve(s, peer("46"), 1), okAt(0, 1))
		other := carrier(2 * time.Second)
		other.Name = "carrier2"
		e.expectRes("another schedule", e.reserve(other, peer("45"), 1), okAt(0, 1))
		// One queue for every request when By is empty; attributes are
		// ignored.
		one := &sluice.Schedule{Name: "one", Rate: sluice.Rate{Events: 10, Per: time.Second}, MaxDelay: time.Second}
		e.expectRes("no By, a", e.reserve(one, peer("a"), 1), okAt(0, 1))
		e.expectRes("no By, b", e.reserve(one, nil, 1), okAt(100*ms, 2))
		// Distinct values never share a queue, whatever they contain.
		pair := &sluice.Schedule{Name: "pair", By: []string{"a", "b"}, Rate: sluice.Rate{Events: 1, Per: time.Second}}
		values := [][2]string{{"x:y", "z"}, {"x", "y:z"}, {"{x}", ""}, {"", "{x}"}, {"x,y", ""}, {"x", "y"}, {"%", "ü"}}
		for _, v := range values {
			e.expectRes(fmt.Sprintf("pair %q", v), e.reserve(pair, map[string]string{"a": v[0], "b": v[1]}, 1), okAt(0, 1))
		}
	}},

	{"ReserveBadInput", func(e *env) {
		s := carrier(time.Second)
		valid := func(f func(s *sluice.Schedule)) *sluice.Schedule {
			c := *carrier(time.Second)
			f(&c)
			return &c
		}
		checks := []struct {
			name  string
			s     *sluice.Schedule
			attrs map[string]string
			cost  int64
			want  error
		}{
			{"cost 0", s, peer("45"), 0, sluice.ErrInvalidCost},
			{"cost -1", s, peer("45"), -1, sluice.ErrInvalidCost},
			{"nil schedule", nil, peer("45"), 1, sluice.ErrInvalidSchedule},
			{"no name", valid(func(s *sluice.Schedule) { s.Name = "" }), peer("45"), 1, sluice.ErrInvalidSchedule},
			{"zero rate", valid(func(s *sluice.Schedule) { s.Rate = sluice.Rate{} }), peer("45"), 1, sluice.ErrInvalidSchedule},
			{"zero period", valid(func(s *sluice.Schedule) { s.Rate.Per = 0 }), peer("45"), 1, sluice.ErrInvalidSchedule},
			{"faster than 1/µs", valid(func(s *sluice.Schedule) { s.Rate = sluice.Rate{Events: 2000, Per: ms} }), peer("45"), 1, sluice.ErrInvalidSchedule},
			{"negative max delay", valid(func(s *sluice.Schedule) { s.MaxDelay = -1 }), peer("45"), 1, sluice.ErrInvalidSchedule},
			{"negative max queue", valid(func(s *sluice.Schedule) { s.MaxQueue = -1 }), peer("45"), 1, sluice.ErrInvalidSchedule},
			{"empty By", valid(func(s *sluice.Schedule) { s.By = []string{""} }), peer("45"), 1, sluice.ErrInvalidSchedule},
			{"repeated By", valid(func(s *sluice.Schedule) { s.By = []string{"carrier", "carrier"} }), peer("45"), 1, sluice.ErrInvalidSchedule},
			{"missing attribute", s, map[string]string{"peer": "45"}, 1, sluice.ErrMissingAttribute},
			{"nil attributes", s, nil, 1, sluice.ErrMissingAttribute},
		}
		for _, c := range checks {
			r, err := e.lim.Reserve(e.ctx, c.s, c.attrs, c.cost)
			if !errors.Is(err, c.want) || r.OK || r.Degraded {
				e.t.Errorf("Reserve %s: %+v, %v; want %v", c.name, r, err, c.want)
			}
			r, err = e.lim.Wait(e.ctx, c.s, c.attrs, c.cost)
			if !errors.Is(err, c.want) || r.OK {
				e.t.Errorf("Wait %s: %+v, %v; want %v", c.name, r, err, c.want)
			}
			if c.cost < 1 {
				continue
			}
			ok, err := e.lim.Cancel(e.ctx, c.s, c.attrs, "1")
			if !errors.Is(err, c.want) || ok {
				e.t.Errorf("Cancel %s: %v, %v; want %v", c.name, ok, err, c.want)
			}
		}
		if e.target.TTLs != nil {
			keys, err := e.target.TTLs(e.ctx)
			if err != nil {
				e.t.Fatal(err)
			}
			if len(keys) != 0 {
				e.t.Errorf("bad input left keys: %v", keys)
			}
		}
		e.expectRes("after bad input", e.reserve(s, peer("45"), 1), okAt(0, 1))
	}},

	{"ReserveKeysExpire", func(e *env) {
		if e.target.TTLs == nil {
			e.t.Skip("store reports no TTLs")
		}
		// A queue expires at the end of its last reservation, so its TTL is
		// at most MaxDelay plus the longest reservation's length. A store
		// may expire keys on a clock of its own (Redis does), so the bounds
		// are the TTLs set at each key's last write.
		s := carrier(500 * ms)
		for range 3 {
			e.reserve(s, peer("45"), 1) // the last ends at T0+750ms
		}
		e.expectRes("rejected", e.reserve(s, peer("45"), 1), rejected(sluice.ReasonDelay, 750*ms, 3))
		e.reserve(s, peer("46"), 2) // ends at T0+500ms
		e.reserve(s, peer("47"), 1) // ends at T0+250ms
		e.clock.Advance(100 * ms)
		e.reserve(s, peer("47"), 1) // at T0+250ms, ends at T0+500ms
		bounds := []time.Duration{750 * ms, 500 * ms, 400 * ms}
		e.expectTTLs("after reserving", bounds)
		// Cancelling a queue's only reservation leaves nothing behind.
		x := e.reserve(s, peer("48"), 1)
		e.expectCancel("the only reservation", s, peer("48"), x.ID, true)
		e.expectTTLs("after cancelling", bounds)
	}},

	{"ReserveConcurrent", func(e *env) {
		// Many callers at one instant: exactly the slots within MaxDelay
		// are given, each once.
		s := carrier(10 * time.Second)
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			slots []time.Duration
		)
		for range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 4 {
					r, err := e.lim.Reserve(e.ctx, s, peer("45"), 1)
					if err != nil {
						e.t.Error(err)
						return
					}
					if r.OK {
						mu.Lock()
						slots = append(slots, r.Slot.Sub(T0))
						mu.Unlock()
					}
				}
			}()
		}
		wg.Wait()
		slices.Sort(slots)
		if len(slots) != 41 {
			e.t.Fatalf("reserved %d slots, want 41 (0 to 10s every 250ms)", len(slots))
		}
		for i, got := range slots {
			if want := time.Duration(i) * 250 * ms; got != want {
				e.t.Fatalf("slot %d at T0+%v, want T0+%v", i, got, want)
			}
		}
	}},
}

// reserve reserves cost intervals on s and fails the case on error.
func (e *env) reserve(s *sluice.Schedule, attrs map[string]string, cost int64) sluice.Reservation {
	e.t.Helper()
	r, err := e.lim.Reserve(e.ctx, s, attrs, cost)
	if err != nil {
		e.t.Fatalf("Reserve(%s, %v, %d) at T0+%v: %v", s.Name, attrs, cost, e.elapsed(), err)
	}
	return r
}

// expectCancel cancels id and checks whether it was cancelled.
func (e *env) expectCancel(what string, s *sluice.Schedule, attrs map[string]string, id string, want bool) {
	e.t.Helper()
	got, err := e.lim.Cancel(e.ctx, s, attrs, id)
	if err != nil {
		e.t.Fatalf("cancel %s at T0+%v: %v", what, e.elapsed(), err)
	}
	if got != want {
		e.t.Errorf("cancel %s at T0+%v: got %v, want %v", what, e.elapsed(), got, want)
	}
}

// resOutcome is the part of a Reservation the cases compare.
type resOutcome struct {
	OK     bool
	Delay  time.Duration
	Queue  int64
	Reason sluice.Reason
}

func okAt(delay time.Duration, queue int64) resOutcome {
	return resOutcome{OK: true, Delay: delay, Queue: queue}
}

func rejected(reason sluice.Reason, delay time.Duration, queue int64) resOutcome {
	return resOutcome{Delay: delay, Queue: queue, Reason: reason}
}

// expectRes checks a reservation's outcome, and that its slot is its delay
// after now and that it has an ID exactly when it is OK.
func (e *env) expectRes(what string, r sluice.Reservation, want resOutcome) {
	e.t.Helper()
	got := resOutcome{OK: r.OK, Delay: r.Delay, Queue: r.Queue, Reason: r.Reason}
	if got != want {
		e.t.Errorf("%s at T0+%v:\n got %+v\nwant %+v", what, e.elapsed(), got, want)
	}
	if wantSlot := e.clock.Now().Add(r.Delay); !r.Slot.Equal(wantSlot) {
		e.t.Errorf("%s at T0+%v: slot T0+%v, want T0+%v", what, e.elapsed(), r.Slot.Sub(T0), wantSlot.Sub(T0))
	}
	if r.OK == (r.ID == "") || r.Degraded {
		e.t.Errorf("%s: OK %v with ID %q, degraded %v", what, r.OK, r.ID, r.Degraded)
	}
}

// expectTTLs checks that the store holds one key per wanted TTL, and that
// each key's TTL is positive and at most its wanted bound (plus a
// millisecond, the resolution of Redis's PEXPIRE), in any order.
func (e *env) expectTTLs(what string, bounds []time.Duration) {
	e.t.Helper()
	keys, err := e.target.TTLs(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	var ttls []time.Duration
	for _, ttl := range keys {
		ttls = append(ttls, ttl)
	}
	slices.Sort(ttls)
	want := slices.Sorted(slices.Values(bounds))
	if len(ttls) != len(want) {
		e.t.Fatalf("%s: %d keys %v, want %d", what, len(keys), keys, len(want))
	}
	for i := range ttls {
		if ttls[i] <= 0 || ttls[i] > want[i]+ms {
			e.t.Errorf("%s: TTLs %v, want each positive and at most %v", what, keys, want)
			return
		}
	}
}
