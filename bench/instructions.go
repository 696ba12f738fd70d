package main

// The instructions section: the Redis server's own work per decision,
// counted in instructions by valgrind's callgrind rather than timed, so that
// other processes on the machine do not move it. Each contender runs a
// fixed number of decisions at a fixed number of goroutines on a
// redis-server under callgrind; Redis, slowed down about fifty times, is
// then always the bottleneck, so a batching client sends batches of about
// half its goroutines (two calls in flight).

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// callgrindServer is a redis-server run under callgrind.
type callgrindServer struct {
	addr string
	cmd  *exec.Cmd
	dir  string
	out  string // callgrind's output file prefix
	dump int    // dumps taken so far
}

func startCallgrindRedis(bin string) (*callgrindServer, error) {
	vg, err := exec.LookPath("valgrind")
	if err != nil {
		return nil, fmt.Errorf("valgrind not found in PATH (apt-get install -y valgrind): %w", err)
	}
	if bin == "" {
		if bin, err = exec.LookPath("redis-server"); err != nil {
			return nil, err
		}
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	_, port, _ := strings.Cut(addr, ":")
	dir, err := os.MkdirTemp("", "sluice-callgrind-")
	if err != nil {
		return nil, err
	}
	out := filepath.Join(dir, "callgrind.out")
	cmd := exec.Command(vg, "--tool=callgrind", "--compress-strings=no", "--compress-pos=no", "--callgrind-out-file="+out, bin,
		"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir, "--daemonize", "no")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &callgrindServer{addr: addr, cmd: cmd, dir: dir, out: out}
	deadline := time.Now().Add(60 * time.Second)
	for !dialable(addr) {
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("redis-server under callgrind does not listen on %s after 60s", addr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return s, nil
}

func (s *callgrindServer) control(args ...string) error {
	cmd := exec.Command("callgrind_control", append(args, strconv.Itoa(s.cmd.Process.Pid))...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("callgrind_control %v: %v: %s", args, err, out)
	}
	return nil
}

// zero resets callgrind's counts.
func (s *callgrindServer) zero() error { return s.control("-z") }

// instructions dumps callgrind's counts and returns the instructions since
// the last zero, and the dump's file.
func (s *callgrindServer) instructions() (int64, string, error) {
	if err := s.control("-d"); err != nil {
		return 0, "", err
	}
	s.dump++
	file := fmt.Sprintf("%s.%d", s.out, s.dump)
	f, err := os.Open(file)
	if err != nil {
		return 0, "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		for _, p := range []string{"summary: ", "totals: "} {
			if v, ok := strings.CutPrefix(line, p); ok {
				n, err := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
				return n, file, err
			}
		}
	}
	return 0, file, fmt.Errorf("no totals in %s", file)
}

func (s *callgrindServer) stop() {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = s.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = s.cmd.Process.Kill()
		}
	}
}

// instructionsTable counts the Redis server's instructions per decision of
// the main Redis contenders, alone (one goroutine) and batched.
func (b *bench) instructionsTable(server string, goroutines []int, decisions int, keep bool) {
	srv, err := startCallgrindRedis(server)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: instructions:", err)
		return
	}
	defer srv.stop()
	if !keep {
		defer os.RemoveAll(srv.dir)
	}
	adm, err := newAdmin(srv.addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: instructions:", err)
		return
	}
	names := keyNames(b.w.keys)
	fmt.Printf("### Redis instructions per decision (callgrind; %d decisions over %d keys per row, each key written once before)\n\n", decisions, b.w.keys)
	var rows []contender
	for _, c := range redisContenders() {
		if !b.picks(c.name) || !countable(c.name) {
			continue
		}
		rows = append(rows, c)
	}
	if !b.countRows(srv, adm, names, rows, goroutines, decisions, keep) {
		return
	}
	// The leases section's rows: an operation is an acquire and its
	// release or settle, two script calls.
	rows = rows[:0]
	for _, c := range leaseRows() {
		if c.name = "sluice " + c.name; b.picks(c.name) {
			rows = append(rows, c)
		}
	}
	if len(rows) > 0 {
		fmt.Printf("### Redis instructions per lease operation (callgrind; %d operations over %d keys per row, each key used once before)\n\n", decisions, b.w.keys)
		b.countRows(srv, adm, names, rows, goroutines, decisions, keep)
	}
}

// countRows prints a table of the instructions per operation of each of
// rows at each of goroutines, and reports whether callgrind answered.
func (b *bench) countRows(srv *callgrindServer, adm *admin, names []string, rows []contender, goroutines []int, decisions int, keep bool) bool {
	fmt.Println("| contender | goroutines | allowed | script calls/operation | Redis instructions/operation | top commands per operation |")
	fmt.Println("|---|---:|---:|---:|---:|---|")
	perG := map[int]map[string][]float64{} // instructions per operation, by goroutines and contender
	for _, c := range rows {
		for _, g := range goroutines {
			adm.flush()
			inst, err := c.open(srv.addr, names)
			if err != nil {
				fmt.Fprintf(os.Stderr, "bench: instructions: %s: %v\n", c.name, err)
				continue
			}
			progress(fmt.Sprintf("%s ×%d", c.name, g))(0)
			// Warm: scripts loaded, connections open, every key written once,
			// so that the counted decisions meet keys as a longer run does.
			_, _ = runCount(max(g, b.w.keys), g, b.w.keys, inst.worker)
			adm.resetStats()
			if err := srv.zero(); err != nil {
				fmt.Fprintln(os.Stderr, "bench: instructions:", err)
				inst.close()
				return false
			}
			allowed, err := runCount(decisions, g, b.w.keys, inst.worker)
			ir, file, derr := srv.instructions()
			inst.close()
			doneProgress()
			if err != nil || derr != nil {
				fmt.Fprintf(os.Stderr, "bench: instructions: %s: %v %v\n", c.name, err, derr)
				continue
			}
			n := decisions / g * g
			cmds, calls, _ := adm.commandStats()
			var scripts float64
			type cs struct {
				name string
				per  float64
			}
			var top []cs
			for i, name := range cmds {
				switch {
				case name == "info" || name == "config|resetstat":
				case strings.HasPrefix(name, "eval") || strings.HasPrefix(name, "fcall"):
					scripts += calls[i]
				default:
					top = append(top, cs{name, calls[i] / float64(n)})
				}
			}
			sort.Slice(top, func(i, j int) bool { return top[i].per > top[j].per })
			var parts []string
			for _, t := range top {
				if t.per >= 0.01 {
					parts = append(parts, fmt.Sprintf("%s %.2f", strings.ToUpper(t.name), t.per))
				}
			}
			note := ""
			if keep {
				note = " (" + file + ")"
			}
			fmt.Printf("| %s | %d | %.0f%% | %.3f | %.0f | %s%s |\n", c.name, g, 100*float64(allowed)/float64(n),
				scripts/float64(n), float64(ir)/float64(n), strings.Join(parts, ", "), note)
			if perG[g] == nil {
				perG[g] = map[string][]float64{}
			}
			perG[g][c.name] = []float64{float64(ir) / float64(n)}
		}
	}
	fmt.Println()
	for _, g := range goroutines {
		printLine(quotaVerdict(fmt.Sprintf("Redis instructions (%d goroutines)", g), 0, perG[g]))
	}
	return true
}

// countable reports whether a contender runs in this process (not
// rolling-rate-limiter's Node.js).
func countable(name string) bool { return !strings.Contains(name, "Node.js") }
