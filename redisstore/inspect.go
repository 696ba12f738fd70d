package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/sluicerate/sluice/store"
)

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

	// State is, for a GCRA bucket, its theoretical arrival time (µs since
	// the Unix epoch: when the bucket is full again), and for a sliding
	// counter its bucket index (time / window) and the previous and current
	// buckets' counts. Empty for a log, whose Entries tell its state.
	State []int64
}

// Entry is one recorded event.
type Entry struct {
	// Time is when it was recorded, on the store's clock.
	Time time.Time

	// Cost is its cost.
	Cost int64
}

// Inspect reads, changing nothing, the window of every check of req, in
// order, and the store's time: the Redis server's, or Config.Clock's when
// set (read with the last window; each window is read on its own). It is for operators looking at a store
// (sluice inspect), not for deciding: the windows may change between
// Inspect and any later call. sluice.Resolve gives the request of a policy
// and attributes.
func (s *Store) Inspect(ctx context.Context, req *store.Request) ([]Window, time.Time, error) {
	ks := s.Keys(req)
	// One call per key: with SlotsPerRule the keys of a request may lie in
	// several cluster slots.
	windows := make([]Window, len(ks))
	var now time.Time
	for i, k := range ks {
		w, t, err := s.inspect(ctx, []string{k})
		if err != nil {
			return nil, time.Time{}, err
		}
		windows[i], now = w[0], t
		windows[i].Rule = req.Checks[i].Rule
	}
	return windows, now, nil
}

// InspectKey reads, changing nothing, one window key found without the
// policy's definition (by SCAN with PolicyPattern, say): its rule is the
// one its name gives, and its entries, TTL and the server's time are read
// as by Inspect.
func (s *Store) InspectKey(ctx context.Context, key string) (Window, time.Time, error) {
	windows, now, err := s.inspect(ctx, []string{key})
	if err != nil {
		return Window{}, time.Time{}, err
	}
	w := windows[0]
	if i := strings.LastIndex(key, "}:"); i >= 0 {
		parts := strings.SplitN(key[i+2:], ":", 3)
		if len(parts) >= 2 {
			w.Rule, _ = url.PathUnescape(parts[1])
		}
	}
	return w, now, nil
}

// PolicyPattern returns the SCAN MATCH pattern of every key of the policy
// named policy, and a function that reports whether such a key is a window
// for the attribute values given: every value in its name (in the hash tag
// and after the rule) is one of values. A rule without attributes matches
// any values.
func (s *Store) PolicyPattern(policy string, values []string) (pattern string, match func(key string) bool) {
	enc := string(appendPart(nil, policy))
	head := s.prefix + ":{" + enc
	var b strings.Builder
	for _, c := range head {
		if strings.ContainsRune(`*?[]\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	b.WriteByte('*')
	encoded := make(map[string]bool, len(values))
	for _, v := range values {
		encoded[string(appendPart(nil, v))] = true
	}
	return b.String(), func(key string) bool {
		if !strings.HasPrefix(key, head) {
			return false
		}
		rest := key[len(head):]
		end := strings.Index(rest, "}:")
		if end < 0 {
			return false
		}
		tag, tail := rest[:end], rest[end+2:]
		if tag != "" && !strings.HasPrefix(tag, ",") {
			return false // another policy whose name starts with this one
		}
		if !strings.HasPrefix(tail, enc+":") {
			return false
		}
		var parts []string
		if tag != "" {
			parts = strings.Split(tag[1:], ",")
		}
		if _, vals, ok := strings.Cut(tail[len(enc)+1:], ":"); ok {
			parts = append(parts, strings.Split(vals, ",")...)
		}
		for _, p := range parts {
			if !encoded[p] {
				return false
			}
		}
		return true
	}
}

// inspect runs inspect.lua over keys, which share one slot.
func (s *Store) inspect(ctx context.Context, ks []string) ([]Window, time.Time, error) {
	if s.closed.Load() {
		return nil, time.Time{}, store.ErrClosed
	}
	reply, err := run(ctx, s.ev, inspectScript, ks, []string{s.nowArg()})
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
		w := Window{Key: ks[k]}
		switch pttl := reply[i]; {
		case pttl == -1:
			w.TTL = -1
		case pttl > 0:
			w.TTL = time.Duration(pttl) * time.Millisecond
		}
		n := reply[i+1]
		i += 2
		if n < 0 && int64(len(reply)-i) >= -n {
			w.State = append([]int64(nil), reply[i:i-int(n)]...)
			i -= int(n)
			out[k] = w
			continue
		}
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
