package soak

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicerate/sluice/internal/redistest"
	"github.com/sluicerate/sluice/redisstore"
)

// Topology is the Redis a run decides against, and the faults it suffers.
type Topology struct {
	Name string
	// Config is how a store connects (Mode, Addrs, MasterName).
	Config redisstore.Config
	// Data returns every data server (no sentinels); Masters those that
	// are masters now; Servers every process the topology started, data
	// servers and sentinels.
	Data, Masters, Servers func() []*redistest.Server
	// Owner returns the master that holds key now, and its replica (nil
	// on a standalone server).
	Owner func(key string) (master, replica *redistest.Server, err error)
	// Settle waits until the topology is healthy again: every node up,
	// replicas linked, the sentinels agreed on one master.
	Settle func() error
	// Configure sets what the soak changes in a data server's
	// configuration: at the start, and again after each restart (which
	// relaunches the server with its first arguments).
	Configure func(s *redistest.Server) error
	// Ready, when set, waits until a restarted server serves again
	// (beyond answering PING).
	Ready func(s *redistest.Server) error
	// Faults are the topology's own faults, after the common ones.
	Faults []Fault
}

// Fault is one fault the soak injects.
type Fault struct {
	Name string
	// Lossy says the fault loses admissions by design (the soak reports
	// its over-admissions and does not fail on them); Outage that it
	// refuses service for longer than a recovery by design; Control that
	// it injects nothing and measures the load itself (its recovery is
	// reported, not failed on).
	Lossy, Outage, Control bool
	// Run injects the fault into t, striking key's master where it
	// strikes one master, and returns when it began and ended (when the
	// servers could serve again) and a note on what happened meanwhile.
	Run func(t *Topology, key string) (start, end time.Time, note string, err error)
}

// Failure detection in the soak: longer than the 2 s freeze, shorter than
// production defaults (15 s, 30 s).
const (
	clusterNodeTimeout = 5 * time.Second
	sentinelDownAfter  = 5 * time.Second
)

// firstLine returns the first line of a reply, or the error.
func firstLine(reply string, err error) string {
	if err != nil {
		return err.Error()
	}
	l, _, _ := strings.Cut(reply, "\n")
	return strings.TrimSpace(l)
}

// persist makes a server save its data set when it is stopped with
// SIGTERM (no periodic saves, no AOF): a restart keeps every admission the
// server acknowledged. Restart relaunches a server with its first
// arguments, so it is set again after each restart.
func persist(s *redistest.Server) error {
	_, err := s.Do("CONFIG", "SET", "shutdown-on-sigterm", "save")
	if err != nil {
		return fmt.Errorf("soak: CONFIG SET shutdown-on-sigterm save on %s: %w", s.Addr(), err)
	}
	return nil
}

// Standalone is one redis-server.
func Standalone(tb testing.TB) *Topology {
	s := redistest.Start(tb)
	if err := persist(s); err != nil {
		tb.Fatal(err)
	}
	one := func() []*redistest.Server { return []*redistest.Server{s} }
	return &Topology{
		Name:      "standalone",
		Configure: persist,
		Config:    redisstore.Config{Mode: redisstore.Standalone, Addrs: []string{s.Addr()}},
		Data:      one,
		Masters:   one,
		Servers:   one,
		Owner: func(string) (*redistest.Server, *redistest.Server, error) {
			return s, nil, nil
		},
		Settle: func() error {
			_, err := s.Do("PING")
			return err
		},
		Faults: []Fault{{
			// What a crash, or a restart without persistence, costs.
			Name:  "restart, not saved",
			Lossy: true,
			Run: func(t *Topology, _ string) (time.Time, time.Time, string, error) {
				if _, err := s.Do("CONFIG", "SET", "shutdown-on-sigterm", "nosave"); err != nil {
					return time.Time{}, time.Time{}, "", err
				}
				// The earlier restart's snapshot would be loaded again.
				dir, err := s.Do("CONFIG", "GET", "dir")
				if err != nil {
					return time.Time{}, time.Time{}, "", err
				}
				_, dir, _ = strings.Cut(dir, "\n")
				if err := os.Remove(filepath.Join(dir, "dump.rdb")); err != nil && !errors.Is(err, os.ErrNotExist) {
					return time.Time{}, time.Time{}, "", err
				}
				start := time.Now()
				if err := s.Restart(); err != nil {
					return start, time.Now(), "", err
				}
				return start, time.Now(), "", t.Configure(s)
			},
		}},
	}
}

