package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Pause freezes the server with SIGSTOP: it keeps its connections open and
// answers nothing until Resume.
func (s *Server) Pause() error { return s.signal(syscall.SIGSTOP) }

// Resume lets a paused server run again with SIGCONT.
func (s *Server) Resume() error { return s.signal(syscall.SIGCONT) }

// Pid is the server process's ID (0 when there is none), for a caller that
// places it in a cgroup or pins it to a CPU.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

func (s *Server) signal(sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return errors.New("redistest: no server process")
	}
	return s.cmd.Process.Signal(sig)
}

// Restart stops the server (SIGTERM; it keeps nothing, so its data and
// script cache are gone) and starts it again on the same address with the
// same arguments. Clients see their connections drop.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return errors.New("redistest: no server process")
	}
	s.terminate()
	_, port, _ := net.SplitHostPort(s.addr)
	p, _ := strconv.Atoi(port)
	var (
		n   *Server
		err error
	)
	// The port was just released; another process may take it, and the
	// kernel may briefly refuse it: retry for a while.
	for range 50 {
		if n, err = launch(s.bin, p, s.dir, s.pre, s.extra, s.ready); err == nil || !errors.Is(err, errPortTaken) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	s.cmd, s.exited, s.log = n.cmd, n.exited, n.log
	return nil
}

// Do sends one command to the server and returns its reply as text: a
// status or bulk string as is, an integer in decimal, an array as its
// elements one per line, nil as "". An error reply is returned as an error.
func (s *Server) Do(args ...string) (string, error) {
	return do(s.addr, 10*time.Second, args...)
}

// DoTimeout is Do within timeout (dialling included): for a probe that must
// not wait for a frozen server.
func (s *Server) DoTimeout(timeout time.Duration, args ...string) (string, error) {
	return do(s.addr, timeout, args...)
}

// do sends one command in RESP to addr and reads its reply within timeout.
func do(addr string, timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	deadline, _ := ctx.Deadline()
	_ = conn.SetDeadline(deadline)
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(conn, b.String()); err != nil {
		return "", err
	}
	return readText(bufio.NewReader(conn))
}

// readText reads one RESP2 reply as text.
func readText(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("redistest: empty reply line")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("redistest: %s", line[1:])
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return "", nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*':
		n, _ := strconv.Atoi(line[1:])
		var parts []string
		for range n {
			p, err := readText(r)
			if err != nil {
				return "", err
			}
			parts = append(parts, p)
		}
		return strings.Join(parts, "\n"), nil
	}
	return "", fmt.Errorf("redistest: unexpected reply %q", line)
}

// waitFor polls cond every 50 ms until it reports true or timeout passes.
func waitFor(timeout time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		if time.Now().After(deadline) {
			if last != nil {
				return fmt.Errorf("redistest: %s not reached after %v: %w", what, timeout, last)
			}
			return fmt.Errorf("redistest: %s not reached after %v", what, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Shut stops the server (SIGTERM) and keeps its address, arguments and
// directory, so that Restart starts it again on the same address: a store
// that refuses connections until then, as one that starts after its
// clients.
func (s *Server) Shut() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return errors.New("redistest: no server process")
	}
	s.terminate()
	return nil
}
