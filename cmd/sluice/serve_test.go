package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The end-to-end tests build the sluice binary once and run it as a user
// would: `sluice serve` on loopback ports with a configuration file.

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// sluiceBinary builds the command once per test run and returns its path.
func sluiceBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "sluice-bin-"); binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "sluice")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// writeFile writes a file in dir and returns its path.
func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// serveProc is one running `sluice serve`.
type serveProc struct {
	t        *testing.T
	cmd      *exec.Cmd
	HTTP     string // http://127.0.0.1:PORT
	GRPC     string // 127.0.0.1:PORT
	mu       sync.Mutex
	logs     []map[string]any
	exited   chan struct{}
	exitCode int
}

// startServe starts `sluice serve --config file` on free loopback ports
// with JSON logs, waits until it serves, and stops it when the test ends.
func startServe(t *testing.T, file string, args ...string) *serveProc {
	t.Helper()
	return startServeArgs(t, nil, append([]string{"--config", file}, args...)...)
}

// startServeArgs starts `sluice serve` with args after the loopback ports,
// JSON logs and a 50ms watch, with env added to the environment.
func startServeArgs(t *testing.T, env []string, args ...string) *serveProc {
	t.Helper()
	args = append([]string{"serve", "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0",
		"--log-format", "json", "--watch", "50ms"}, args...)
	return startProc(t, sluiceBinary(t), args, env)
}

// startProc starts bin with args and env added to the environment; it
// must log JSON, as serve does with --log-format json or LOG_FORMAT=json.
func startProc(t *testing.T, bin string, args, env []string) *serveProc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serveProc{t: t, cmd: cmd, exited: make(chan struct{})}
	ready := make(chan map[string]any, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var rec map[string]any
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				rec = map[string]any{"msg": sc.Text(), "level": "RAW"}
			}
			p.mu.Lock()
			p.logs = append(p.logs, rec)
			p.mu.Unlock()
			if rec["msg"] == "sluice serving" {
				ready <- rec
			}
		}
		_ = cmd.Wait()
		p.exitCode = cmd.ProcessState.ExitCode()
		close(p.exited)
	}()
	t.Cleanup(p.stop)
	select {
	case rec := <-ready:
		p.HTTP = "http://" + rec["http"].(string)
		if g, ok := rec["grpc"].(string); ok {
			p.GRPC = g
		}
	case <-p.exited:
		t.Fatalf("sluice serve exited with %d before serving:\n%s", p.exitCode, p.logText())
	case <-time.After(20 * time.Second):
		t.Fatalf("sluice serve did not start:\n%s", p.logText())
	}
	return p
}

// stop sends SIGTERM and waits for the process to exit.
func (p *serveProc) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		p.t.Errorf("sluice serve did not stop on SIGTERM")
	}
}

func (p *serveProc) logText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var b strings.Builder
	for _, rec := range p.logs {
		line, _ := json.Marshal(rec)
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// waitLog waits until a log record whose message contains msg appears and
// returns it.
func (p *serveProc) waitLog(msg string, timeout time.Duration) map[string]any {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		p.mu.Lock()
		for _, rec := range p.logs {
			if m, _ := rec["msg"].(string); strings.Contains(m, msg) {
				p.mu.Unlock()
				return rec
			}
		}
		p.mu.Unlock()
		if time.Now().After(deadline) {
			p.t.Fatalf("no log record %q after %v:\n%s", msg, timeout, p.logText())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// response is an HTTP response read in full.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v.
func (r *response) JSON(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("body %q: %v", r.Body, err)
	}
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// do sends a request to the server and reads the response.
func (p *serveProc) do(method, path, body string, header ...string) *response {
	p.t.Helper()
	return request(p.t, method, p.HTTP+path, body, header...)
}

// request sends a request to url with the header's name, value pairs and
// reads the response.
func request(t *testing.T, method, url, body string, header ...string) *response {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return &response{Status: res.StatusCode, Header: res.Header, Body: b}
}

// post posts a JSON body and expects 200.
func (p *serveProc) post(path, body string, v any) {
	p.t.Helper()
	r := p.do("POST", path, body)
	if r.Status != 200 {
		p.t.Fatalf("POST %s %s = %d %s", path, body, r.Status, r.Body)
	}
	r.JSON(p.t, v)
}

// runCLI runs the built binary and returns its exit code, stdout and stderr.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return runCLIEnv(t, nil, args...)
}

// runCLIEnv runs the built binary with env as its whole environment (nil:
// this process's) and returns its exit code, stdout and stderr.
func runCLIEnv(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	bin := sluiceBinary(t) // built before the timeout starts
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = env
	err := cmd.Run()
	if err != nil && cmd.ProcessState == nil {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}
