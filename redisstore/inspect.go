package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/sluicerate/sluice"
)

//go:embed inspect.lua
var inspectLua string

var inspectScript = newScript("inspect.lua", inspectLua)

// Window is the stored state of one rule's window, as Inspect reads it.
type Window struct {
	// Rule is the rule's name and Key the Redis key of its window.
	Rule, Key string

	// Entries are the entries the key holds, oldest first: those in the
	// window and, until the key expires, the newest one even after it left
	// the window (it enforces the rule's minimum gap).
	Entries []Entry

	// TTL is the key's remaining time to live; -1 for a key without one,
	// and 0 when the key does not exist.
	TTL time.Duration
}

// Entry is one recorded event.
type Entry struct {
	// Time is when it was recorded, on the store's clock.
	Time time.Time

	// Cost is its cost.
	Cost int64
}

// Inspect reads, changing nothing, the windows of every rule of p for
// attrs, in policy order, and the Redis server's time. It is for operators
// looking at a store (sluice inspect), not for deciding: the windows may
// change between Inspect and any later call.
func (s *Store) Inspect(ctx context.Context, p *sluice.Policy, attrs map[string]string) ([]Window, time.Time, error) {
	ks, err := s.Keys(p, attrs)
	if err != nil {
		return nil, time.Time{}, err
	}
	reply, err := run(ctx, s.ev, inspectScript, ks, nil)
	if err != nil {
		return nil, time.Time{}, err
	}
	bad := func() ([]Window, time.Time, error) {
		return nil, time.Time{}, fmt.Errorf("redisstore: inspect.lua replied %d integers, which do not describe %d keys", len(reply), len(ks))
	}
	if len(reply) < 1 {
		return bad()
	}
	now := time.UnixMicro(reply[0])
	out := make([]Window, len(ks))
	i := 1
	for k := range ks {
		if i+2 > len(reply) {
			return bad()
		}
		w := Window{Rule: p.Rules[k].Name, Key: ks[k]}
		switch pttl := reply[i]; {
		case pttl == -1:
			w.TTL = -1
		case pttl > 0:
			w.TTL = time.Duration(pttl) * time.Millisecond
		}
		n := reply[i+1]
		i += 2
		if n < 0 || int64(len(reply)-i) < 2*n {
			return bad()
		}
		for range n {
			w.Entries = append(w.Entries, Entry{Time: time.UnixMicro(reply[i]), Cost: reply[i+1]})
			i += 2
		}
		out[k] = w
	}
	if i != len(reply) {
		return bad()
	}
	return out, now, nil
}
