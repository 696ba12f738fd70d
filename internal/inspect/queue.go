package inspect

import (
	"context"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/wire"
	"github.com/sluicerate/sluice/store"
)

// Queue is a schedule's queue.
type Queue struct {
	IntervalMS float64 `json:"interval_ms"`
	MaxDelayMS int64   `json:"max_delay_ms"`
	MaxQueue   int64   `json:"max_queue"`

	// Pending counts the reservations whose slot has not passed, and
	// NextDelayMS is the delay a reservation of cost 1 would get now.
	Pending     int64  `json:"pending"`
	NextDelayMS int64  `json:"next_delay_ms"`
	Slots       []Slot `json:"slots"`
}

// Slot is one reservation of a queue.
type Slot struct {
	Slot     time.Time `json:"slot"`
	InMS     int64     `json:"in_ms"` // until the slot; negative when it has passed
	LengthMS float64   `json:"length_ms"`
	ID       string    `json:"id"`
}

// Schedule inspects the queue of schedule sc for attrs: the reservations
// it holds, at the store's time (else at now). Without an Inspector, or
// when the store fails, the Report's Error says why there is no Queue.
func (s Source) Schedule(ctx context.Context, sc *sluice.Schedule, attrs map[string]string, now time.Time) Report {
	out := Report{Schedule: sc.Name, Store: s.Store, Now: now.UTC()}
	if s.Inspector == nil {
		out.Error = "this store's queues cannot be read; the inspector shows queued slots on Redis"
		return out
	}
	q := store.Queue{Schedule: sc.Name, Values: make([]string, len(sc.By))}
	for i, a := range sc.By {
		q.Values[i] = attrs[a]
	}
	slots, now, err := s.Inspector.Queue(ctx, q)
	if err != nil {
		out.Error = "reading the queue: " + err.Error()
		return out
	}
	out.Now, out.Queue = now.UTC(), newQueue(sc, slots, now)
	return out
}

// newQueue computes the queue of sc that holds slots at now.
func newQueue(sc *sluice.Schedule, slots []StoredSlot, now time.Time) *Queue {
	q := &Queue{IntervalMS: float64(sc.Interval()) / float64(time.Millisecond), MaxDelayMS: wire.Millis(sc.MaxDelay),
		MaxQueue: sc.MaxQueue, Slots: []Slot{}}
	next := now
	for _, sl := range slots {
		q.Slots = append(q.Slots, Slot{Slot: sl.Slot.UTC(), InMS: sl.Slot.Sub(now).Milliseconds(),
			LengthMS: float64(sl.Length) / float64(time.Millisecond), ID: sl.ID})
		if !sl.Slot.Before(now) {
			q.Pending++
		}
		if end := sl.Slot.Add(sl.Length); end.After(next) {
			next = end
		}
	}
	q.NextDelayMS = wire.Millis(next.Sub(now))
	return q
}
