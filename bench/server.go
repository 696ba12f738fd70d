package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// redisServer is a throwaway redis-server on a free loopback port with no
// persistence, like the test suites' (internal/redistest), which this
// module cannot import.
type redisServer struct {
	addr string
	cmd  *exec.Cmd
	dir  string
	done chan struct{}
}

// startRedis starts redis-server from PATH, or bin when set, and waits
// until it answers.
func startRedis(bin string) (*redisServer, error) {
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("redis-server"); err != nil {
			return nil, fmt.Errorf("redis-server not found in PATH (install it with: apt-get install -y redis-server): %w", err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir, err := os.MkdirTemp("", "sluice-bench-")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir, "--daemonize", "no", "--logfile", "")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &redisServer{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, dir: dir, done: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		signalled := false
		for sc.Scan() {
			if !signalled && strings.Contains(sc.Text(), "Ready to accept connections") {
				signalled = true
				close(ready)
			}
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		close(s.done)
	}()
	select {
	case <-ready:
	case <-s.done:
		os.RemoveAll(dir)
		return nil, fmt.Errorf("redis-server exited before accepting connections on %s", s.addr)
	case <-time.After(15 * time.Second):
		s.stop()
		return nil, fmt.Errorf("redis-server on %s not ready after 15s", s.addr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", s.addr)
	if err != nil {
		s.stop()
		return nil, err
	}
	conn.Close()
	return s, nil
}

// stop stops the server and removes its directory.
func (s *redisServer) stop() {
	terminate(s.cmd, s.done)
	os.RemoveAll(s.dir)
}
