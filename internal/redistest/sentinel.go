package redistest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// SentinelMaster is the master name a Sentinel setup monitors.
const SentinelMaster = "sluice"

// Sentinel is a master, one replica (or SentinelOptions.Replicas) and
// three sentinels (quorum 2) that monitor them under the name
// SentinelMaster, on free loopback ports. Its methods are safe for
// concurrent use.
type Sentinel struct {
	data      []*Server // master and replicas, in start order
	sentinels []*Server
	missing   error
}

// SentinelOptions configures a Sentinel setup. The zero value is a master
// and one replica with Redis's default min-replicas settings (none).
type SentinelOptions struct {
	// Replicas is the number of replicas; 0 means 1.
	Replicas int
	// MinReplicasToWrite and MinReplicasMaxLag (seconds), when not zero,
	// set min-replicas-to-write and min-replicas-max-lag on every data
	// server from its start (and after a restart): a master then refuses
	// writes (NOREPLICAS) unless that many replicas acknowledged within
	// that lag.
	MinReplicasToWrite, MinReplicasMaxLag int
}

// args returns the redis-server arguments of every data server.
func (o SentinelOptions) args() []string {
	var out []string
	if o.MinReplicasToWrite != 0 {
		out = append(out, "--min-replicas-to-write", strconv.Itoa(o.MinReplicasToWrite))
	}
	if o.MinReplicasMaxLag != 0 {
		out = append(out, "--min-replicas-max-lag", strconv.Itoa(o.MinReplicasMaxLag))
	}
	return out
}

// StartSentinel starts a Sentinel setup for one test and stops it when the
// test ends. Like Start, it skips (or fails under CI) when redis-server is
// not installed.
func StartSentinel(tb testing.TB) *Sentinel {
	tb.Helper()
	return StartSentinelWith(tb, SentinelOptions{})
}

// StartSentinelWith is StartSentinel with options.
func StartSentinelWith(tb testing.TB, opts SentinelOptions) *Sentinel {
	tb.Helper()
	s, err := StartSentinelMainWith(opts)
	if err != nil {
		tb.Fatal(err)
	}
	s.Require(tb)
	tb.Cleanup(func() {
		if err := s.Stop(); err != nil {
			tb.Error(err)
		}
	})
	return s
}

// StartSentinelMain starts a Sentinel setup for a whole test package; Stop
// it after the tests have run.
func StartSentinelMain() (*Sentinel, error) {
	return StartSentinelMainWith(SentinelOptions{})
}

// StartSentinelMainWith is StartSentinelMain with options.
func StartSentinelMainWith(opts SentinelOptions) (*Sentinel, error) {
	if opts.Replicas < 0 {
		return nil, fmt.Errorf("redistest: SentinelOptions.Replicas %d: want 0 (one replica) or more", opts.Replicas)
	}
	bin, err := lookServer()
	if err != nil {
		if os.Getenv("CI") != "" {
			return nil, fmt.Errorf("%w (CI is set, so a missing server is a failure)", err)
		}
		return &Sentinel{missing: err}, nil
	}
	st := &Sentinel{}
	master, err := startNode(bin, opts.args())
	if err != nil {
		return nil, err
	}
	st.data = append(st.data, master)
	_, mport, _ := strings.Cut(master.Addr(), ":")
	for range max(opts.Replicas, 1) {
		replica, err := startNode(bin, append([]string{"--replicaof", "127.0.0.1", mport}, opts.args()...))
		if err != nil {
			st.Stop()
			return nil, err
		}
		st.data = append(st.data, replica)
		if err := waitLink(replica); err != nil {
			st.Stop()
			return nil, err
		}
	}
	for range 3 {
		s, err := startSentinel(bin, mport)
		if err != nil {
			st.Stop()
			return nil, err
		}
		st.sentinels = append(st.sentinels, s)
	}
	// Each sentinel must know the replicas and the two other sentinels
	// before it can fail over.
	for _, s := range st.sentinels {
		err := waitFor(30*time.Second, "sentinel discovery", func() (bool, error) {
			r, err := s.Do("SENTINEL", "REPLICAS", SentinelMaster)
			if err != nil {
				return false, err
			}
			for _, replica := range st.data[1:] {
				if !strings.Contains(r, replica.Addr()) {
					return false, nil
				}
			}
			m, err := s.Do("SENTINEL", "MASTER", SentinelMaster)
			if err != nil {
				return false, err
			}
			return strings.Contains(m, "num-other-sentinels\n2"), nil
		})
		if err != nil {
			st.Stop()
			return nil, err
		}
	}
	return st, nil
}

func lookServer() (string, error) {
	bin, _, err := binaries("redis-server", "redis-server")
	return bin, err
}