// Cluster is a Redis Cluster of three masters with one replica each.
func Cluster(tb testing.TB) *Topology {
	return clusterTopology(tb, "cluster", false)
}

// ClusterAcks is Cluster with the store run with WaitForReplicas: a
// takeover, which promotes a replica without waiting for its master, loses
// no admission either.
func ClusterAcks(tb testing.TB) *Topology {
	top := clusterTopology(tb, "cluster-acks", true)
	top.Config.WaitForReplicas = true
	return top
}

// clusterTopology starts a Cluster; with acks, its takeover is a fault that
// must lose nothing, else one that loses by design.
func clusterTopology(tb testing.TB, name string, acks bool) *Topology {
	c := redistest.StartCluster(tb)
	configure := func(n *redistest.Server) error {
		if err := persist(n); err != nil {
			return err
		}
		// The harness's 2 s node timeout is the length of the freeze:
		// whether a frozen master is failed over would be a race.
		_, err := n.Do("CONFIG", "SET", "cluster-node-timeout", strconv.Itoa(int(clusterNodeTimeout/time.Millisecond)))
		return err
	}
	for _, n := range c.Nodes() {
		if err := configure(n); err != nil {
			tb.Fatal(err)
		}
	}
	failover := func(option ...string) faultFunc {
		return func(t *Topology, key string) (time.Time, time.Time, string, error) {
			_, replica, err := c.MasterOf(key)
			if err != nil {
				return time.Time{}, time.Time{}, "", err
			}
			start := time.Now()
			end, err := c.Failover(replica, option...)
			return start, end, "", err
		}
	}
	return &Topology{
		Name:      name,
		Configure: configure,
		Config:    redisstore.Config{Mode: redisstore.Cluster, Addrs: c.Addrs()},
		Data:      c.Nodes,
		Masters:   c.Masters,
		Servers:   c.Nodes,
		Owner:     c.MasterOf,
		Settle:    func() error { return c.WaitHealthy(30 * time.Second) },
		Ready: func(s *redistest.Server) error {
			deadline := time.Now().Add(30 * time.Second)
			for {
				info, err := s.Do("CLUSTER", "INFO")
				if err == nil && strings.Contains(info, "cluster_state:ok") {
					return nil
				}
				if time.Now().After(deadline) {
					return fmt.Errorf("soak: %s not serving 30s after its restart: %v", s.Addr(), firstLine(info, err))
				}
				time.Sleep(10 * time.Millisecond)
			}
		},
		Faults: []Fault{
			{Name: "CLUSTER FAILOVER", Run: failover()},
			// The replica is promoted without waiting for its master,
			// which answers writes until it learns of the promotion.
			{Name: "CLUSTER FAILOVER TAKEOVER", Run: failover("TAKEOVER"), Lossy: !acks},
		},
	}
}

// Sentinel is a master and a replica watched by three sentinels.
func Sentinel(tb testing.TB) *Topology {
	return sentinelTopology(tb, "sentinel", redistest.SentinelOptions{}, func(failover faultFunc, data func() []*redistest.Server) []Fault {
		return []Fault{
			// Sentinel promotes the replica without waiting for it.
			{Name: "SENTINEL FAILOVER", Run: failover, Lossy: true},
			{
				// The new master refuses writes until it has a replica.
				Name:   "SENTINEL FAILOVER, min-replicas-to-write 1",
				Outage: true,
				Run: func(t *Topology, key string) (time.Time, time.Time, string, error) {
					for _, s := range data() {
						if _, err := s.Do("CONFIG", "SET", "min-replicas-to-write", "1"); err != nil {
							return time.Time{}, time.Time{}, "", err
						}
					}
					return failover(t, key)
				},
			},
		}
	})
}

// Sentinel2 is a master and two replicas watched by three sentinels, every
// server run with min-replicas-to-write 1 and min-replicas-max-lag 2 from
// its start: what a failover costs with a replica left to the new master.
func Sentinel2(tb testing.TB) *Topology {
	opts := redistest.SentinelOptions{Replicas: 2, MinReplicasToWrite: 1, MinReplicasMaxLag: 2}
	return sentinelTopology(tb, "sentinel2", opts, func(failover faultFunc, _ func() []*redistest.Server) []Fault {
		return []Fault{{
			// The old master keeps its other replica, and accepts writes,
			// until the sentinels move that replica to the new master; the
			// replica then needs a full sync, and the new master refuses
			// writes until it has one.
			Name:   "SENTINEL FAILOVER, 2 replicas, min-replicas-to-write 1",
			Run:    failover,
			Lossy:  true,
			Outage: true,
		}}
	})
}

