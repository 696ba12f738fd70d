package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// cpuCap is a cgroup that holds processes to a share of one CPU, so that a
// benchmark on a small machine can make one process (a Redis master) the
// bound, as a master is on a production Cluster whose every master has a
// core of its own and one tenant saturates it.
type cpuCap struct {
	dir    string // the cgroup's directory
	parent string // the cgroup.procs the processes return to
	pids   []int
}

// capCPU moves pids into a new cgroup named name whose CPU time is limited
// to share of one CPU (cgroup v1's cpu controller, or v2's cpu.max),
// measured over 10 ms periods so that the cap throttles smoothly. It needs
// a writable cgroup file system (root, or a delegated cgroup); the error
// says what was refused.
func capCPU(name string, share float64, pids ...int) (*cpuCap, error) {
	const period = 10000 // µs
	quota := int(share * period)
	root, v2 := "/sys/fs/cgroup/cpu", false
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		root, v2 = "/sys/fs/cgroup", true
	}
	c := &cpuCap{dir: filepath.Join(root, name), parent: filepath.Join(root, "cgroup.procs")}
	if err := os.Mkdir(c.dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("creating cgroup %s: %w", c.dir, err)
	}
	var err error
	if v2 {
		err = os.WriteFile(filepath.Join(c.dir, "cpu.max"), fmt.Appendf(nil, "%d %d", quota, period), 0)
	} else if err = os.WriteFile(filepath.Join(c.dir, "cpu.cfs_period_us"), []byte(strconv.Itoa(period)), 0); err == nil {
		err = os.WriteFile(filepath.Join(c.dir, "cpu.cfs_quota_us"), []byte(strconv.Itoa(quota)), 0)
	}
	if err != nil {
		os.Remove(c.dir)
		return nil, fmt.Errorf("setting the CPU quota of cgroup %s: %w", c.dir, err)
	}
	for _, pid := range pids {
		if err := os.WriteFile(filepath.Join(c.dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			c.release()
			return nil, fmt.Errorf("moving process %d into cgroup %s: %w", pid, c.dir, err)
		}
		c.pids = append(c.pids, pid)
	}
	return c, nil
}

// release moves the processes back to the root cgroup and removes the
// cgroup.
func (c *cpuCap) release() {
	for _, pid := range c.pids {
		_ = os.WriteFile(c.parent, []byte(strconv.Itoa(pid)), 0)
	}
	_ = os.Remove(c.dir)
}

// cgroupName is a cgroup name unique to this process.
func cgroupName(parts ...string) string {
	return "sluice-bench-" + strconv.Itoa(os.Getpid()) + "-" + strings.Join(parts, "-")
}
