package main

import (
	"context"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"github.com/sluicerate/sluice/redisstore"
)

// admin reads the server's figures.
type admin struct {
	c       rueidis.Client
	windows *redisstore.Store // reads a sluice window's entries (InspectKey); made on first use
}

func newAdmin(addr string) (*admin, error) {
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true})
	if err != nil {
		return nil, err
	}
	return &admin{c: c}, nil
}

func (a *admin) info(section, field string) float64 {
	s, err := a.c.Do(context.Background(), a.c.B().Info().Section(section).Build()).ToString()
	if err != nil {
		return 0
	}
	sum := 0.0
	for _, line := range strings.Split(s, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok && (k == field || field == "cpu" && (k == "used_cpu_sys" || k == "used_cpu_user")) {
			f, _ := strconv.ParseFloat(v, 64)
			sum += f
		}
	}
	return sum
}

// cpu returns the server's CPU time so far, in seconds.
func (a *admin) cpu() float64 { return a.info("cpu", "cpu") }

// usedMemory returns used_memory in bytes.
func (a *admin) usedMemory() float64 { return a.info("memory", "used_memory") }

// commandStats returns, per command that ran since the last resetStats,
// its calls and its µs (INFO commandstats), in the server's order.
func (a *admin) commandStats() (names []string, calls, usec []float64) {
	s, err := a.c.Do(context.Background(), a.c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		return nil, nil, nil
	}
	for _, line := range strings.Split(s, "\r\n") {
		rest, ok := strings.CutPrefix(line, "cmdstat_")
		name, fields, ok2 := strings.Cut(rest, ":")
		if !ok || !ok2 {
			continue
		}
		var c, u float64
		for _, f := range strings.Split(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			switch k {
			case "calls":
				c, _ = strconv.ParseFloat(v, 64)
			case "usec":
				u, _ = strconv.ParseFloat(v, 64)
			}
		}
		names, calls, usec = append(names, name), append(calls, c), append(usec, u)
	}
	return names, calls, usec
}

// resetStats zeroes the server's command statistics.
func (a *admin) resetStats() {
	a.c.Do(context.Background(), a.c.B().ConfigResetstat().Build())
}

func (a *admin) flush() {
	a.c.Do(context.Background(), a.c.B().Flushall().Build())
}

func (a *admin) dbsize() int64 {
	n, _ := a.c.Do(context.Background(), a.c.B().Dbsize().Build()).AsInt64()
	return n
}

// memoryUsage returns MEMORY USAGE of key counting every element, and the
// number of events a sorted-set log holds (0 for other types or a missing
// key): one per member, except in a sluice window, whose last member is its
// epoch ("@<µs>") and whose entries, as redisstore reads them, hold their
// cost in events each.
func (a *admin) memoryUsage(key string, zset bool) (bytes, events int64, ok bool) {
	ctx := context.Background()
	n, err := a.c.Do(ctx, a.c.B().MemoryUsage().Key(key).Samples(0).Build()).AsInt64()
	if err != nil {
		return 0, 0, false
	}
	if !zset {
		return n, 0, true
	}
	members, _ := a.c.Do(ctx, a.c.B().Zrange().Key(key).Min("0").Max("-1").Build()).AsStrSlice()
	if len(members) == 0 || !strings.HasPrefix(members[len(members)-1], "@") {
		return n, int64(len(members)), true
	}
	if a.windows == nil {
		if a.windows, err = redisstore.NewFromClient(a.c, redisstore.Config{}); err != nil {
			return n, 0, false
		}
	}
	w, _, err := a.windows.InspectKey(ctx, key)
	if err != nil {
		return n, 0, false
	}
	for _, e := range w.Entries {
		events += e.Cost
	}
	return n, events, true
}

// encoding returns OBJECT ENCODING of key.
func (a *admin) encoding(key string) string {
	s, _ := a.c.Do(context.Background(), a.c.B().ObjectEncoding().Key(key).Build()).ToString()
	return s
}

// perKey samples MEMORY USAGE over up to n of keys 0..total-1 and returns
// the mean bytes per key and per event held (per event 0 for non-logs).
func (a *admin) perKey(inst *instance, total, n int) (perKey, perEvent float64) {
	if inst.redisKey == nil {
		return 0, 0
	}
	step := max(1, total/n)
	var bytes, entries, keys int64
	for i := 0; i < total; i += step {
		b, e, ok := a.memoryUsage(inst.redisKey(i), inst.zset)
		if !ok {
			continue
		}
		bytes += b
		entries += e
		keys++
	}
	if keys == 0 {
		return 0, 0
	}
	perKey = float64(bytes) / float64(keys)
	if entries > 0 {
		perEvent = float64(bytes) / float64(entries)
	}
	return perKey, perEvent
}

// memoryOfAll returns MEMORY USAGE (SAMPLES 0) summed over every key of
// the server, and the number of keys.
func (a *admin) memoryOfAll() (bytes, keys int64) {
	ctx := context.Background()
	var cursor uint64
	for {
		e, err := a.c.Do(ctx, a.c.B().Scan().Cursor(cursor).Count(1000).Build()).AsScanEntry()
		if err != nil {
			return bytes, keys
		}
		for _, k := range e.Elements {
			if n, err := a.c.Do(ctx, a.c.B().MemoryUsage().Key(k).Samples(0).Build()).AsInt64(); err == nil {
				bytes += n
				keys++
			}
		}
		if cursor = e.Cursor; cursor == 0 {
			return bytes, keys
		}
	}
}
