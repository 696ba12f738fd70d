package redistest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Cluster is a Redis Cluster of three masters, each with one replica: six
// redis-server processes on free loopback ports, created with
// redis-cli --cluster create. Its methods are safe for concurrent use.
type Cluster struct {
	nodes   []*Server
	missing error
}

// clusterMasters and clusterReplicas shape the cluster.
const (
	clusterMasters  = 3
	clusterReplicas = 1
)

// StartCluster starts a cluster for one test and stops it when the test
// ends. Like Start, it skips (or fails under CI) when redis-server or
// redis-cli is not installed.
func StartCluster(tb testing.TB) *Cluster {
	tb.Helper()
	c, err := StartClusterMain()
	if err != nil {
		tb.Fatal(err)
	}
	c.Require(tb)
	tb.Cleanup(func() {
		if err := c.Stop(); err != nil {
			tb.Error(err)
		}
	})
	return c
}

// StartClusterMain starts a cluster for a whole test package; call it from
// TestMain and Stop it after the tests have run. A missing redis-server or
// redis-cli is reported as StartMain reports it.
func StartClusterMain() (*Cluster, error) {
	bin, cli, err := binaries("redis-server", "redis-cli")
	if err != nil {
		if os.Getenv("CI") != "" {
			return nil, fmt.Errorf("%w (CI is set, so a missing server is a failure)", err)
		}
		return &Cluster{missing: err}, nil
	}
	c := &Cluster{}
	for range clusterMasters * (1 + clusterReplicas) {
		s, err := startNode(bin, []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000",
		})
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.nodes = append(c.nodes, s)
	}
	args := []string{"--cluster", "create"}
	args = append(args, c.Addrs()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(clusterReplicas), "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		c.Stop()
		return nil, fmt.Errorf("redistest: redis-cli %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if err := c.WaitHealthy(30 * time.Second); err != nil {
		c.Stop()
		return nil, err
	}
	if err := c.waitReplicasListed(30 * time.Second); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// waitReplicasListed has every master replicate a write (FLUSHALL, on a
// new, empty cluster) and waits until every node's CLUSTER SLOTS lists all
// six nodes. A node leaves out of CLUSTER SLOTS a replica whose replication
// offset it knows as 0, as on a cluster that has not written yet, and a
// client then takes the replicas for no part of the cluster: tests of
// failovers would see a client that was never told of the new master.
func (c *Cluster) waitReplicasListed(timeout time.Duration) error {
	for _, m := range c.Masters() {
		if _, err := m.Do("FLUSHALL"); err != nil {
			return err
		}
	}
	return waitFor(timeout, "every replica in CLUSTER SLOTS", func() (bool, error) {
		for _, n := range c.nodes {
			slots, err := n.Do("CLUSTER", "SLOTS")
			if err != nil {
				return false, err
			}
			for _, o := range c.nodes {
				_, port, _ := strings.Cut(o.Addr(), ":")
				if !strings.Contains(slots, "\n"+port+"\n") {
					return false, fmt.Errorf("%s's CLUSTER SLOTS does not list %s", n.Addr(), o.Addr())
				}
			}
		}
		return true, nil
	})
}

// binaries looks up each named executable on PATH.
func binaries(names ...string) (string, string, error) {
	var found []string
	for _, n := range names {
		p, err := exec.LookPath(n)
		if err != nil {
			return "", "", fmt.Errorf("%w (%s is missing)", ErrNotInstalled, n)
		}
		found = append(found, p)
	}
	return found[0], found[1], nil
}

// startNode starts a server whose port + 10000 (a cluster bus port) is free
// too, retrying when a port is taken.
func startNode(bin string, extra []string) (*Server, error) {
	for try := 1; ; try++ {
		port, err := freeBusPort()
		if err != nil {
			return nil, err
		}
		dir, err := os.MkdirTemp("", "redistest-")
		if err != nil {
			return nil, fmt.Errorf("redistest: %w", err)
		}
		s, err := launch(bin, port, dir, nil, extra, readyServer)
		if err == nil {
			return s, nil
		}
		os.RemoveAll(dir)
		if !errors.Is(err, errPortTaken) || try == 5 {
			return nil, err
		}
	}
}

// freeBusPort returns a free port p below 55536 whose p+10000 is free too.
func freeBusPort() (int, error) {
	for range 1000 {
		p, err := freePort()
		if err != nil {
			return 0, err
		}
		if p+10000 > 65535 {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p+10000)))
		if err != nil {
			continue
		}
		l.Close()
		return p, nil
	}
	return 0, errors.New("redistest: no free port pair for a cluster node")
}

// Require skips tb when the cluster could not be started because a binary
// is missing.
func (c *Cluster) Require(tb testing.TB) {
	tb.Helper()
	if c == nil {
		tb.Fatal("redistest: no cluster; was StartClusterMain called from TestMain?")
	}
	if c.missing != nil {
		tb.Skip(c.missing)
	}
}

// Addrs returns every node's address: seeds for a cluster client.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.nodes))
	for i, s := range c.nodes {
		out[i] = s.Addr()
	}
	return out
}

// Nodes returns the cluster's servers, masters and replicas.
func (c *Cluster) Nodes() []*Server { return c.nodes }

