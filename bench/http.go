package main

// The http section: sluice serve's POST /v1/decide on the memory store
// beside a trivial net/http handler that reads the same body and writes a
// JSON answer of the same size, both processes of their own, under the same
// wrk load, the contenders taking turns within each round.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// httpConfig serves the notifier's policy with limits no load reaches, so
// that every request is allowed and decided in full; a window of a second
// keeps a key's log at one second of requests.
const httpConfig = `policies:
  - name: notify
    limits:
      - {name: global, limit: 1000000000, window: 1s}
      - {name: category, by: [category], limit: 1000000000, window: 1s}
`

const httpDecideBody = `{"policy":"notify","attributes":{"category":"errors"},"cost":1}`

// httpBatchBody is a batch of n decide requests.
func httpBatchBody(n int) string {
	return "[" + strings.Repeat(httpDecideBody+",", n-1) + httpDecideBody + "]"
}

// trivialEnv holds, in a process this one starts, the address a trivial
// handler serves on and the size of its answer (ADDR,BYTES): the process is
// then that server and nothing else.
const trivialEnv = "SLUICE_BENCH_TRIVIAL_HTTP"

func init() {
	if v := os.Getenv(trivialEnv); v != "" {
		serveTrivial(v)
		os.Exit(0)
	}
}

// serveTrivial serves the trivial handler as trivialEnv's value v says:
// POST /v1/decide reads the body and answers 200 with a JSON object of the
// given size, ending in a newline, like sluice's; /healthz answers 200. Its
// http.Server has sluice serve's timeouts.
func serveTrivial(v string) {
	addr, size, _ := strings.Cut(v, ",")
	n, err := strconv.Atoi(size)
	if err != nil || n < len(`{"allowed":true,"pad":""}`)+1 {
		fmt.Fprintf(os.Stderr, "bench: %s=%q: want ADDR,BYTES\n", trivialEnv, v)
		os.Exit(2)
	}
	answer := []byte(`{"allowed":true,"pad":"` + strings.Repeat("x", n-len(`{"allowed":true,"pad":""}`)-1) + "\"}\n")
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/decide", func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(answer)
	})
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {})
	// The timeouts of sluice serve's server (internal/server.HTTPServer), so
	// that the two servers differ by their handlers only.
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	fmt.Fprintln(os.Stderr, srv.ListenAndServe())
	os.Exit(1)
}

// httpContender is one server and body under load.
type httpContender struct {
	name  string
	url   string
	body  string
	items int // decisions per request
}

// httpRow is one contender's wrk run and the CPU its server used.
type httpRow struct {
	wrkResult
	serverCPU time.Duration
}

func (r httpRow) decisionsPerSecond(items int) float64 { return r.perSecond() * float64(items) }

// httpTable measures the contenders round-robin, rounds times each for d,
// with wrk's 2 threads and 64 connections, and prints the median round of
// each and every round's ratio of sluice's single decisions to the trivial
// handler's requests.
func (b *bench) httpTable(rounds int, d time.Duration) {
	if err := b.runHTTP(rounds, d); err != nil {
		fmt.Fprintln(os.Stderr, "bench: http:", err)
		fmt.Printf("(http section not measured: %v)\n\n", err)
	}
}

