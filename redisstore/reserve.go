package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/sluicerate/sluice/store"
)

// Schedules. Each schedule's queue (one per combination of its By values)
// is one sorted set, written only by reserve.lua and cancel.lua, one round
// trip each, on Redis's clock:
//
//	<prefix>:{<schedule>[,<values>]}2q
//
// A reservation's score is its slot in µs and its member is its ID: 16 random
// hex digits, '.', and the µs it holds (cost × interval), which cancel.lua
// needs when the reservation becomes the last. The kind q (keys.go) keeps a
// queue from ever sharing a key with a policy's window. The key expires at the end of its last
// reservation: an idle schedule leaves nothing behind.

var _ store.Scheduler = (*Store)(nil)

// QueueKey returns the Redis key of queue q: the key Reserve and Cancel
// read and write.
func (s *Store) QueueKey(q store.Queue) string { return s.names.queue(q) }

// nowArg is the time argument of the scripts: Config.Clock's time in µs, or
// "" for Redis's TIME.
func (s *Store) nowArg() string {
	if s.clock == nil {
		return ""
	}
	return strconv.FormatInt(s.clock().UnixMicro(), 10)
}

// nowMicros is decide.lua's time: Config.Clock's time in µs, or -1 for
// Redis's TIME.
func (s *Store) nowMicros() int64 {
	if s.clock == nil {
		return -1
	}
	return max(0, s.clock().UnixMicro())
}

// Reserve implements store.Scheduler: one round trip runs reserve.lua,
// which gives the next free slot or rejects the request without changing
// anything, on the Redis server's clock (or Config.Clock).
//
// An error from Redis, a lost connection or a context that ends first is
// returned as an error; the slot may or may not have been reserved, and the
// request is never sent again. A slot reserved that way is held until it
// passes: the error is toward sending less, never more.
func (s *Store) Reserve(ctx context.Context, req *store.ReserveRequest) (store.Reservation, error) {
	if s.closed.Load() {
		return store.Reservation{}, store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return store.Reservation{}, err
	}
	length := req.Cost * req.Interval.Microseconds()
	id := fmt.Sprintf("%016x.%d", rand.Uint64(), length)
	args := []string{
		s.nowArg(),
		strconv.FormatInt(length, 10),
		strconv.FormatInt(req.MaxDelay.Microseconds(), 10),
		strconv.FormatInt(req.MaxQueue, 10),
		id,
	}
	reply, err := run(ctx, s.ev, reserveScript, []string{s.names.queue(req.Queue)}, args)
	if err != nil {
		return store.Reservation{}, err
	}
	return parseReservation(reply, id)
}

// parseReservation reads reserve.lua's reply: ok, reason, now, slot, queue.
func parseReservation(reply []int64, id string) (store.Reservation, error) {
	if len(reply) != 5 {
		return store.Reservation{}, fmt.Errorf("redisstore: reserve.lua replied %d integers, want 5", len(reply))
	}
	ok, reason, now, slot, queue := reply[0], reply[1], reply[2], reply[3], reply[4]
	if ok != 0 && ok != 1 || reason < 0 || reason > 2 || (ok == 1) != (reason == 0) || slot < now || queue < int64(ok) {
		return store.Reservation{}, fmt.Errorf("redisstore: reserve.lua replied ok=%d reason=%d now=%d slot=%d queue=%d, not a valid reservation",
			ok, reason, now, slot, queue)
	}
	r := store.Reservation{
		OK:    ok == 1,
		Delay: time.Duration(slot-now) * time.Microsecond,
		Slot:  time.UnixMicro(slot),
		Queue: queue,
	}
	switch reason {
	case 0:
		r.ID = id
	case 1:
		r.Reason = store.ReasonDelay
	case 2:
		r.Reason = store.ReasonQueue
	}
	return r, nil
}

// Cancel implements store.Scheduler: one round trip runs cancel.lua. An ID
// this store could not have given is not sent.
func (s *Store) Cancel(ctx context.Context, req *store.CancelRequest) (bool, error) {
	if s.closed.Load() {
		return false, store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if !validID(req.ID) {
		return false, nil
	}
	args := []string{s.nowArg(), req.ID}
	reply, err := run(ctx, s.ev, cancelScript, []string{s.names.queue(req.Queue)}, args)
	if err != nil {
		return false, err
	}
	if len(reply) != 2 || reply[0] != 0 && reply[0] != 1 {
		return false, fmt.Errorf("redisstore: cancel.lua replied %v, want {0 or 1, now}", reply)
	}
	return reply[0] == 1, nil
}

// ReservationLength returns how long the reservation whose ID (its member
// in a queue, see QueueKey) is id holds its slot: the µs after its '.'. It
// reports false when id carries no length.
func ReservationLength(id string) (time.Duration, bool) {
	_, length, ok := strings.Cut(id, ".")
	if !ok {
		return 0, false
	}
	us, err := strconv.ParseInt(length, 10, 64)
	if err != nil {
		return 0, false
	}
	return time.Duration(us) * time.Microsecond, true
}

// validID reports whether id has the form of the IDs Reserve gives: 16 hex
// digits, '.', and a positive length in µs.
func validID(id string) bool {
	hex, length, ok := strings.Cut(id, ".")
	if !ok || len(hex) != 16 || len(length) == 0 || len(length) > 18 {
		return false
	}
	for i := 0; i < len(hex); i++ {
		if c := hex[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	n, err := strconv.ParseInt(length, 10, 64)
	return err == nil && n > 0 && strconv.FormatInt(n, 10) == length
}
