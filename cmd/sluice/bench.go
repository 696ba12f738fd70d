package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/bits"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/store"
)

// benchOptions is the workload of sluice bench.
type benchOptions struct {
	redisURL   string
	serverURL  string
	policy     string // server mode: the configured policy to decide
	attr       string // server mode: the attribute whose value is the key
	goroutines int
	keys       int
	limit      int64
	window     time.Duration
	rules      int
	duration   time.Duration
	timeout    time.Duration
	budget     time.Duration // each rule's Budget: answered from leased slices
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: sluice bench [--redis URL | --server URL] [flags]

Drives a store or a running sluice server with a workload: --goroutines
callers decide as fast as they can, each walking --keys keys from its own
offset, for --duration. The store is the in-memory store, or Redis at
--redis, deciding a policy of --rules rules of --limit per --window, each by
the key, through a Limiter as make bench drives sluice: no deadline per
store call unless --timeout gives one, no circuit breaker. The defaults
are make bench's workload. With --server, requests go to URL/v1/decide for the configured
--policy, the key in attribute --attr. A progress bar goes to stderr; the
decisions per second, a latency histogram of the decisions, and the calls
that failed (errors, never counted as decisions) to stdout. With --budget,
each rule is budgeted (leased in slices, answered in memory; see
docs/budgets.md) and the run counts the decisions answered from slices, as
it counts those a server marks "local" with --server.

flags:`)
		fs.PrintDefaults()
	}
	var o benchOptions
	fs.StringVar(&o.redisURL, "redis", "", "decide on Redis at this `URL` (redis://host:port[/db])")
	fs.StringVar(&o.serverURL, "server", "", "decide through a sluice server at this base `URL` (http://host:port)")
	fs.StringVar(&o.policy, "policy", "bench", "with --server: the configured policy's `name`")
	fs.StringVar(&o.attr, "attr", "key", "with --server: the `attribute` that carries the key")
	fs.IntVar(&o.goroutines, "goroutines", 64, "callers deciding at once")
	fs.IntVar(&o.keys, "keys", 10_000, "distinct keys")
	fs.Int64Var(&o.limit, "limit", 100, "each rule's limit")
	fs.DurationVar(&o.window, "window", time.Minute, "each rule's window")
	fs.IntVar(&o.rules, "rules", 1, "rules in the policy (each by key)")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "how long to run")
	fs.DurationVar(&o.budget, "budget", 0, "budget each rule by this `duration` (rule budget: D), answering from leased slices (not with --server: the budget is the server's configuration)")
	fs.DurationVar(&o.timeout, "timeout", 0, "deadline of each store call (0: none, as make bench decides; sluice.Config's default is 50ms)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "sluice bench: "+format+"\n", a...)
		return exitUsage
	}
	switch {
	case fs.NArg() > 0:
		return fail("unexpected argument %q", fs.Arg(0))
	case o.redisURL != "" && o.serverURL != "":
		return fail("--redis and --server exclude each other")
	case o.goroutines < 1 || o.keys < 1 || o.rules < 1 || o.limit < 1:
		return fail("--goroutines, --keys, --rules and --limit must be at least 1")
	case o.duration <= 0 || o.window < time.Microsecond:
		return fail("--duration must be positive and --window at least 1µs")
	case o.budget != 0 && o.serverURL != "":
		return fail("--budget and --server exclude each other: budget the policy in the server's configuration (budget: D), and the run counts its local answers")
	}

	decide, where, closeFn, err := o.target()
	if err != nil {
		fmt.Fprintf(stderr, "sluice bench: %v\n", err)
		return exitUsage
	}
	defer closeFn()
	budget := ""
	if o.budget > 0 {
		budget = fmt.Sprintf(", budget %v", o.budget)
	}
	fmt.Fprintf(stdout, "%s: %d goroutines, %d keys, %d rule(s) of %d per %v%s, %v\n",
		where, o.goroutines, o.keys, o.rules, o.limit, o.window, budget, o.duration)
	res := drive(ctx, o, decide, stderr)
	res.print(stdout, o.budget > 0 || o.serverURL != "")
	if res.ops == 0 {
		return exitUsage
	}
	return exitOK
}

// benchDecide decides one request for key number i.
type benchDecide func(ctx context.Context, i int) (benchAnswer, error)

// benchAnswer is what one decision said.
type benchAnswer struct {
	allowed bool
	local   bool // answered from slices of budgeted rules (Decision.Local)
}

// target opens what the workload drives and returns, per goroutine, a
// decider.
func (o *benchOptions) target() (func() benchDecide, string, func(), error) {
	names := make([]string, o.keys)
	for i := range names {
		names[i] = "k" + strconv.Itoa(i)
	}
	if o.serverURL != "" {
		return o.serverTarget(names)
	}
	p := &sluice.Policy{Name: "bench"}
	for i := range o.rules {
		p.Rules = append(p.Rules, sluice.Rule{Name: "r" + strconv.Itoa(i), Limit: o.limit, Window: o.window, By: []string{"key"}, Budget: o.budget})
	}
	if err := p.Validate(); err != nil {
		return nil, "", nil, err
	}
	var (
		store store.Store
		where = "the in-memory store"
	)
	if o.redisURL != "" {
		rs, err := redisstore.New(redisstore.Config{URL: o.redisURL, Prefix: "sluice-bench"})
		if err != nil {
			return nil, "", nil, err
		}
		store, where = rs, "Redis at "+redactURL(o.redisURL)
	} else {
		store = memstore.New(memstore.Config{})
	}
	// The Limiter make bench drives (bench/, the sluice contender): no
	// per-call deadline unless --timeout asks for one, and no circuit
	// breaker, which would turn a failing store's calls into instant
	// errors.
	cfg := sluice.Config{Timeout: -1, Breaker: sluice.Breaker{Failures: -1}}
	if o.timeout > 0 {
		cfg.Timeout = o.timeout
	}
	lim := sluice.NewLimiter(store, cfg)
	newDecide := func() benchDecide {
		attrs := map[string]string{"key": ""}
		return func(ctx context.Context, i int) (benchAnswer, error) {
			attrs["key"] = names[i]
			d, err := lim.Allow(ctx, p, attrs)
			return benchAnswer{allowed: d.Allowed, local: d.Local}, err
		}
	}
	return newDecide, where, func() { _ = lim.Close(); store.Close() }, nil
}

// serverTarget posts to the server's /v1/decide.
func (o *benchOptions) serverTarget(names []string) (func() benchDecide, string, func(), error) {
	base := strings.TrimRight(o.serverURL, "/")
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		return nil, "", nil, fmt.Errorf("--server %q: write it as http://host:port", o.serverURL)
	}
	tr := &http.Transport{MaxIdleConns: o.goroutines, MaxIdleConnsPerHost: o.goroutines, IdleConnTimeout: time.Minute}
	client := &http.Client{Transport: tr}
	url := base + "/v1/decide"
	policyJSON, err := json.Marshal(o.policy)
	if err != nil {
		return nil, "", nil, err
	}
	attr, err := json.Marshal(o.attr)
	if err != nil {
		return nil, "", nil, err
	}
	newDecide := func() benchDecide {
		var body []byte
		var reply struct {
			Allowed bool `json:"allowed"`
			Local   bool `json:"local"`
		}
		return func(ctx context.Context, i int) (benchAnswer, error) {
			body = append(body[:0], `{"policy":`...)
			body = append(body, policyJSON...)
			body = append(body, `,"attributes":{`...)
			body = append(body, attr...)
			body = append(body, `:"`...)
			body = append(body, names[i]...)
			body = append(body, `"},"cost":1}`...)
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
			if err != nil {
				return benchAnswer{}, err
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				return benchAnswer{}, err
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
				return benchAnswer{}, fmt.Errorf("%s: %s: %s", url, resp.Status, bytes.TrimSpace(msg))
			}
			reply.Allowed, reply.Local = false, false
			if err := json.NewDecoder(resp.Body).Decode(&reply); err != nil {
				return benchAnswer{}, fmt.Errorf("%s: %w", url, err)
			}
			return benchAnswer{allowed: reply.Allowed, local: reply.Local}, nil
		}
	}
	return newDecide, "the server at " + base, tr.CloseIdleConnections, nil
}

