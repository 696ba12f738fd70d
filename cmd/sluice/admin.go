package main

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/sluicerate/sluice/internal/server"
	"github.com/sluicerate/sluice/store"
)

// defaultAdminAddr is where sluice serve puts its admin view (the live
// page, its API, /metrics and pprof) unless --admin says otherwise:
// loopback only, since the page shows attribute values.
const defaultAdminAddr = "127.0.0.1:9464"

// adminTokenEnv names the environment variable that may hold the admin
// token instead of --admin-token (which other users of the machine can see
// in the process list).
const adminTokenEnv = "SLUICE_ADMIN_TOKEN"

// adminAddr returns the address to listen on for --admin value addr: a bare
// port (":9464") listens on loopback only; naming a host (0.0.0.0:9464,
// [::]:9464) is how to serve other machines.
func adminAddr(addr string) string {
	if strings.HasPrefix(addr, ":") {
		return "127.0.0.1" + addr
	}
	return addr
}

// queueReader reads a schedule's queue from Redis for the admin inspector:
// the queue's sorted set (score: the slot in µs; member: the ID, ending in
// "." and the µs it holds, see redisstore's reserve.go) and Redis's time.
func (s *openedStore) queueReader() server.QueueReader {
	if s.Redis == nil || s.Client == nil {
		return nil
	}
	return func(ctx context.Context, q store.Queue) ([]server.QueuedSlot, time.Time, error) {
		c := s.Client
		key := s.Redis.QueueKey(q)
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
		out := make([]server.QueuedSlot, 0, len(zs))
		for _, z := range zs {
			sl := server.QueuedSlot{Slot: time.UnixMicro(int64(z.Score)), ID: z.Member}
			if _, length, ok := strings.Cut(z.Member, "."); ok {
				if us, err := strconv.ParseInt(length, 10, 64); err == nil {
					sl.Length = time.Duration(us) * time.Microsecond
				}
			}
			out = append(out, sl)
		}
		return out, now, nil
	}
}

// listenAdmin opens the admin listener at addr. When addr is the default
// and is taken (another sluice serve on this machine, say), the server runs
// without its admin view and says so rather than failing: only an address
// given with --admin must be served.
func listenAdmin(addr string, explicit bool) (net.Listener, error) {
	if addr == "" {
		return nil, nil
	}
	l, err := net.Listen("tcp", adminAddr(addr))
	if err != nil && !explicit {
		return nil, fmt.Errorf("the admin view is off: %w; choose a free address with --admin ADDR, or turn it off with --admin ''", err)
	}
	if err != nil {
		return nil, fmt.Errorf("--admin: %w", err)
	}
	return l, nil
}
