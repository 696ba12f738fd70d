package redistest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// SentinelMaster is the master name a Sentinel setup monitors.
const SentinelMaster = "sluice"

// Sentinel is a master, one replica and three sentinels (quorum 2) that
// monitor them under the name SentinelMaster, on free loopback ports. Its
// methods are safe for concurrent use.
type Sentinel struct {
	data      []*Server // master and replica, in start order
	sentinels []*Server
	missing   error
}

// StartSentinel starts a Sentinel setup for one test and stops it when the
// test ends. Like Start, it skips (or fails under CI) when redis-server is
// not installed.
func StartSentinel(tb testing.TB) *Sentinel {
	tb.Helper()
	s, err := StartSentinelMain()
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
	bin, err := lookServer()
	if err != nil {
		if os.Getenv("CI") != "" {
			return nil, fmt.Errorf("%w (CI is set, so a missing server is a failure)", err)
		}
		return &Sentinel{missing: err}, nil
	}
	st := &Sentinel{}
	master, err := startNode(bin, nil)
	if err != nil {
		return nil, err
	}
	st.data = append(st.data, master)
	_, mport, _ := strings.Cut(master.Addr(), ":")
	replica, err := startNode(bin, []string{"--replicaof", "127.0.0.1", mport})
	if err != nil {
		st.Stop()
		return nil, err
	}
	st.data = append(st.data, replica)
	if err := waitLink(replica); err != nil {
		st.Stop()
		return nil, err
	}
	for range 3 {
		s, err := startSentinel(bin, mport)
		if err != nil {
			st.Stop()
			return nil, err
		}
		st.sentinels = append(st.sentinels, s)
	}
	// Each sentinel must know the replica and the two other sentinels
	// before it can fail over.
	for _, s := range st.sentinels {
		err := waitFor(30*time.Second, "sentinel discovery", func() (bool, error) {
			r, err := s.Do("SENTINEL", "REPLICAS", SentinelMaster)
			if err != nil || !strings.Contains(r, replica.Addr()[strings.Index(replica.Addr(), ":")+1:]) {
				return false, err
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

// Replica returns the data server that is not the master, or nil.
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
// the replica serves as master, every sentinel names it, and the old master
// replicates from it. It returns the new master and the time it first
// answered ROLE as master.
func (st *Sentinel) Failover() (*Server, time.Time, error) {
	next := st.Replica()
	if next == nil {
		return nil, time.Time{}, errors.New("redistest: no replica to fail over to")
	}
	if _, err := st.sentinels[0].Do("SENTINEL", "FAILOVER", SentinelMaster); err != nil {
		return nil, time.Time{}, err
	}
	var at time.Time
	err := waitFor(30*time.Second, "sentinel failover to "+next.Addr(), func() (bool, error) {
		if role, _ := roleOf(next); role != "master" {
			return false, nil
		}
		if at.IsZero() {
			at = time.Now()
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