// redactURL hides a password in a Redis URL.
func redactURL(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		return u
	}
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return u
	}
	return scheme + "://***@" + rest[at+1:]
}

// benchResult is what a run measured: ops decisions (allowed of them
// admitted) and, apart, errors, calls that failed.
type benchResult struct {
	ops, allowed, local, errors int64
	elapsed                     time.Duration
	firstErr                    error
	hist                        latencies // the decisions' latencies
}

// drive runs the workload and draws a progress bar on stderr. Each
// goroutine calls until the run's duration has passed, as the bench module
// (bench/) drives its contenders: the calls carry ctx, without a deadline
// of the run's, so the run's end fails none of them. A call that fails is
// an error, never a decision; one that fails because ctx ended (the
// command was interrupted) is neither.
func drive(ctx context.Context, o benchOptions, newDecide func() benchDecide, stderr io.Writer) benchResult {
	var (
		firstErr atomic.Value
		wg       sync.WaitGroup
		hists    = make([]latencies, o.goroutines)
		counts   = make([]benchCounts, o.goroutines)
		deciders = make([]benchDecide, o.goroutines)
	)
	for g := range deciders {
		deciders[g] = newDecide()
	}
	start := time.Now()
	deadline := start.Add(o.duration)
	for g := range o.goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			decide, h, c := deciders[g], &hists[g], &counts[g]
			i := (g * 7919) % o.keys
			for {
				t0 := time.Now()
				if !t0.Before(deadline) {
					break
				}
				a, err := decide(ctx, i)
				switch {
				case err != nil && ctx.Err() != nil:
					return // interrupted: the run ends
				case err != nil:
					c.errors.Add(1)
					firstErr.CompareAndSwap(nil, errBox{err})
				default:
					h.add(time.Since(t0))
					c.ops.Add(1)
					if a.allowed {
						c.allowed.Add(1)
					}
					if a.local {
						c.local.Add(1)
					}
				}
				if i++; i == o.keys {
					i = 0
				}
			}
		}()
	}
	sum := func() (ops, allowed, local, errs int64) {
		for g := range counts {
			ops += counts[g].ops.Load()
			allowed += counts[g].allowed.Load()
			local += counts[g].local.Load()
			errs += counts[g].errors.Load()
		}
		return ops, allowed, local, errs
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	last, lastOps := start, int64(0)
	for running := true; running; {
		select {
		case <-done:
			running = false
		case now := <-tick.C:
			n, _, _, errs := sum()
			rate := float64(n-lastOps) / now.Sub(last).Seconds()
			last, lastOps = now, n
			drawProgress(stderr, float64(now.Sub(start))/float64(o.duration), n, rate, errs)
		}
	}
	fmt.Fprint(stderr, "\r\033[K")
	r := benchResult{elapsed: time.Since(start)}
	r.ops, r.allowed, r.local, r.errors = sum()
	if e, ok := firstErr.Load().(errBox); ok {
		r.firstErr = e.err
	}
	for g := range hists {
		r.hist.merge(&hists[g])
	}
	return r
}

