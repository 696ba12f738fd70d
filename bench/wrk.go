package main

// The pieces of a load test over HTTP, shared by the sections that measure
// servers with wrk: sluice built from this repository, a server process on
// a free loopback port that is ready when it answers, and one wrk run read
// back as figures.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// freeAddr returns a loopback address with a port that was free a moment
// ago: "127.0.0.1:PORT".
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// buildSluiceCommand builds the sluice command of the repository this module
// replaces (the parent directory) into dir and returns its path.
func buildSluiceCommand(dir string) (string, error) {
	bin := filepath.Join(dir, "sluice")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/sluice")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building cmd/sluice: %v\n%s", err, out)
	}
	return bin, nil
}

// process is a server started for a benchmark, killed with this process.
type process struct {
	name string
	cmd  *exec.Cmd
	out  *tailBuffer
	done chan struct{}
}

// startProcess starts bin with args and waits until an HTTP GET of ready
// answers 200, for at most 15 seconds. The process's output is kept (its
// last 4 KiB) for the error of a process that exits early.
func startProcess(name, bin string, args []string, ready string) (*process, error) {
	return startProcessEnv(name, bin, args, nil, ready)
}

// startProcessEnv is startProcess with env added to the process's
// environment.
func startProcessEnv(name, bin string, args, env []string, ready string) (*process, error) {
	p := &process{name: name, cmd: exec.Command(bin, args...), out: &tailBuffer{max: 4 << 10}, done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if env != nil {
		p.cmd.Env = append(os.Environ(), env...)
	}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	client := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := client.Get(ready)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("%s exited before answering %s:\n%s", name, ready, p.out)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("%s does not answer %s after 15s (last: %v):\n%s", name, ready, err, p.out)
		}
	}
}

// stop ends the process: SIGTERM, then SIGKILL after 10 seconds.
func (p *process) stop() { terminate(p.cmd, p.done) }

// terminate sends cmd's process SIGTERM, and SIGKILL if it has not exited
// (done is closed) 10 seconds later, and waits for it to exit.
func terminate(cmd *exec.Cmd, done <-chan struct{}) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	kill := time.AfterFunc(10*time.Second, func() { _ = cmd.Process.Kill() })
	<-done
	kill.Stop()
}

// cpu returns the CPU time (user and system) the process has used so far,
// from /proc/PID/stat; 0 where there is none.
func (p *process) cpu() time.Duration {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p.cmd.Process.Pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command's name (field 2) is in parentheses and may hold spaces;
	// utime and stime are fields 14 and 15, the 12th and 13th after it.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	const ticksPerSecond = 100 // USER_HZ: 100 on Linux
	return time.Duration(utime+stime) * time.Second / ticksPerSecond
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// wrkLoad is how wrk drives a server.
type wrkLoad struct {
	threads     int           // wrk -t
	connections int           // wrk -c
	duration    time.Duration // wrk -d
}

// wrkResult is what one wrk run measured. Latencies are wrk's, from
// sending a request to reading its whole response.
type wrkResult struct {
	requests  int64
	elapsed   time.Duration
	errors    int64 // connect, read, write and timeout errors
	non2xx    int64 // responses with a status other than 2xx or 3xx
	mean      time.Duration
	p50, p90  time.Duration
	p99, pmax time.Duration
}

// perSecond is requests per second.
func (r wrkResult) perSecond() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(r.requests) / r.elapsed.Seconds()
}

// luaPost is a wrk script that POSTs body as application/json.
func luaPost(body string) string {
	return "wrk.method = \"POST\"\nwrk.body = " + luaString(body) + "\nwrk.headers[\"Content-Type\"] = \"application/json\"\n"
}

// luaString is s as a Lua long string, which takes its bytes as they are.
func luaString(s string) string {
	eq := ""
	for strings.Contains(s+"]", "]"+eq+"]") { // s's last ] and the closing bracket's first make one too
		eq += "="
	}
	// A long string drops a newline that follows its opening bracket.
	return "[" + eq + "[\n" + s + "]" + eq + "]"
}

// wrkReport is appended to every script: it prints the run's figures on one
// line that runWrkScript reads (latencies in µs).
const wrkReport = `
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("wrk-result %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f\n",
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency.mean, latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
`

// runWrkScript runs wrk against url under load with script (which sets the
// method, body and headers, or a request function; it must not define
// done, which runWrkScript appends) and returns what it measured.
func runWrkScript(ctx context.Context, load wrkLoad, url, script string) (wrkResult, error) {
	bin, err := exec.LookPath("wrk")
	if err != nil {
		return wrkResult{}, fmt.Errorf("wrk not found in PATH (install it with: apt-get install -y wrk, or make deps): %w", err)
	}
	f, err := os.CreateTemp("", "sluice-bench-*.lua")
	if err != nil {
		return wrkResult{}, err
	}
	defer os.Remove(f.Name())
	if _, err := f.WriteString(script + wrkReport); err != nil {
		f.Close()
		return wrkResult{}, err
	}
	if err := f.Close(); err != nil {
		return wrkResult{}, err
	}
	cmd := exec.CommandContext(ctx, bin, "-t", strconv.Itoa(load.threads), "-c", strconv.Itoa(load.connections),
		"-d", fmt.Sprintf("%.0fs", max(1, load.duration.Seconds())), "-s", f.Name(), url)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return wrkResult{}, fmt.Errorf("wrk: %v: %s", err, stderr.String())
	}
	return parseWrkReport(out.String())
}

// parseWrkReport reads the line wrkReport printed.
func parseWrkReport(out string) (wrkResult, error) {
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) != 13 || f[0] != "wrk-result" {
			continue
		}
		var v [12]int64
		for i := range v {
			n, err := strconv.ParseFloat(f[i+1], 64)
			if err != nil {
				return wrkResult{}, fmt.Errorf("wrk's report %q: %w", line, err)
			}
			v[i] = int64(n)
		}
		us := func(n int64) time.Duration { return time.Duration(n) * time.Microsecond }
		return wrkResult{requests: v[0], elapsed: us(v[1]), errors: v[2] + v[3] + v[4] + v[6], non2xx: v[5],
			mean: us(v[7]), p50: us(v[8]), p90: us(v[9]), p99: us(v[10]), pmax: us(v[11])}, nil
	}
	return wrkResult{}, errors.New("wrk printed no report; its output:\n" + out)
}
