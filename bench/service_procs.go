package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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
	p, err := startProcessEnv(name, bin, args, env, "http://"+httpAddr+"/healthcheck")
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

// childrenCPU returns the CPU time of this process's children that ended
// and were waited for (wrk's, once runWrkScript returns).
func childrenCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// fetchProfile writes a CPU profile of secs seconds from the pprof handler
// on admin to path.
func fetchProfile(admin string, secs int, path string) error {
	resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", admin, secs))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /debug/pprof/profile on %s: %s", admin, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, resp.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