// benchCounts are one goroutine's counts, on a cache line of their own so
// that the goroutines do not contend for them.
type benchCounts struct {
	ops, allowed, local, errors atomic.Int64
	_                           [32]byte
}

func drawProgress(w io.Writer, f float64, ops int64, rate float64, errs int64) {
	const width = 30
	f = min(max(f, 0), 1)
	n := int(f * width)
	fmt.Fprintf(w, "\r[%s%s] %3.0f%%  %d decisions  %.0f/s  %d errors", strings.Repeat("#", n), strings.Repeat(".", width-n), f*100, ops, rate, errs)
}

// print writes the run's figures to w, with the decisions answered from
// slices when local (a budgeted run, or one through a server).
func (r benchResult) print(w io.Writer, local bool) {
	secs := r.elapsed.Seconds()
	fmt.Fprintf(w, "%d decisions in %v: %.0f decisions/s, %.1f%% allowed, %d errors (not counted as decisions)\n",
		r.ops, r.elapsed.Round(time.Millisecond), float64(r.ops)/secs, 100*float64(r.allowed)/float64(max(r.ops, 1)), r.errors)
	if local {
		fmt.Fprintf(w, "%d decisions local (%.1f%%): answered from leased slices of budgeted rules\n",
			r.local, 100*float64(r.local)/float64(max(r.ops, 1)))
	}
	if r.firstErr != nil {
		fmt.Fprintf(w, "first error: %v\n", r.firstErr)
	}
	if r.hist.n == 0 {
		return
	}
	fmt.Fprintf(w, "latency: p50 %v  p90 %v  p99 %v  p99.9 %v  max %v\n",
		r.hist.quantile(0.5), r.hist.quantile(0.9), r.hist.quantile(0.99), r.hist.quantile(0.999), r.hist.max)
	fmt.Fprintln(w, "\nlatency histogram:")
	r.hist.draw(w)
}

