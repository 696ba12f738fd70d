package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// envoyRatelimitModule is envoyproxy/ratelimit's Go module and the version
// the service section builds: the newest on the module proxy when the
// section was written. The repository tags no semantic versions, so the
// proxy knows only pseudo-versions of its main branch; this one is commit
// 3fb702589d36 of 2026-01-22.
const (
	envoyRatelimitModule  = "github.com/envoyproxy/ratelimit"
	envoyRatelimitVersion = "v1.4.1-0.20260122083618-3fb702589d36"
)

// buildEnvoyRatelimit builds envoyproxy/ratelimit's service at
// envoyRatelimitVersion from the Go module proxy into dir (go install
// module@version: its go.mod has no replace directives) and returns the
// executable's path.
func buildEnvoyRatelimit(dir string) (string, error) {
	cmd := exec.Command("go", "install", envoyRatelimitModule+"/src/service_cmd@"+envoyRatelimitVersion)
	cmd.Dir = dir // outside bench's module, so that its go.mod plays no part
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s@%s (go install, from the Go module proxy): %w\n%s",
			envoyRatelimitModule, envoyRatelimitVersion, err, out)
	}
	return filepath.Join(dir, "service_cmd"), nil
}

// serviceProc is one rate-limit service running as a process of its own.
type serviceProc struct {
	*process
	http  string // host:port of its HTTP listener (/json, /healthcheck)
	grpc  string // host:port of its gRPC listener (Envoy's RLS)
	admin string // host:port of sluice's admin listener (pprof); "" for others
}

// startService starts bin with args, env set in its environment, and
// waits until GET /healthcheck on httpAddr answers 200 and grpcAddr
// accepts connections.
func startService(name, bin string, args, env []string, httpAddr, grpcAddr string) (*serviceProc, error) {
	// env(1) execs bin with the variables set, so the process (and its pid)
	// is bin's.
	p, err := startProcess(name, "env", append(append(env, bin), args...), "http://"+httpAddr+"/healthcheck")
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(15 * time.Second)
	for !dialable(grpcAddr) {
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("%s: its gRPC listener %s does not accept connections after 15s:\n%s", name, grpcAddr, p.out)
		}
		time.Sleep(50 * time.Millisecond) // waiting for a process's listener
	}
	return &serviceProc{process: p, http: httpAddr, grpc: grpcAddr}, nil
}

func dialable(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// cpu returns the CPU time (user and system) the process has used so far,
// from /proc/PID/stat.
func (p *serviceProc) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) is in parentheses and may hold spaces;
	// utime and stime are fields 14 and 15, the 12th and 13th after it.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	const ticksPerSecond = 100 // USER_HZ, 100 on Linux
	return time.Duration(utime+stime) * time.Second / ticksPerSecond
}

// childrenCPU returns the CPU time of this process's children that ended
// and were waited for (wrk's, once runWrkScript returns).
func childrenCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