// SentinelAcks is a master and a replica watched by three sentinels, the
// store run with WaitForReplicas: a failover loses no admission, and the
// new master serves at once.
func SentinelAcks(tb testing.TB) *Topology {
	top := sentinelTopology(tb, "sentinel-acks", redistest.SentinelOptions{}, func(failover faultFunc, _ func() []*redistest.Server) []Fault {
		return []Fault{{Name: "SENTINEL FAILOVER", Run: failover}}
	})
	top.Config.WaitForReplicas = true
	return top
}

type faultFunc = func(t *Topology, key string) (time.Time, time.Time, string, error)

// sentinelTopology starts a Sentinel setup of opts; faults returns its own
// faults given its failover and its data servers.
func sentinelTopology(tb testing.TB, name string, opts redistest.SentinelOptions,
	faults func(failover faultFunc, data func() []*redistest.Server) []Fault) *Topology {
	st := redistest.StartSentinelWith(tb, opts)
	data := st.Data
	for _, s := range data() {
		if err := persist(s); err != nil {
			tb.Fatal(err)
		}
	}
	// The harness's 1 s: a 2 s freeze would be failed over.
	for _, s := range st.Sentinels() {
		if _, err := s.Do("SENTINEL", "SET", redistest.SentinelMaster, "down-after-milliseconds", strconv.Itoa(int(sentinelDownAfter/time.Millisecond))); err != nil {
			tb.Fatal(err)
		}
	}
	failover := func(t *Topology, _ string) (time.Time, time.Time, string, error) {
		old := st.Master()
		if old == nil {
			return time.Time{}, time.Time{}, "", errors.New("soak: the sentinels name no master")
		}
		others := st.Replicas()
		syncs := map[*redistest.Server][2]int64{}
		for _, r := range others {
			syncs[r] = syncCounts(r)
		}
		w := watch(old)
		start := time.Now()
		next, end, err := st.Failover()
		if err != nil {
			w.stop()
			return start, end, "", err
		}
		// The replicas the sentinels move to the new master.
		var moved []string
		for _, r := range others {
			if r == next {
				continue
			}
			at, err := linkedTo(r, next, 30*time.Second)
			if err != nil {
				moved = append(moved, err.Error())
				continue
			}
			before, after := syncs[next], syncCounts(next)
			moved = append(moved, fmt.Sprintf("replica %s linked to the new master %s after (full syncs %d, partial %d)",
				r.Addr(), secs(at.Sub(end)), after[0]-before[0], after[1]-before[1]))
		}
		note := w.wait(end)
		if len(moved) > 0 {
			note = strings.Join(moved, "; ") + "; " + note
		}
		return start, end, note, nil
	}
	return &Topology{
		Name:      name,
		Configure: persist,
		Config:    redisstore.Config{Mode: redisstore.Sentinel, Addrs: st.Addrs(), MasterName: redistest.SentinelMaster},
		Data:      data,
		Masters:   func() []*redistest.Server { return []*redistest.Server{st.Master()} },
		Servers:   func() []*redistest.Server { return append(data(), st.Sentinels()...) },
		Owner: func(string) (*redistest.Server, *redistest.Server, error) {
			m, r := st.Master(), st.Replica()
			if m == nil {
				return nil, nil, errors.New("soak: the sentinels name no master")
			}
			return m, r, nil
		},
		Settle: func() error { return settleSentinel(st) },
		Faults: faults(failover, data),
	}
}

// syncCounts returns the full and the partial resyncs s served as a
// master (INFO stats sync_full, sync_partial_ok), or -1s.
func syncCounts(s *redistest.Server) [2]int64 {
	info, err := s.Do("INFO", "stats")
	if err != nil {
		return [2]int64{-1, -1}
	}
	var out [2]int64
	for _, line := range strings.Split(info, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "sync_full":
			out[0] = n
		case "sync_partial_ok":
			out[1] = n
		}
	}
	return out
}

