// Package redisinspect is the Inspector (package inspect) of a Redis
// store: the entries of a policy's windows, or a concurrency rule's live
// leases (redisstore.Store.Inspect), the windows of a policy found by their
// keys (Scan), and the reservations of a schedule's queue, read with
// Redis's clock. It is apart from packages admin and inspect so that they
// know no store's type.
package redisinspect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicerate/sluice/internal/inspect"
	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/store"
)

// Inspector reads Store's windows, and its queues and keys with Client.
// Client may be nil: queues are then not read, nor keys scanned.
type Inspector struct {
	Store  *redisstore.Store
	Client rueidis.Client
}

var _ inspect.Inspector = Inspector{}

// Name returns "redis".
func (Inspector) Name() string { return "redis" }

// Windows reads the window of every check of req, with the slices leased
// from a budgeted one (redisstore.Store.Inspect).
func (i Inspector) Windows(ctx context.Context, req *store.Request) ([]inspect.StoredWindow, time.Time, error) {
	ws, now, err := i.Store.Inspect(ctx, req)
	if err != nil {
		return nil, time.Time{}, err
	}
	out := make([]inspect.StoredWindow, len(ws))
	for j := range ws {
		out[j] = stored(&ws[j])
	}
	return out, now, nil
}

// stored is w as package inspect shows it.
func stored(w *redisstore.Window) inspect.StoredWindow {
	out := inspect.StoredWindow{Rule: w.Rule, Key: w.Key, Algorithm: w.Algorithm, TTL: w.TTL, State: w.State,
		SlicesKey: w.SlicesKey, Entries: make([]inspect.StoredEntry, len(w.Entries))}
	for k, e := range w.Entries {
		out.Entries[k] = inspect.StoredEntry{Time: e.Time, Cost: e.Cost}
	}
	for _, l := range w.Leases {
		out.Leases = append(out.Leases, inspect.StoredLease{Token: l.Token, Expires: l.Expires})
	}
	for _, sl := range w.Slices {
		out.Slices = append(out.Slices, inspect.StoredSlice{Units: sl.Units, Ends: sl.At})
	}
	return out
}

// Scan finds, with SCAN on every node, the windows of the policy named
// policy whose attribute values are among attrs' values
// (redisstore.Store.PolicyPattern), and reads each once
// (redisstore.Store.InspectKey), sorted by key, with Redis's time (else now, when it
// finds none). A key that expired since the scan is left out.
func (i Inspector) Scan(ctx context.Context, policy string, attrs map[string]string, now time.Time) ([]inspect.StoredWindow, time.Time, error) {
	if i.Client == nil {
		return nil, time.Time{}, errors.New("redisinspect: no client to scan keys with")
	}
	values := make([]string, 0, len(attrs))
	for _, v := range attrs {
		values = append(values, v)
	}
	pattern, match := i.Store.PolicyPattern(policy, values)
	seen := map[string]bool{}
	var keys []string
	for _, node := range i.Client.Nodes() {
		var cursor uint64
		for {
			entry, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match(pattern).Count(1000).Build()).AsScanEntry()
			if err != nil {
				return nil, time.Time{}, fmt.Errorf("scanning for %s: %w", pattern, err)
			}
			for _, k := range entry.Elements {
				if match(k) && !seen[k] {
					seen[k] = true
					keys = append(keys, k)
				}
			}
			if cursor = entry.Cursor; cursor == 0 {
				break
			}
		}
	}
	slices.Sort(keys)
	var out []inspect.StoredWindow
	read := map[string]bool{} // a window's key and its slices' read it once
	for _, k := range keys {
		w, t, err := i.Store.InspectKey(ctx, k)
		if err != nil {
			return nil, time.Time{}, err
		}
		if read[w.Key] || w.TTL == 0 && len(w.Slices) == 0 {
			continue // read already, or expired since the scan
		}
		read[w.Key] = true
		out, now = append(out, stored(&w)), t
	}
	slices.SortFunc(out, func(a, b inspect.StoredWindow) int { return strings.Compare(a.Key, b.Key) })
	return out, now, nil
}

// Queue reads a schedule's queue: its sorted set (score: the slot in µs;
// member: the ID, whose length redisstore.ReservationLength reads) and
// Redis's time.
func (i Inspector) Queue(ctx context.Context, q store.Queue) ([]inspect.StoredSlot, time.Time, error) {
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
	out := make([]inspect.StoredSlot, 0, len(zs))
	for _, z := range zs {
		sl := inspect.StoredSlot{Slot: time.UnixMicro(int64(z.Score)), ID: z.Member}
		if length, ok := redisstore.ReservationLength(z.Member); ok {
			sl.Length = length
		}
		out = append(out, sl)
	}
	return out, now, nil
}
