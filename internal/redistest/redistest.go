// Package redistest starts throwaway redis-server processes for tests: each
// listens on a free loopback port, keeps nothing on disk and is stopped when
// the test (or the test package) ends.
//
// A test that needs its own server calls Start. A package that shares one
// server between its tests starts it from TestMain:
//
//	var server *redistest.Server
//
//	func TestMain(m *testing.M) {
//		s, err := redistest.StartMain(redistest.Options{})
//		if err != nil {
//			fmt.Fprintln(os.Stderr, err)
//			os.Exit(1)
//		}
//		server = s
//		code := m.Run()
//		s.Stop()
//		os.Exit(code)
//	}
//
// and each test calls server.Require(t) before using server.Addr().
//
// When redis-server is not installed, tests skip; when the environment
// variable CI is set, they fail instead, saying how to install it.
package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ErrNotInstalled reports that no redis-server executable is on PATH.
var ErrNotInstalled = errors.New("redistest: redis-server not found in PATH; install it with: apt-get install -y redis-server")

// errPortTaken reports that the chosen port was taken before the server
// could bind it.
var errPortTaken = errors.New("port already in use")

// startTimeout bounds how long a server may take to accept connections.
const startTimeout = 15 * time.Second

// Options configures a server. The zero value starts a plain standalone
// server.
type Options struct {
	// Args are extra redis-server arguments, appended after the harness's
	// own (port, bind address, no persistence, working directory), e.g.
	// {"--maxmemory", "64mb"}.
	Args []string
}

// Server is one running redis-server process. Its methods are safe for
// concurrent use.
type Server struct {
	addr    string
	missing error // set when redis-server is not installed (outside CI)

	mu      sync.Mutex // guards cmd, exited and log across Restart
	cmd     *exec.Cmd
	dir     string
	exited  chan struct{} // closed when the process has exited
	log     *tail
	stopped sync.Once
	stopErr error

	// How the process was launched, for Restart.
	bin        string
	pre, extra []string
	ready      string
}

// Start starts a server for one test and stops it when the test ends. When
// redis-server is not installed it skips the test, or fails it when the
// environment variable CI is set.
func Start(tb testing.TB) *Server {
	tb.Helper()
	return StartWith(tb, Options{})
}

// StartWith is Start with options.
func StartWith(tb testing.TB, opts Options) *Server {
	tb.Helper()
	s, err := StartMain(opts)
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

// StartMain starts a server for a whole test package; call it from TestMain
// and Stop the server after the tests have run.
//
// When redis-server is not installed, StartMain returns an error wrapping
// ErrNotInstalled if the environment variable CI is set; otherwise it
// returns a Server that has no process, whose Require skips every test that
// calls it.
func StartMain(opts Options) (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			return nil, fmt.Errorf("%w (CI is set, so a missing server is a failure)", ErrNotInstalled)
		}
		return &Server{missing: ErrNotInstalled}, nil
	}
	// The free port is found by binding to port 0 and releasing it, so
	// another process may take it before redis-server binds; try again with
	// a new port when that happens.
	for try := 1; ; try++ {
		s, err := start(bin, opts)
		if err == nil || !errors.Is(err, errPortTaken) || try == 3 {
			return s, err
		}
	}
}

// Addr returns the server's address, "127.0.0.1:PORT"; empty when
// redis-server is not installed.
func (s *Server) Addr() string { return s.addr }

// Require skips tb when the server could not be started because
// redis-server is not installed. It does nothing for a running server.
func (s *Server) Require(tb testing.TB) {
	tb.Helper()
	if s == nil {
		tb.Fatal("redistest: no server; was StartMain called from TestMain?")
	}
	if s.missing != nil {
		tb.Skip(s.missing)
	}
}