// linkedTo polls r every 10 ms until its replication link to m is up, and
// returns when it saw it.
func linkedTo(r, m *redistest.Server, timeout time.Duration) (time.Time, error) {
	_, port, _ := strings.Cut(m.Addr(), ":")
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		info, err := r.Do("INFO", "replication")
		if err == nil && strings.Contains(info, "master_port:"+port+"\r") && strings.Contains(info, "master_link_status:up") {
			return time.Now(), nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Time{}, fmt.Errorf("replica %s not linked to the new master %s after %v", r.Addr(), m.Addr(), timeout)
}

// settleSentinel waits until every sentinel names the same master, every
// replica's link to it is up, and the first sentinel (the one Failover
// asks) sees each replica as a healthy replica.
func settleSentinel(st *redistest.Sentinel) error {
	deadline := time.Now().Add(30 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		if last = sentinelHealthy(st); last == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("soak: the Sentinel setup did not settle in 30s: %w", last)
}

func sentinelHealthy(st *redistest.Sentinel) error {
	m, rs := st.Master(), st.Replicas()
	if m == nil || len(rs) == 0 {
		return errors.New("no master named, or no replica")
	}
	_, mport, _ := strings.Cut(m.Addr(), ":")
	for _, s := range st.Sentinels() {
		got, err := s.Do("SENTINEL", "GET-MASTER-ADDR-BY-NAME", redistest.SentinelMaster)
		if err != nil {
			return err
		}
		if got != "127.0.0.1\n"+mport {
			return fmt.Errorf("sentinel %s names %q, another names %s", s.Addr(), got, m.Addr())
		}
	}
	reps, err := st.Sentinels()[0].Do("SENTINEL", "REPLICAS", redistest.SentinelMaster)
	if err != nil {
		return err
	}
	for _, r := range rs {
		if err := replicaHealthy(r, m, reps); err != nil {
			return err
		}
	}
	return nil
}

// replicaHealthy says whether r's link to m is up and reps (SENTINEL
// REPLICAS) flags it a healthy replica.
func replicaHealthy(r, m *redistest.Server, reps string) error {
	_, mport, _ := strings.Cut(m.Addr(), ":")
	info, err := r.Do("INFO", "replication")
	if err != nil {
		return err
	}
	if !strings.Contains(info, "master_link_status:up") || !strings.Contains(info, "master_port:"+mport+"\r") {
		return fmt.Errorf("replica %s not linked to %s", r.Addr(), m.Addr())
	}
	// One replica's fields flattened as name, value, name, value...,
	// each replica's starting with "name".
	_, rport, _ := strings.Cut(r.Addr(), ":")
	var port, flags string
	lines := strings.Split(reps, "\n")
	for i := 0; i+1 < len(lines); i += 2 {
		switch lines[i] {
		case "name":
			port, flags = "", ""
		case "port":
			port = lines[i+1]
		case "flags":
			flags = lines[i+1]
		}
		if port == rport && flags != "" {
			if flags != "slave" {
				return fmt.Errorf("the sentinel flags replica %s %q", r.Addr(), flags)
			}
			return nil
		}
	}
	return fmt.Errorf("the sentinel does not list replica %s", r.Addr())
}

// oldMaster watches a master that is being failed over: how many scripts
// it ran successfully while still a master, and when it became a replica
// of the new one.
type oldMaster struct {
	done chan struct{}
	quit chan struct{}
	// Set by the watcher, read after done.
	samples []sample  // while a master
	demoted time.Time // first poll that found it a replica
	linked  time.Time // first poll that found its link to the new master up
	err     error
}

// sample is a count of the scripts a server ran successfully, at a time.
type sample struct {
	at      time.Time
	scripts int64
}

// watch polls s every 10 ms until it is a replica with its link up (or
// 60 s passed).
func watch(s *redistest.Server) *oldMaster {
	w := &oldMaster{done: make(chan struct{}), quit: make(chan struct{})}
	go func() {
		defer close(w.done)
		deadline := time.Now().Add(60 * time.Second)
		for time.Now().Before(deadline) {
			select {
			case <-w.quit:
				return
			default:
			}
			repl, err := s.Do("INFO", "replication")
			if err != nil {
				w.err = err
				return
			}
			if strings.Contains(repl, "role:master") {
				stats, err := s.Do("INFO", "commandstats")
				if err != nil {
					w.err = err
					return
				}
				w.samples = append(w.samples, sample{time.Now(), succeeded(stats, "evalsha") + succeeded(stats, "eval")})
			} else if w.demoted.IsZero() {
				w.demoted = time.Now()
			}
			if !w.demoted.IsZero() && strings.Contains(repl, "master_link_status:up") {
				w.linked = time.Now()
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		w.err = errors.New("not a linked replica after 60s")
	}()
	return w
}

// succeeded returns calls less failed_calls of cmd in INFO commandstats.
func succeeded(stats, cmd string) int64 {
	for _, line := range strings.Split(stats, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":")
		if !ok {
			continue
		}
		var calls, failed int64
		for _, f := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				calls = n
			case "failed_calls":
				failed = n
			}
		}
		return calls - failed
	}
	return 0
}

func (w *oldMaster) stop() {
	close(w.quit)
	<-w.done
}

// wait waits for the watcher and says what it saw after promoted, the
// moment the new master answered as one.
func (w *oldMaster) wait(promoted time.Time) string {
	<-w.done
	if w.err != nil {
		return "watching the old master: " + w.err.Error()
	}
	var at, final int64 = -1, 0
	var last time.Time
	for i, sm := range w.samples {
		if !sm.at.After(promoted) {
			at = sm.scripts
		}
		if i > 0 && sm.scripts > w.samples[i-1].scripts {
			last = sm.at
		}
		final = sm.scripts
	}
	after := "none"
	if at >= 0 && final > at {
		after = fmt.Sprintf("%d script calls, the last %s after", final-at, secs(last.Sub(promoted)))
	}
	return fmt.Sprintf("after the promotion the old master ran %s; it was demoted %s and linked %s after",
		after, secs(w.demoted.Sub(promoted)), secs(w.linked.Sub(promoted)))
}

// CommonFaults are the faults every topology suffers, in order: the
// script cache and the functions flushed on every master, the key's master
// restarted (its data saved on SIGTERM and loaded again), then frozen for
// 2 s.
func CommonFaults() []Fault {
	return []Fault{
		{
			Name: "SCRIPT FLUSH + FUNCTION FLUSH",
			Run: func(t *Topology, _ string) (time.Time, time.Time, string, error) {
				start := time.Now()
				for _, m := range t.Masters() {
					if _, err := m.Do("SCRIPT", "FLUSH"); err != nil {
						return start, time.Now(), "", err
					}
					if _, err := m.Do("FUNCTION", "FLUSH"); err != nil {
						return start, time.Now(), "", err
					}
				}
				return start, time.Now(), "", nil
			},
		},
		{
			Name: "restart",
			Run: func(t *Topology, key string) (time.Time, time.Time, string, error) {
				m, _, err := t.Owner(key)
				if err != nil {
					return time.Time{}, time.Time{}, "", err
				}
				start := time.Now()
				if err := m.Restart(); err != nil {
					return start, time.Now(), "", err
				}
				up := time.Now()
				if err := t.Configure(m); err != nil {
					return start, up, "", err
				}
				if t.Ready == nil {
					return start, up, "", nil
				}
				// A Redis Cluster master that restarts answers CLUSTERDOWN
				// for 2 s (its writable delay) before it serves its slots.
				if err := t.Ready(m); err != nil {
					return start, up, "", err
				}
				end := time.Now()
				return start, end, fmt.Sprintf("answered PING %s after SIGTERM, served its slots %s after", secs(up.Sub(start)), secs(end.Sub(start))), nil
			},
		},
		{
			Name: "SIGSTOP 2s",
			Run: func(t *Topology, key string) (time.Time, time.Time, string, error) {
				m, _, err := t.Owner(key)
				if err != nil {
					return time.Time{}, time.Time{}, "", err
				}
				start := time.Now()
				if err := m.Pause(); err != nil {
					return start, time.Now(), "", err
				}
				time.Sleep(2 * time.Second)
				end := time.Now()
				return start, end, "", m.Resume()
			},
		},
	}
}

// Roles returns each data server's role, "addr role", for the notes.
func Roles(t *Topology) string {
	var out []string
	for _, s := range t.Data() {
		role, err := s.Do("ROLE")
		if err != nil {
			out = append(out, s.Addr()+" "+err.Error())
			continue
		}
		r, _, _ := strings.Cut(role, "\n")
		out = append(out, s.Addr()+" "+r)
	}
	return strings.Join(out, ", ")
}
