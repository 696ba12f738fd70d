package soak

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicerate/sluice/internal/redistest"
)

// ServerSample is what one data server said of itself at one instant
// (INFO replication, commandstats and errorstats): the servers' side of a
// fault, for the trace.
type ServerSample struct {
	At   int64 // ns, CLOCK_REALTIME
	Addr string
	// Err is set when the server did not answer (down, frozen past the
	// probe's deadline, loading).
	Err string
	// Role is "master" or "slave"; ReplID the first 8 characters of
	// master_replid; Online the replicas online (a master's).
	Role   string
	ReplID string
	Online int
	// Scripts counts EVALSHA and EVAL calls, Slots CLUSTER SLOTS and
	// CLUSTER SHARDS calls, Infos INFO calls (the stores' replica polls
	// and this probe's); Errors the error replies by their first word
	// (MOVED, ASK, CLUSTERDOWN, NOSCRIPT...), Failed the commands that
	// failed or were rejected, by name. All since the server started.
	Scripts, Slots, Infos int64
	Errors, Failed        map[string]int64
}

// probeTimeout bounds one probe of one server: a frozen server is
// recorded as not answering, not waited for.
const probeTimeout = 80 * time.Millisecond

// Probe samples every data server of top every period until stop is
// closed, and returns the samples in order of time.
func Probe(top *Topology, period time.Duration, stop <-chan struct{}) []ServerSample {
	var (
		mu  sync.Mutex
		out []ServerSample
		wg  sync.WaitGroup
	)
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			wg.Wait()
			slices.SortFunc(out, func(a, b ServerSample) int { return int(a.At - b.At) })
			return out
		case <-tick.C:
		}
		for _, s := range top.Data() {
			wg.Go(func() {
				sm := sampleServer(s)
				mu.Lock()
				out = append(out, sm)
				mu.Unlock()
			})
		}
	}
}

// sampleServer reads one ServerSample from s.
func sampleServer(s *redistest.Server) ServerSample {
	sm := ServerSample{At: time.Now().UnixNano(), Addr: s.Addr()}
	info, err := s.DoTimeout(probeTimeout, "INFO", "replication", "commandstats", "errorstats")
	if err != nil {
		sm.Err = firstLine(info, err)
		return sm
	}
	sm.Errors, sm.Failed = map[string]int64{}, map[string]int64{}
	for line := range strings.Lines(info) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch {
		case k == "role":
			sm.Role = v
		case k == "master_replid":
			sm.ReplID = v[:min(8, len(v))]
		case strings.HasPrefix(k, "slave") && strings.Contains(v, "state=online"):
			sm.Online++
		case strings.HasPrefix(k, "errorstat_"):
			sm.Errors[strings.TrimPrefix(k, "errorstat_")] = statField(v, "count")
		case strings.HasPrefix(k, "cmdstat_"):
			cmd := strings.TrimPrefix(k, "cmdstat_")
			switch cmd {
			case "evalsha", "eval":
				sm.Scripts += statField(v, "calls")
			case "cluster|slots", "cluster|shards":
				sm.Slots += statField(v, "calls")
			case "info":
				sm.Infos += statField(v, "calls")
			}
			if n := statField(v, "failed_calls") + statField(v, "rejected_calls"); n > 0 {
				sm.Failed[cmd] = n
			}
		}
	}
	return sm
}

// statField returns the integer field name of an INFO line's value
// ("calls=12,usec=...").
func statField(v, name string) int64 {
	for f := range strings.SplitSeq(v, ",") {
		if k, n, _ := strings.Cut(f, "="); k == name {
			x, _ := strconv.ParseInt(n, 10, 64)
			return x
		}
	}
	return 0
}

// ServerTimeline writes, per bucket from from to to (ns, relative to
// mark), what each server did in it: its role and replication ID when they
// change, replicas online, script calls, slot map reads and error replies
// by kind; a server that did not answer a probe says why.
func ServerTimeline(w io.Writer, samples []ServerSample, from, to, mark int64) {
	last := map[string]ServerSample{}
	lines := map[int64][]string{}
	var order []int64
	for _, sm := range samples {
		prev, seen := last[sm.Addr]
		if sm.Err == "" {
			last[sm.Addr] = sm
		}
		if sm.At < from || sm.At >= to {
			continue
		}
		b := (sm.At - from) / bucket
		var parts []string
		switch {
		case sm.Err != "":
			parts = append(parts, "no answer: "+sm.Err)
		case !seen || prev.Err != "":
			parts = append(parts, fmt.Sprintf("%s %s, %d replicas online", sm.Role, sm.ReplID, sm.Online))
		default:
			if sm.Role != prev.Role || sm.ReplID != prev.ReplID || sm.Online != prev.Online {
				parts = append(parts, fmt.Sprintf("now %s %s, %d replicas online", sm.Role, sm.ReplID, sm.Online))
			}
			// A restart starts the counters again.
			restarted := sm.Scripts < prev.Scripts || sm.Infos < prev.Infos
			delta := func(now, before int64) int64 {
				if restarted {
					return now
				}
				return now - before
			}
			if d := delta(sm.Scripts, prev.Scripts); d != 0 {
				parts = append(parts, fmt.Sprintf("%d scripts", d))
			}
			if d := delta(sm.Slots, prev.Slots); d != 0 {
				parts = append(parts, fmt.Sprintf("%d slot reads", d))
			}
			kinds := make([]string, 0, len(sm.Errors))
			for k := range sm.Errors {
				kinds = append(kinds, k)
			}
			slices.Sort(kinds)
			for _, k := range kinds {
				if d := delta(sm.Errors[k], prev.Errors[k]); d != 0 {
					parts = append(parts, fmt.Sprintf("%d %s", d, k))
				}
			}
			cmds := make([]string, 0, len(sm.Failed))
			for k := range sm.Failed {
				cmds = append(cmds, k)
			}
			slices.Sort(cmds)
			for _, k := range cmds {
				if d := delta(sm.Failed[k], prev.Failed[k]); d != 0 {
					parts = append(parts, fmt.Sprintf("%d %s failed", d, k))
				}
			}
			if restarted {
				parts = append(parts, "(restarted)")
			}
		}
		if len(parts) == 0 {
			continue
		}
		if _, ok := lines[b]; !ok {
			order = append(order, b)
		}
		lines[b] = append(lines[b], sm.Addr+": "+strings.Join(parts, ", "))
	}
	slices.Sort(order)
	for _, b := range order {
		at := time.Duration(from + b*bucket - mark)
		fmt.Fprintf(w, "%+7.1fs servers  %s\n", at.Seconds(), strings.Join(lines[b], "; "))
	}
}
