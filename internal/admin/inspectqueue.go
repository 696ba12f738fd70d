package admin

import (
	"context"
	"time"

	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/front"
	"github.com/sluicerate/sluice/internal/wire"
	"github.com/sluicerate/sluice/store"
)

// The key inspector on a schedule: the reservations its queue holds.

// QueuedSlot is one reservation held in a schedule's queue.
type QueuedSlot struct {
	// Slot is when the reservation may go, on the store's clock, and
	// Length how long it holds the queue (cost × interval).
	Slot   time.Time
	Length time.Duration
	ID     string
}

// queueJSON is a schedule's queue.
type queueJSON struct {
	IntervalMS float64 `json:"interval_ms"`
	MaxDelayMS int64   `json:"max_delay_ms"`
	MaxQueue   int64   `json:"max_queue"`

	// Pending counts the reservations whose slot has not passed, and
	// NextDelayMS is the delay a reservation of cost 1 would get now.
	Pending     int64           `json:"pending"`
	NextDelayMS int64           `json:"next_delay_ms"`
	Slots       []queueSlotJSON `json:"slots"`
}

// queueSlotJSON is one reservation of a queue.
type queueSlotJSON struct {
	Slot     time.Time `json:"slot"`
	InMS     int64     `json:"in_ms"` // until the slot; negative when it has passed
	LengthMS float64   `json:"length_ms"`
	ID       string    `json:"id"`
}

// inspectSchedule answers req for a schedule under st.
func (a *admin) inspectSchedule(ctx context.Context, st *front.State, req *inspectRequest) (inspectJSON, *httplimit.Problem) {
	sc, err := st.Policies.Schedule(req.Schedule, req.Attributes)
	if err != nil {
		return inspectJSON{}, front.InputProblem(err)
	}
	out := inspectJSON{Schedule: sc.Name, Store: a.storeKind(), Now: a.v.clock.Now().UTC()}
	if a.insp == nil {
		out.Error = "this store's queues cannot be read; the inspector shows queued slots on Redis"
		return out, nil
	}
	q := store.Queue{Schedule: sc.Name, Values: make([]string, len(sc.By))}
	for i, a := range sc.By {
		q.Values[i] = req.Attributes[a]
	}
	slots, now, err := a.insp.Queue(ctx, q)
	if err != nil {
		out.Error = "reading the queue: " + err.Error()
		return out, nil
	}
	out.Now = now.UTC()
	qj := &queueJSON{IntervalMS: float64(sc.Interval()) / float64(time.Millisecond), MaxDelayMS: wire.Millis(sc.MaxDelay),
		MaxQueue: sc.MaxQueue, Slots: []queueSlotJSON{}}
	next := now
	for _, sl := range slots {
		qj.Slots = append(qj.Slots, queueSlotJSON{Slot: sl.Slot.UTC(), InMS: sl.Slot.Sub(now).Milliseconds(),
			LengthMS: float64(sl.Length) / float64(time.Millisecond), ID: sl.ID})
		if !sl.Slot.Before(now) {
			qj.Pending++
		}
		if end := sl.Slot.Add(sl.Length); end.After(next) {
			next = end
		}
	}
	qj.NextDelayMS = wire.Millis(next.Sub(now))
	out.Queue = qj
	return out, nil
}