// startSentinel starts a sentinel monitoring the master on mport.
func startSentinel(bin, mport string) (*Server, error) {
	for try := 1; ; try++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		dir, err := os.MkdirTemp("", "redistest-sentinel-")
		if err != nil {
			return nil, fmt.Errorf("redistest: %w", err)
		}
		conf := filepath.Join(dir, "sentinel.conf")
		text := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]s 2\n"+
			"sentinel down-after-milliseconds %[1]s 1000\n"+
			"sentinel failover-timeout %[1]s 5000\n", SentinelMaster, mport)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("redistest: %w", err)
		}
		s, err := launch(bin, port, dir, []string{conf, "--sentinel"}, nil, readySentinel)
		if err == nil {
			return s, nil
		}
		os.RemoveAll(dir)
		if !errors.Is(err, errPortTaken) || try == 5 {
			return nil, err
		}
	}
}

// waitLink waits until replica's link to its master is up.
func waitLink(replica *Server) error {
	return waitFor(20*time.Second, "replication link of "+replica.Addr(), func() (bool, error) {
		r, err := replica.Do("INFO", "replication")
		return strings.Contains(r, "master_link_status:up"), err
	})
}

// Require skips tb when the setup could not be started because
// redis-server is missing.
func (st *Sentinel) Require(tb testing.TB) {
	tb.Helper()
	if st == nil {
		tb.Fatal("redistest: no sentinel setup; was StartSentinelMain called from TestMain?")
	}
	if st.missing != nil {
		tb.Skip(st.missing)
	}
}

// Addrs returns the sentinels' addresses.
func (st *Sentinel) Addrs() []string {
	out := make([]string, len(st.sentinels))
	for i, s := range st.sentinels {
		out[i] = s.Addr()
	}
	return out
}

// Sentinels returns the sentinel processes, in start order: Failover asks
// the first.
func (st *Sentinel) Sentinels() []*Server { return st.sentinels }

// Master returns the data server the first sentinel names as master, or
// nil.
func (st *Sentinel) Master() *Server {
	r, err := st.sentinels[0].Do("SENTINEL", "GET-MASTER-ADDR-BY-NAME", SentinelMaster)
	if err != nil {
		return nil
	}
	addr := strings.Replace(r, "\n", ":", 1)
	for _, s := range st.data {
		if s.Addr() == addr {
			return s
		}
	}
	return nil
}

// Data returns the data servers (master and replicas), in start order.
func (st *Sentinel) Data() []*Server { return append([]*Server(nil), st.data...) }

// Replicas returns the data servers that are not the master, in start
// order.
func (st *Sentinel) Replicas() []*Server {
	m := st.Master()
	var out []*Server
	for _, s := range st.data {
		if s != m {
			out = append(out, s)
		}
	}
	return out
}

// Replica returns the first data server that is not the master, or nil.
func (st *Sentinel) Replica() *Server {
	m := st.Master()
	for _, s := range st.data {
		if s != m {
			return s
		}
	}
	return nil
}

// Failover asks a sentinel to fail over (SENTINEL FAILOVER) and waits until
// a replica serves as master and every sentinel names it (the old master
// becomes its replica later, when the sentinels next look at it). It
// returns the new master and the time it first answered ROLE as master.
func (st *Sentinel) Failover() (*Server, time.Time, error) {
	replicas := st.Replicas()
	if len(replicas) == 0 || len(replicas) == len(st.data) {
		return nil, time.Time{}, errors.New("redistest: no master, or no replica to fail over to")
	}
	if _, err := st.sentinels[0].Do("SENTINEL", "FAILOVER", SentinelMaster); err != nil {
		return nil, time.Time{}, err
	}
	var (
		at   time.Time
		next *Server
	)
	err := waitFor(30*time.Second, "sentinel failover", func() (bool, error) {
		for _, r := range replicas {
			if next != nil {
				break
			}
			if role, _ := roleOf(r); role == "master" {
				next, at = r, time.Now()
			}
		}
		if next == nil {
			return false, nil
		}
		_, port, _ := strings.Cut(next.Addr(), ":")
		for _, s := range st.sentinels {
			r, err := s.Do("SENTINEL", "GET-MASTER-ADDR-BY-NAME", SentinelMaster)
			if err != nil || r != "127.0.0.1\n"+port {
				return false, err
			}
		}
		return true, nil
	})
	if err != nil {
		return nil, time.Time{}, err
	}
	return next, at, nil
}

// Stop stops the sentinels, then the data servers. It is safe to call more
// than once.
func (st *Sentinel) Stop() error {
	var errs []error
	for _, s := range st.sentinels {
		errs = append(errs, s.Stop())
	}
	for _, s := range st.data {
		errs = append(errs, s.Stop())
	}
	return errors.Join(errs...)
}