func (b *bench) runHTTP(rounds int, d time.Duration) error {
	dir, err := os.MkdirTemp("", "sluice-bench-http-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	progress("http: building sluice")(0)
	bin, err := buildSluiceCommand(dir)
	doneProgress()
	if err != nil {
		return err
	}
	cfg := filepath.Join(dir, "sluice.yaml")
	if err := os.WriteFile(cfg, []byte(httpConfig), 0o644); err != nil {
		return err
	}
	sluiceAddr, err := freeAddr()
	if err != nil {
		return err
	}
	sluice, err := startProcess("sluice serve", bin, []string{"serve", "--config", cfg, "--http", sluiceAddr,
		"--admin", "", "--log-level", "warn", "--watch", "0"}, "http://"+sluiceAddr+"/healthz")
	if err != nil {
		return err
	}
	defer sluice.stop()

	// The trivial handler answers as many bytes as sluice does.
	decideURL := "http://" + sluiceAddr + "/v1/decide"
	answer, err := postOnce(decideURL, httpDecideBody)
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(answer, []byte(`{"allowed":true,`)) {
		return fmt.Errorf("sluice answers %s, want an allowed decision", answer)
	}
	const batch = 10
	if a, err := postOnce(decideURL, httpBatchBody(batch)); err != nil || bytes.Count(a, []byte(`"status":200`)) != batch {
		return fmt.Errorf("sluice answers a batch of %d with %s (%v), want %d decisions", batch, a, err, batch)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	trivialAddr, err := freeAddr()
	if err != nil {
		return err
	}
	trivial, err := startProcessEnv("trivial handler", self, nil, []string{trivialEnv + "=" + trivialAddr + "," + strconv.Itoa(len(answer))},
		"http://"+trivialAddr+"/healthz")
	if err != nil {
		return err
	}
	defer trivial.stop()
	if a, err := postOnce("http://"+trivialAddr+"/v1/decide", httpDecideBody); err != nil || len(a) != len(answer) {
		return fmt.Errorf("the trivial handler answers %d bytes (%v), want %d", len(a), err, len(answer))
	}

	cs := []httpContender{
		{"trivial net/http handler", "http://" + trivialAddr + "/v1/decide", httpDecideBody, 1},
		{"sluice, one decision per request", decideURL, httpDecideBody, 1},
		{fmt.Sprintf("sluice, batches of %d", batch), decideURL, httpBatchBody(batch), batch},
	}
	servers := []*process{trivial, sluice, sluice}
	load := wrkLoad{threads: 2, connections: 64, duration: d}
	loadBefore := loadAverage()
	all := make([][]httpRow, len(cs))
	for r := range rounds {
		for i, c := range cs {
			progress(fmt.Sprintf("http: %s, round %d", c.name, r+1))(0)
			cpu0 := servers[i].cpu()
			res, err := runWrkScript(context.Background(), load, c.url, luaPost(c.body))
			cpu := servers[i].cpu() - cpu0
			doneProgress()
			if err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			if res.errors > 0 || res.non2xx > 0 {
				fmt.Fprintf(os.Stderr, "bench: http: %s, round %d: %d socket errors, %d answers not 2xx\n", c.name, r+1, res.errors, res.non2xx)
			}
			all[i] = append(all[i], httpRow{wrkResult: res, serverCPU: cpu})
		}
	}

	fmt.Printf("### HTTP: POST /v1/decide on the memory store, wrk -t%d -c%d, %v per run (median of %d rounds, contenders in turn)\n\n",
		load.threads, load.connections, d, rounds)
	fmt.Printf("Load average before %s, after %s. The trivial handler reads the body and answers %d bytes of JSON, as sluice does for one decision, from an http.Server with sluice serve's timeouts.\n\n",
		loadBefore, loadAverage(), len(answer))
	fmt.Println("| contender | requests/s | decisions/s | ÷ trivial (decisions/s) | mean | p50 | p99 | server CPU µs/request |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|")
	med := make([]httpRow, len(cs))
	for i, c := range cs {
		med[i] = medianBy(all[i], httpRow.perSecond)
		m := med[i]
		fmt.Printf("| %s | %.0f | %.0f | %.2f | %s | %s | %s | %.1f |\n", c.name, m.perSecond(), m.decisionsPerSecond(c.items),
			m.decisionsPerSecond(c.items)/med[0].perSecond(), fmtDur(m.mean), fmtDur(m.p50), fmtDur(m.p99),
			float64(m.serverCPU.Microseconds())/max(1, float64(m.requests)))
	}
	fmt.Println()
	fmt.Println("Every round (requests/s), and sluice's single decisions ÷ the trivial handler's requests in the same round:")
	fmt.Println()
	for i, c := range cs {
		var s []string
		for _, r := range all[i] {
			s = append(s, fmt.Sprintf("%.0f", r.perSecond()))
		}
		fmt.Printf("- %s: %s\n", c.name, strings.Join(s, ", "))
	}
	var ratios []string
	var rs []float64
	for r := range min(len(all[0]), len(all[1])) {
		rs = append(rs, all[1][r].perSecond()/all[0][r].perSecond())
		ratios = append(ratios, fmt.Sprintf("%.0f%%", 100*rs[r]))
	}
	slices.Sort(rs)
	fmt.Printf("- sluice ÷ trivial: %s; median %.0f%%\n\n", strings.Join(ratios, ", "), 100*rs[len(rs)/2])
	return nil
}

// postOnce POSTs body to url and returns the answer of a 200.
func postOnce(url, body string) ([]byte, error) {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s answers %d: %s", url, resp.StatusCode, b)
	}
	return b, err
}