// latencies counts durations in log-linear buckets: 8 per power of two of
// nanoseconds, so quantiles are within 12%.
type latencies struct {
	counts [64 * 8]int64
	n      int64
	max    time.Duration
}

func latencyBucket(d time.Duration) int {
	v := uint64(max(d, 1))
	e := bits.Len64(v) - 1
	if e < 3 {
		return int(v)
	}
	return e*8 + int(v>>(e-3))&7
}

// latencyUpper returns the upper bound of bucket b.
func latencyUpper(b int) time.Duration {
	e, m := b/8, b%8
	if e < 3 {
		return time.Duration(b + 1)
	}
	return time.Duration(uint64(8+m+1) << (e - 3))
}

func (h *latencies) add(d time.Duration) {
	h.counts[latencyBucket(d)]++
	h.n++
	h.max = max(h.max, d)
}

func (h *latencies) merge(o *latencies) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

func (h *latencies) quantile(q float64) time.Duration {
	target := int64(q * float64(h.n))
	var seen int64
	for i, c := range h.counts {
		if seen += c; seen > target {
			return min(latencyUpper(i), h.max).Round(time.Microsecond)
		}
	}
	return h.max
}

// draw prints the counts in 1-2-5 ranges from the fastest to the slowest
// decision, with a bar per range.
func (h *latencies) draw(w io.Writer) {
	bounds := []time.Duration{}
	for d := time.Microsecond; d <= time.Minute; d *= 10 {
		bounds = append(bounds, d, 2*d, 5*d)
	}
	counts := make([]int64, len(bounds)+1)
	for b, c := range h.counts {
		if c == 0 {
			continue
		}
		up := latencyUpper(b)
		i := 0
		for i < len(bounds) && up > bounds[i] {
			i++
		}
		counts[i] += c
	}
	first, last := -1, -1
	var most int64
	for i, c := range counts {
		if c > 0 {
			if first < 0 {
				first = i
			}
			last = i
			most = max(most, c)
		}
	}
	const width = 40
	for i := first; i <= last; i++ {
		label := "> " + bounds[len(bounds)-1].String()
		if i < len(bounds) {
			label = "≤ " + bounds[i].String()
		}
		bar := int((counts[i]*width + most - 1) / most)
		fmt.Fprintf(w, "  %9s  %-*s %6.2f%%  %d\n", label, width, strings.Repeat("█", bar), 100*float64(counts[i])/float64(h.n), counts[i])
	}
}

// errBox holds an error in an atomic.Value, which needs one concrete type.
type errBox struct{ err error }