// Masters returns the servers that are masters now.
func (c *Cluster) Masters() []*Server {
	var out []string
	for _, n := range c.nodes {
		if role, _ := roleOf(n); role == "master" {
			out = append(out, n.Addr())
		}
	}
	return c.servers(out)
}

func (c *Cluster) servers(addrs []string) []*Server {
	var out []*Server
	for _, a := range addrs {
		for _, n := range c.nodes {
			if n.Addr() == a {
				out = append(out, n)
			}
		}
	}
	return out
}

// roleOf returns "master" or "slave" from ROLE.
func roleOf(s *Server) (string, error) {
	r, err := s.Do("ROLE")
	if err != nil {
		return "", err
	}
	role, _, _ := strings.Cut(r, "\n")
	return role, nil
}

// MasterOf returns the master serving key now and a replica of it.
func (c *Cluster) MasterOf(key string) (master, replica *Server, err error) {
	for _, n := range c.nodes {
		slotText, err := n.Do("CLUSTER", "KEYSLOT", key)
		if err != nil {
			continue
		}
		slot, _ := strconv.Atoi(slotText)
		nodes, err := n.Do("CLUSTER", "NODES")
		if err != nil {
			continue
		}
		var masterID, masterAddr string
		for _, line := range strings.Split(nodes, "\n") {
			f := strings.Fields(line)
			if len(f) < 8 || !strings.Contains(f[2], "master") || strings.Contains(f[2], "fail") {
				continue
			}
			for _, r := range f[8:] {
				lo, hi, ok := strings.Cut(r, "-")
				if !ok {
					hi = lo
				}
				a, err1 := strconv.Atoi(lo)
				b, err2 := strconv.Atoi(hi)
				if err1 == nil && err2 == nil && a <= slot && slot <= b {
					masterID, masterAddr = f[0], strings.Split(f[1], "@")[0]
				}
			}
		}
		for _, line := range strings.Split(nodes, "\n") {
			f := strings.Fields(line)
			if len(f) >= 4 && f[3] == masterID && strings.Contains(f[2], "slave") {
				if r := c.servers([]string{strings.Split(f[1], "@")[0]}); len(r) == 1 {
					replica = r[0]
				}
			}
		}
		if m := c.servers([]string{masterAddr}); len(m) == 1 && replica != nil {
			return m[0], replica, nil
		}
		return nil, nil, fmt.Errorf("redistest: no master with a replica serves slot %d:\n%s", slot, nodes)
	}
	return nil, nil, errors.New("redistest: no node answers CLUSTER KEYSLOT")
}

// Failover runs CLUSTER FAILOVER on replica, which promotes it after it has
// caught up with its master, and waits until it serves as master. It
// returns the time at which the new master answered ROLE as master.
func (c *Cluster) Failover(replica *Server, option ...string) (time.Time, error) {
	if _, err := replica.Do(append([]string{"CLUSTER", "FAILOVER"}, option...)...); err != nil {
		return time.Time{}, err
	}
	var at time.Time
	err := waitFor(20*time.Second, "failover of "+replica.Addr(), func() (bool, error) {
		role, err := roleOf(replica)
		if role == "master" && at.IsZero() {
			at = time.Now()
		}
		return role == "master", err
	})
	if err != nil {
		return time.Time{}, err
	}
	return at, c.WaitHealthy(20 * time.Second)
}

// WaitHealthy waits until every node reports cluster_state:ok, knows all
// six nodes and sees three masters, each serving slots, and none failing
// (after a failover a node may for a while still see the old master as a
// master without slots), and every replica's link to its master is up.
func (c *Cluster) WaitHealthy(timeout time.Duration) error {
	return waitFor(timeout, "a healthy cluster", func() (bool, error) {
		for _, n := range c.nodes {
			info, err := n.Do("CLUSTER", "INFO")
			if err != nil {
				return false, err
			}
			if !strings.Contains(info, "cluster_state:ok") ||
				!strings.Contains(info, fmt.Sprintf("cluster_known_nodes:%d", len(c.nodes))) {
				return false, fmt.Errorf("%s: %s", n.Addr(), firstLine(info))
			}
			nodes, err := n.Do("CLUSTER", "NODES")
			if err != nil {
				return false, err
			}
			masters := 0
			for _, line := range strings.Split(nodes, "\n") {
				f := strings.Fields(line)
				if len(f) < 8 {
					continue
				}
				switch {
				case strings.Contains(f[2], "fail"):
					return false, fmt.Errorf("%s sees %s as %s", n.Addr(), f[1], f[2])
				case strings.Contains(f[2], "master") && len(f) == 8:
					return false, fmt.Errorf("%s sees %s as a master without slots", n.Addr(), f[1])
				case strings.Contains(f[2], "master"):
					masters++
				}
			}
			if masters != clusterMasters {
				return false, fmt.Errorf("%s sees %d masters, want %d", n.Addr(), masters, clusterMasters)
			}
			repl, err := n.Do("INFO", "replication")
			if err != nil {
				return false, err
			}
			if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
				return false, fmt.Errorf("%s: replica link down", n.Addr())
			}
		}
		return true, nil
	})
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(l)
}

// Stop stops every node. It is safe to call more than once.
func (c *Cluster) Stop() error {
	var errs []error
	for _, n := range c.nodes {
		errs = append(errs, n.Stop())
	}
	return errors.Join(errs...)
}