// Stop stops the server and removes its directory. It is safe to call more
// than once; later calls return the first call's result.
func (s *Server) Stop() error {
	if s.cmd == nil {
		return nil
	}
	s.stopped.Do(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if !s.terminate() {
			s.stopErr = fmt.Errorf("redistest: redis-server on %s did not stop on SIGTERM and was killed", s.addr)
		}
		if err := os.RemoveAll(s.dir); err != nil && s.stopErr == nil {
			s.stopErr = fmt.Errorf("redistest: %w", err)
		}
	})
	return s.stopErr
}

// terminate sends SIGTERM (and SIGCONT, in case the process is paused) and
// waits for the process to exit, killing it after 10 seconds. It reports
// whether SIGTERM was enough. The caller holds s.mu.
func (s *Server) terminate() bool {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	_ = s.cmd.Process.Signal(syscall.SIGCONT)
	select {
	case <-s.exited:
		return true
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
		return false
	}
}

// kill kills the process and waits for it to exit.
func (s *Server) kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// start starts one redis-server on a free port and waits until it answers
// PING.
func start(bin string, opts Options) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redistest-")
	if err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	s, err := launch(bin, port, dir, nil, opts.Args, readyServer)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// Lines a process logs once it accepts connections.
const (
	readyServer   = "Ready to accept connections"
	readySentinel = "Sentinel ID is"
)

// launch runs redis-server on port with dir as its working directory: pre
// are arguments placed before the harness's own (a configuration file),
// extra after them. It waits for the log line ready and a PONG. On failure
// the process is stopped; dir is left to the caller.
func launch(bin string, port int, dir string, pre, extra []string, ready string) (*Server, error) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	args := append([]string(nil), pre...)
	args = append(args,
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--dir", dir,
		"--daemonize", "no",
		"--logfile", "",
	)
	if ready == readyServer {
		args = append(args, "--save", "", "--appendonly", "no")
	}
	args = append(args, extra...)
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.SysProcAttr = sysProcAttr()
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("redistest: %w", err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("redistest: starting redis-server: %w", err)
	}
	s := &Server{addr: addr, cmd: cmd, dir: dir, exited: make(chan struct{}), log: &tail{},
		bin: bin, pre: pre, extra: extra, ready: ready}

	// redis-server logs its ready line once it listens; the log is read to
	// the end so that the server never blocks on its pipe.
	readyc := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			s.log.add(line)
			if !signalled && strings.Contains(line, ready) {
				signalled = true
				close(readyc)
			}
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		close(s.exited)
	}()

	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case <-readyc:
	case <-s.exited:
		log := s.log.String()
		if strings.Contains(log, "Address already in use") {
			return nil, fmt.Errorf("redistest: redis-server on %s: %w", addr, errPortTaken)
		}
		return nil, fmt.Errorf("redistest: redis-server %s exited before accepting connections:\n%s", strings.Join(args, " "), log)
	case <-timer.C:
		s.kill()
		return nil, fmt.Errorf("redistest: redis-server on %s not ready after %v:\n%s", addr, startTimeout, s.log)
	}
	if err := ping(addr); err != nil {
		s.kill()
		return nil, fmt.Errorf("redistest: redis-server on %s: %w\n%s", addr, err, s.log)
	}
	return s, nil
}

// freePort returns a loopback TCP port that was free a moment ago, never
// Redis's default port.
func freePort() (int, error) {
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("redistest: finding a free port: %w", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if port != 6379 {
			return port, nil
		}
	}
}

// ping sends PING in the inline protocol and expects +PONG.
func ping(addr string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	if _, err := io.WriteString(conn, "PING\r\n"); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q, want +PONG", line)
	}
	return nil
}

// tail keeps the last lines of a server's log for error messages.
type tail struct {
	mu    sync.Mutex
	lines []string
}

const tailLines = 40

func (t *tail) add(line string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == tailLines {
		t.lines = append(t.lines[:0], t.lines[1:]...)
	}
	t.lines = append(t.lines, line)
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.Join(t.lines, "\n")
}
