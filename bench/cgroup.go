package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// cpuCap is a cgroup that holds processes to a share of one CPU, so that a
// benchmark on a small machine can make one process (a Redis master) the
// bound, as a master is on a production Cluster whose every master has a
// core of its own and one tenant saturates it.
type cpuCap struct {
	dir    string // the cgroup's directory
	parent string // the cgroup.procs of the cgroup the processes came from
	pids   []int
}

// capCPU moves pids into a new cgroup named name whose CPU time is limited
// to share of one CPU (cgroup v1's cpu controller, or v2's cpu.max),
// measured over 10 ms periods so that the cap throttles smoothly. The
// cgroup is made inside the first process's own, so that a delegated
// cgroup (a container's) serves as well as the root; it needs that cgroup
// to be writable, and the error says what was refused.
func capCPU(name string, share float64, pids ...int) (*cpuCap, error) {
	const period = 10000 // µs
	quota := int(share * period)
	if len(pids) == 0 {
		return nil, errors.New("no process to cap")
	}
	root, v2 := "/sys/fs/cgroup/cpu", false
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		root, v2 = "/sys/fs/cgroup", true
	}
	own, err := cpuCgroup(pids[0], v2)
	if err != nil {
		return nil, err
	}
	c := &cpuCap{dir: filepath.Join(root, own, name), parent: filepath.Join(root, own, "cgroup.procs")}
	if err := os.Mkdir(c.dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("creating cgroup %s: %w", c.dir, err)
	}
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

// cpuCgroup is the path of pid's cgroup in the cpu controller's hierarchy
// (v1) or the unified one (v2), from /proc/PID/cgroup.
func cpuCgroup(pid int, v2 bool) (string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(b), "\n") {
		// hierarchy-ID:controller-list:path
		parts := strings.SplitN(line, ":", 3)
		if len(parts) < 3 {
			continue
		}
		if v2 && parts[0] == "0" || !v2 && slices.Contains(strings.Split(parts[1], ","), "cpu") {
			return parts[2], nil
		}
	}
	return "", fmt.Errorf("process %d has no cpu cgroup in /proc/%d/cgroup", pid, pid)
}

// release moves the processes back to the cgroup they came from and
// removes the cgroup.
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
