// Package redisinspect is the admin view's Inspector of a Redis store: the
// entries of a policy's windows, or a concurrency rule's live leases
// (redisstore.Store.Inspect), and the reservations of a schedule's queue,
// read with Redis's clock. It is apart from package admin so that the view
// knows no store's type.
package redisinspect

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicerate/sluice/internal/admin"
	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/store"
)

// Inspector reads Store's windows, and its queues with Client. Client may
// be nil: queues are then not read.
type Inspector struct {
	Store  *redisstore.Store
	Client rueidis.Client
}

var _ admin.Inspector = Inspector{}

// Name returns "redis".
func (Inspector) Name() string { return "redis" }

// Windows reads the window of every check of req, with the slices leased
// from a budgeted one (redisstore.Store.Inspect).
func (i Inspector) Windows(ctx context.Context, req *store.Request) ([]admin.Window, time.Time, error) {
	ws, now, err := i.Store.Inspect(ctx, req)
	if err != nil {
		return nil, time.Time{}, err
	}
	out := make([]admin.Window, len(ws))
	for j, w := range ws {
		out[j] = admin.Window{Key: w.Key, TTL: w.TTL, Entries: make([]admin.Entry, len(w.Entries))}
		for k, e := range w.Entries {
			out[j].Entries[k] = admin.Entry{Time: e.Time, Cost: e.Cost}
		}
		for _, l := range w.Leases {
			out[j].Leases = append(out[j].Leases, admin.Lease{Token: l.Token, Expires: l.Expires})
		}
		for _, sl := range w.Slices {
			out[j].Slices = append(out[j].Slices, admin.Slice{Units: sl.Units, Ends: sl.At})
		}
	}
	return out, now, nil
}

// Queue reads a schedule's queue: its sorted set (score: the slot in µs;
// member: the ID, whose length redisstore.ReservationLength reads) and
// Redis's time.
func (i Inspector) Queue(ctx context.Context, q store.Queue) ([]admin.QueuedSlot, time.Time, error) {
	c := i.Client
	if c == nil {
		return nil, time.Time{}, errors.New("redisinspect: no client to read queues with")
	}
	key := i.Store.QueueKey(q)
	tm, err := c.Do(ctx, c.B().Time().Build()).AsIntSlice()
	if err != nil {
		return nil, time.Time{}, err
	}
	if len(tm) != 2 {
		return nil, time.Time{}, fmt.Errorf("redis TIME replied %d values, want 2", len(tm))
	}
	now := time.Unix(tm[0], tm[1]*1000)
	zs, err := c.Do(ctx, c.B().Zrange().Key(key).Min("0").Max("-1").Withscores().Build()).AsZScores()
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("reading queue %s: %w", key, err)
	}
	out := make([]admin.QueuedSlot, 0, len(zs))
	for _, z := range zs {
		sl := admin.QueuedSlot{Slot: time.UnixMicro(int64(z.Score)), ID: z.Member}
		if length, ok := redisstore.ReservationLength(z.Member); ok {
			sl.Length = length
		}
		out = append(out, sl)
	}
	return out, now, nil
}
