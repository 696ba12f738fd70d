package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/sluicerate/sluice"
)

// rolling-rate-limiter, a sliding log in Redis for Node.js, runs in a
// process of its own: rolling/run.js drives it with the workload and prints
// what it measured. Its dependencies are pinned by rolling/package-lock.json
// and installed from npm on first use (npm ci); without node and npm its
// rows are left out.

// rollingDir is where run.js and its package files are, relative to bench/.
const rollingDir = "rolling"

// rollingReady installs rolling/'s dependencies when they are missing.
func rollingReady() error {
	for _, cmd := range []string{"node", "npm"} {
		if _, err := exec.LookPath(cmd); err != nil {
			return fmt.Errorf("%s is not installed (Debian: apt-get install -y nodejs npm)", cmd)
		}
	}
	if _, err := os.Stat(filepath.Join(rollingDir, "run.js")); err != nil {
		return fmt.Errorf("run the benchmark from bench/: %w", err)
	}
	if _, err := os.Stat(filepath.Join(rollingDir, "node_modules", "rolling-rate-limiter")); err == nil {
		return nil
	}
	cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund", "--loglevel=error")
	cmd.Dir = rollingDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("npm ci in bench/%s: %v\n%s", rollingDir, err, out)
	}
	return nil
}

// rollingRun is run.js's report.
type rollingRun struct {
	Ops, Allowed, Errors int64
	FirstError           string
	ElapsedMs            float64
	P50Us, P99Us, CPUUs  float64
}

// runRolling runs rolling-rate-limiter on the Redis at addr with w, limit
// events per window per key and at least gap between them, its keys named
// namespace + "k" + i.
func runRolling(addr string, w workload, limit int64, window, gap time.Duration, namespace string) (outcome, error) {
	if err := rollingReady(); err != nil {
		return outcome{}, err
	}
	cmd := exec.Command("node", "run.js", "--addr", addr, "--namespace", namespace,
		"--keys", strconv.Itoa(w.keys), "--concurrency", strconv.Itoa(w.goroutines),
		"--limit", strconv.FormatInt(limit, 10), "--window-ms", strconv.FormatInt(window.Milliseconds(), 10),
		"--min-difference-ms", strconv.FormatInt(gap.Milliseconds(), 10),
		"--duration-ms", strconv.FormatInt(w.duration.Milliseconds(), 10))
	cmd.Dir = rollingDir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return outcome{}, fmt.Errorf("node run.js: %v\n%s", err, stderr.String())
	}
	var r rollingRun
	if err := json.Unmarshal(out, &r); err != nil {
		return outcome{}, fmt.Errorf("node run.js printed %q: %v", out, err)
	}
	o := outcome{ops: r.Ops, allowed: r.Allowed, errors: r.Errors, elapsed: time.Duration(r.ElapsedMs * float64(time.Millisecond)),
		p50: time.Duration(r.P50Us * float64(time.Microsecond)), p99: time.Duration(r.P99Us * float64(time.Microsecond)),
		allocsPerOp: -1}
	if r.Ops > 0 {
		o.clientCPU = r.CPUUs / float64(r.Ops)
	}
	if r.FirstError != "" {
		o.firstErr = errors.New(r.FirstError)
	}
	return o, nil
}

// openRolling is rolling-rate-limiter as a contender of the Redis table:
// 100 per minute per key, its keys "rrl:k<i>".
func openRolling(addr string, names []string) (*instance, error) {
	return &instance{
		run: func(w workload) (outcome, error) {
			return runRolling(addr, w, perKeyLimit, window, 0, "rrl:")
		},
		redisKey: func(i int) string { return "rrl:" + names[i] },
		zset:     true,
		close:    func() {},
	}, nil
}

// retryTable measures what a client that retries at once when denied is
// admitted, one caller deciding back to back on one key: under a limit of
// 10 per second, and under a minimum gap of 100 ms (the push
// notifications' gap). A log that records denied attempts
// (rolling-rate-limiter, and sluice's penalize policies, by choice) keeps
// the window full, or the gap from the latest attempt, while the client
// retries, and admits it nothing more.
func (b *bench) retryTable() {
	w := workload{goroutines: 1, keys: 1, duration: b.w.duration}
	for _, c := range []struct {
		title string
		rule  sluice.Rule // rolling-rate-limiter: Limit per Window, MinGap between
	}{
		{"10 per second", sluice.Rule{Limit: 10, Window: time.Second}},
		{"a minimum gap of 100 ms", sluice.Rule{Limit: 1 << 20, Window: time.Second, MinGap: 100 * time.Millisecond}},
	} {
		fmt.Printf("### A client that retries at once: one key, %s, one caller back to back for %v\n\n", c.title, w.duration)
		fmt.Println("| contender | attempts | admitted | admitted per second | events in the key at the end | |")
		fmt.Println("|---|---:|---:|---:|---:|---|")
		for _, penalize := range []bool{false, true} {
			name, note := "sluice", "records admissions only"
			if penalize {
				name, note = "sluice, penalize: true", "records denied attempts too, by choice"
			}
			r := c.rule
			r.Name, r.By = "per-key", []string{"key"}
			b.adm.flush()
			inst, err := openSluice(&sluice.Policy{Name: "retry", Penalize: penalize, Rules: []sluice.Rule{r}}, benchLimiterConfig)(b.addr, keyNames(1))
			if err != nil {
				fmt.Fprintf(os.Stderr, "bench: %s: %v\n", name, err)
				continue
			}
			o := run(w, inst.worker, progress(name))
			doneProgress()
			b.retryRow(name, note, o, inst.redisKey(0))
			inst.close()
		}
		b.adm.flush()
		progress("rolling-rate-limiter")(0)
		o, err := runRolling(b.addr, w, c.rule.Limit, c.rule.Window, c.rule.MinGap, "retry:")
		doneProgress()
		if err != nil {
			fmt.Fprintf(os.Stderr, "bench: rolling-rate-limiter: %v\n", err)
		} else {
			b.retryRow("rolling-rate-limiter 0.4.2", "records every attempt", o, "retry:k0")
		}
		fmt.Println()
	}
}

// retryRow prints a row of retryTable: o, and the events key holds.
func (b *bench) retryRow(name, note string, o outcome, key string) {
	_, events, _ := b.adm.memoryUsage(key, true)
	fmt.Printf("| %s | %d | %d | %.1f | %d | %s |\n", name, o.ops, o.allowed, float64(o.allowed)/o.elapsed.Seconds(), events, note)
}
