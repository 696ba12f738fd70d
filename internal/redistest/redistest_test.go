package redistest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestStartAnswersPingAndStops(t *testing.T) {
	s := Start(t)
	host, port, err := net.SplitHostPort(s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if host != "127.0.0.1" || port == "6379" {
		t.Fatalf("Addr() = %q, want a loopback address on a port other than 6379", s.Addr())
	}
	if got := command(t, s.Addr(), "CONFIG GET save"); got != "*2\r\n$4\r\nsave\r\n$0\r\n\r\n" {
		t.Errorf("CONFIG GET save = %q, want persistence off", got)
	}
	if got := command(t, s.Addr(), "CONFIG GET appendonly"); got != "*2\r\n$10\r\nappendonly\r\n$2\r\nno\r\n" {
		t.Errorf("CONFIG GET appendonly = %q, want no", got)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if _, err := os.Stat(s.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("directory %s still there after Stop: %v", s.dir, err)
	}
	if conn, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
		conn.Close()
		t.Errorf("%s still accepts connections after Stop", s.Addr())
	}
}

func TestStartWithArgs(t *testing.T) {
	s := StartWith(t, Options{Args: []string{"--maxmemory", "12mb"}})
	if got := command(t, s.Addr(), "CONFIG GET maxmemory"); got != "*2\r\n$9\r\nmaxmemory\r\n$8\r\n12582912\r\n" {
		t.Errorf("CONFIG GET maxmemory = %q, want 12582912", got)
	}
}

func TestStartMainTwoServers(t *testing.T) {
	a, err := StartMain(Options{})
	if err != nil {
		t.Fatal(err)
	}
	a.Require(t)
	defer a.Stop()
	b, err := StartMain(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	if a.Addr() == b.Addr() {
		t.Fatalf("two servers on one address %s", a.Addr())
	}
}

func TestBadArgsReportLog(t *testing.T) {
	s, err := StartMain(Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Require(t)
	s.Stop()
	_, err = StartMain(Options{Args: []string{"--no-such-option", "1"}})
	if err == nil {
		t.Fatal("StartMain with a bad option: no error")
	}
	t.Logf("error (expected): %v", err)
}

func TestMissingServer(t *testing.T) {
	t.Setenv("PATH", t.TempDir())

	t.Run("skips outside CI", func(t *testing.T) {
		t.Setenv("CI", "")
		s, err := StartMain(Options{})
		if err != nil {
			t.Fatalf("StartMain: %v, want a server that skips", err)
		}
		if s.Addr() != "" {
			t.Errorf("Addr() = %q, want empty", s.Addr())
		}
		if err := s.Stop(); err != nil {
			t.Errorf("Stop: %v", err)
		}
		var skipped bool
		t.Run("require", func(t *testing.T) {
			defer func() { skipped = t.Skipped() }()
			s.Require(t)
		})
		if !skipped {
			t.Error("Require did not skip")
		}
	})
	t.Run("fails in CI", func(t *testing.T) {
		t.Setenv("CI", "true")
		_, err := StartMain(Options{})
		if !errors.Is(err, ErrNotInstalled) {
			t.Fatalf("StartMain: %v, want ErrNotInstalled", err)
		}
		if !strings.Contains(err.Error(), "apt-get install -y redis-server") {
			t.Errorf("error %q does not say how to install redis-server", err)
		}
	})
}

// command sends one command in the inline protocol and returns the raw
// reply.
func command(t *testing.T, addr, cmd string) string {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, cmd+"\r\n"); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := readReply(bufio.NewReader(conn), &out); err != nil {
		t.Fatal(err)
	}
	return out.String()
}

// readReply copies one RESP2 reply from r to out.
func readReply(r *bufio.Reader, out *strings.Builder) error {
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	out.WriteString(line)
	if len(line) < 3 {
		return fmt.Errorf("short reply line %q", line)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
	switch line[0] {
	case '$':
		if n < 0 {
			return nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return err
		}
		out.Write(buf)
	case '*':
		for range n {
			if err := readReply(r, out); err != nil {
				return err
			}
		}
	}
	return nil
}
