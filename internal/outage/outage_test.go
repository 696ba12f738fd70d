package outage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/storetest"
)

var errTimeout = errors.New("redisstore: context deadline exceeded")

// harness is a Reporter on a manual clock, its circuit set by the test and
// its lines kept without their time.
type harness struct {
	t       *testing.T
	clock   *storetest.Clock
	circuit string
	logs    bytes.Buffer
	r       *Reporter
	read    int // lines already returned by lines
}

func newHarness(t *testing.T, interval time.Duration) *harness {
	h := &harness{t: t, clock: storetest.NewClock(storetest.T0), circuit: "closed"}
	log := slog.New(slog.NewTextHandler(&h.logs, &slog.HandlerOptions{ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey && len(groups) == 0 {
			return slog.Attr{}
		}
		return a
	}}))
	h.r = New(Config{Logger: log, Interval: interval, Now: h.clock.Now, Circuit: func() string { return h.circuit }})
	return h
}

// fail reports a decision of policy p that failed with err.
func (h *harness) fail(p string, err error) {
	h.r.Failed(context.Background(), Failure{Msg: "store failed; decided by on_error", Tag: slog.String("api", "decide"),
		Kind: Policy, Name: p, Err: err, Attrs: []slog.Attr{slog.Bool("allowed", false)}})
}

func (h *harness) answered() { h.r.Answered(context.Background()) }

// expect checks the lines logged since the last call.
func (h *harness) expect(step string, want ...string) {
	h.t.Helper()
	all := strings.Split(strings.TrimSuffix(h.logs.String(), "\n"), "\n")
	if h.logs.Len() == 0 {
		all = nil
	}
	got := all[h.read:]
	h.read = len(all)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		h.t.Errorf("%s: logged\n%s\nwant\n%s", step, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

const (
	firstLine = `level=WARN msg="store failed; decided by on_error" api=decide policy=notify allowed=false err="redisstore: context deadline exceeded" summary_every=10s`
	openErr   = `"sluice: circuit open: the store failed repeatedly and is not called until the cool-down ends"`
)

// TestStall is Redis frozen for 3 s under load, with the breaker: the first
// failure, the circuit opening, its first probe, and the end.
func TestStall(t *testing.T) {
	h := newHarness(t, 0)
	for i := range 5 {
		h.clock.Advance(50 * time.Millisecond)
		if i == 4 {
			h.circuit = "open" // the fifth failure opens it
		}
		h.fail("notify", errTimeout)
	}
	h.expect("5 timeouts", firstLine,
		`level=WARN msg="store circuit breaker open: the store is not called until a probe succeeds" outage=200ms failed=5 last_err="redisstore: context deadline exceeded"`)
	// Three cool-downs of 1 s: answered by the open circuit, one probe
	// each, the first two failing.
	for cd := range 3 {
		for range 1000 {
			h.clock.Advance(time.Millisecond)
			h.fail("notify", sluice.ErrCircuitOpen)
		}
		h.circuit = "half_open"
		for range 40 {
			h.clock.Advance(time.Millisecond)
			h.fail("notify", sluice.ErrCircuitOpen)
		}
		if cd < 2 {
			h.circuit = "open"
			h.clock.Advance(10 * time.Millisecond)
			h.fail("notify", errTimeout)
		}
	}
	h.expect("3 cool-downs", `level=INFO msg="store circuit breaker half-open: one call probes the store" outage=1.201s`)
	h.circuit = "closed"
	h.clock.Advance(time.Millisecond)
	h.answered()
	h.answered()
	h.expect("the probe succeeds",
		`level=INFO msg="store answers again" outage=3.341s failed=3127 policies=[notify] last_err="redisstore: context deadline exceeded" circuit=closed`)
	// A call decided by the open circuit before the probe closed it is not
	// a new outage.
	h.fail("notify", sluice.ErrCircuitOpen)
	h.answered()
	h.expect("a late answer of the open circuit")
}

// TestSummaries is an outage longer than the interval: one summary per
// interval, at the first failure after it.
func TestSummaries(t *testing.T) {
	h := newHarness(t, 10*time.Second)
	h.fail("notify", errTimeout)
	h.expect("first", firstLine)
	for i := range 249 { // every 100 ms for 24.9 s
		h.clock.Advance(100 * time.Millisecond)
		p := "notify"
		if i%2 == 1 {
			p = "api"
		}
		err := errTimeout
		if i == 199 { // the last of the second period
			err = errors.New("redisstore: connection refused")
		}
		h.fail(p, err)
	}
	h.expect("24.9 s of failures",
		`level=WARN msg="store still failing" failed=101 period=10s policies="[notify api]" first_err="redisstore: context deadline exceeded" last_err="redisstore: context deadline exceeded" outage=10s total=101`,
		`level=WARN msg="store still failing" failed=100 period=10s policies="[notify api]" first_err="redisstore: context deadline exceeded" last_err="redisstore: connection refused" outage=20s total=201`)
	h.clock.Advance(50 * time.Millisecond)
	h.answered()
	h.expect("answered",
		`level=INFO msg="store answers again" outage=24.95s failed=250 policies="[notify api]" last_err="redisstore: context deadline exceeded"`)
	if t.Failed() {
		return
	}
	// A new outage after the interval is announced again.
	h.clock.Advance(10 * time.Second)
	h.fail("notify", errTimeout)
	h.expect("a new outage", firstLine)
}

// TestSummaryErrors: a period's first and last errors are the store's; the
// answers of the open circuit are counted apart.
func TestSummaryErrors(t *testing.T) {
	h := newHarness(t, time.Second)
	h.fail("notify", errTimeout)
	h.circuit = "open"
	h.clock.Advance(100 * time.Millisecond)
	h.fail("notify", sluice.ErrCircuitOpen)
	h.clock.Advance(400 * time.Millisecond)
	h.fail("notify", errors.New("redisstore: connection refused"))
	h.clock.Advance(600 * time.Millisecond)
	h.fail("notify", sluice.ErrCircuitOpen)
	h.clock.Advance(1100 * time.Millisecond)
	h.fail("notify", sluice.ErrCircuitOpen)
	h.expect("two periods", strings.Replace(firstLine, "summary_every=10s", "summary_every=1s", 1),
		`level=WARN msg="store circuit breaker open: the store is not called until a probe succeeds" outage=100ms failed=2 last_err="redisstore: context deadline exceeded"`,
		`level=WARN msg="store still failing" failed=4 period=1.1s policies=[notify] first_err="redisstore: context deadline exceeded" last_err="redisstore: connection refused" by_open_circuit=2 circuit=open outage=1.1s total=4`,
		`level=WARN msg="store still failing" failed=1 period=1.1s policies=[notify] by_open_circuit=1 circuit=open outage=2.2s total=5`)
}

// TestKinds: the first failure of each kind is logged at once; summaries
// list each kind's names, eight at most.
func TestKinds(t *testing.T) {
	h := newHarness(t, time.Second)
	h.fail("notify", errTimeout)
	ctx := context.Background()
	h.r.Failed(ctx, Failure{Msg: "store failed; reservation decided by on_error", Tag: slog.String("api", "reserve"),
		Kind: Schedule, Name: "carrier", Err: errTimeout, Attrs: []slog.Attr{slog.Bool("ok", false)}})
	h.r.Failed(ctx, Failure{Msg: "cancelling a reservation", Kind: Schedule, Name: "sms", Err: errTimeout})
	h.r.Failed(ctx, Failure{Msg: "store failed; decided by on_error", Tag: slog.String("api", "envoy"), Kind: Domain, Name: "edge", Err: errTimeout})
	h.r.Failed(ctx, Failure{Kind: Domain, Name: "mail", Err: errTimeout}) // no message: no line
	h.expect("one of each kind", strings.Replace(firstLine, "summary_every=10s", "summary_every=1s", 1),
		`level=WARN msg="store failed; reservation decided by on_error" api=reserve schedule=carrier ok=false err="redisstore: context deadline exceeded" summary_every=1s`,
		`level=WARN msg="store failed; decided by on_error" api=envoy domain=edge err="redisstore: context deadline exceeded" summary_every=1s`)
	for i := range 10 {
		h.fail(fmt.Sprint("p", i), errTimeout)
	}
	h.clock.Advance(time.Second)
	h.fail("notify", errTimeout)
	h.expect("summary",
		`level=WARN msg="store still failing" failed=16 period=1s policies="[notify p0 p1 p2 p3 p4 p5 p6 …]" schedules="[carrier sms]" domains="[edge mail]" first_err="redisstore: context deadline exceeded" last_err="redisstore: context deadline exceeded" outage=1s total=16`)
}

// TestFlapping is a store that fails and answers by turns: one end is
// logged per interval, each counting the failures since the last.
func TestFlapping(t *testing.T) {
	h := newHarness(t, 10*time.Second)
	h.fail("notify", errTimeout) // 0 s
	h.clock.Advance(time.Second)
	h.answered() // 1 s: logged
	h.expect("a first outage", firstLine,
		`level=INFO msg="store answers again" outage=1s failed=1 policies=[notify] last_err="redisstore: context deadline exceeded"`)
	// Failures and answers by turns, every 500 ms, for 10 s.
	for range 10 {
		h.clock.Advance(500 * time.Millisecond)
		h.fail("notify", errTimeout)
		h.clock.Advance(500 * time.Millisecond)
		h.answered()
	}
	// 11 s: 10 s after the last end line; these failures began at 1.5 s.
	h.expect("flapping for 10 s", `level=INFO msg="store answers again" outage=9.5s failed=10 policies=[notify] last_err="redisstore: context deadline exceeded"`)
	// A failure, then answers within the interval: the end waits for it.
	h.clock.Advance(2 * time.Second)
	h.fail("notify", errTimeout) // 13 s
	h.clock.Advance(time.Second)
	h.answered() // 14 s
	h.clock.Advance(6 * time.Second)
	h.answered() // 20 s
	h.expect("within the interval")
	h.clock.Advance(time.Second)
	h.answered() // 21 s
	h.answered()
	h.expect("after it", `level=INFO msg="store answers again" outage=1s failed=1 policies=[notify] last_err="redisstore: context deadline exceeded" answering_for=7s`)
}

// TestFlappingSummary: failures within the interval of the last end are
// summarized when it has passed, and the next answer ends them.
func TestFlappingSummary(t *testing.T) {
	h := newHarness(t, 10*time.Second)
	h.fail("notify", errTimeout)
	h.answered()
	h.expect("first", firstLine, `level=INFO msg="store answers again" outage=0s failed=1 policies=[notify] last_err="redisstore: context deadline exceeded"`)
	for range 30 { // every second for 30 s, each failure answered at once
		h.clock.Advance(time.Second)
		h.fail("api", errTimeout)
		h.answered()
	}
	summary := `level=WARN msg="store still failing" failed=10 period=10s policies=[api] first_err="redisstore: context deadline exceeded" last_err="redisstore: context deadline exceeded" outage=9s total=10`
	end := `level=INFO msg="store answers again" outage=9s failed=10 policies=[api] last_err="redisstore: context deadline exceeded"`
	h.expect("30 s", summary, end, summary, end, summary, end)
}

// TestBlipThenStall: a failure answered at once, then, within the
// interval, a stall that opens the circuit: the stall's end is logged at
// once, since the circuit's opening was.
func TestBlipThenStall(t *testing.T) {
	h := newHarness(t, 10*time.Second)
	h.fail("notify", errTimeout)
	h.clock.Advance(2 * time.Millisecond)
	h.answered()
	h.expect("a blip", firstLine,
		`level=INFO msg="store answers again" outage=2ms failed=1 policies=[notify] last_err="redisstore: context deadline exceeded"`)
	h.clock.Advance(1280 * time.Millisecond)
	for i := range 5 {
		h.clock.Advance(50 * time.Millisecond)
		if i == 4 {
			h.circuit = "open"
		}
		h.fail("api", errTimeout)
	}
	for range 3000 {
		h.clock.Advance(time.Millisecond)
		h.fail("api", sluice.ErrCircuitOpen)
	}
	h.circuit = "closed"
	h.answered()
	h.expect("a stall",
		`level=WARN msg="store circuit breaker open: the store is not called until a probe succeeds" outage=200ms failed=5 last_err="redisstore: context deadline exceeded"`,
		`level=INFO msg="store answers again" outage=3.2s failed=3005 policies=[api] last_err="redisstore: context deadline exceeded" circuit=closed`)
	// A failure after a deferred end an interval later: the end, then a new
	// episode.
	h.clock.Advance(time.Second)
	h.fail("api", errTimeout)
	h.answered() // deferred: nothing logged since the last end
	h.clock.Advance(10 * time.Second)
	h.fail("api", errTimeout)
	h.expect("a new episode",
		`level=INFO msg="store answers again" outage=0s failed=1 policies=[api] last_err="redisstore: context deadline exceeded" circuit=closed answering_for=10s`,
		strings.Replace(firstLine, "policy=notify", "policy=api", 1))
}

// TestOpenCircuitStarts: an answer of the open circuit long after the
// store answered is an outage (its failures were not reported).
func TestOpenCircuitStarts(t *testing.T) {
	h := newHarness(t, 10*time.Second)
	h.answered()
	h.expect("answered, no outage")
	h.circuit = "open"
	h.fail("notify", sluice.ErrCircuitOpen)
	h.expect("open circuit",
		`level=WARN msg="store failed; decided by on_error" api=decide policy=notify allowed=false err=`+openErr+` summary_every=10s`,
		`level=WARN msg="store circuit breaker open: the store is not called until a probe succeeds" outage=0s failed=1`)
	h.circuit = "closed"
	h.answered()
	h.expect("closed", `level=INFO msg="store answers again" outage=0s failed=1 policies=[notify] circuit=closed`)
}

func TestDefaults(t *testing.T) {
	r := New(Config{})
	if got := r.Interval(); got != DefaultInterval {
		t.Errorf("interval %v, want %v", got, DefaultInterval)
	}
	r.Failed(context.Background(), Failure{Msg: "m", Err: errTimeout}) // discarded
	r.Answered(context.Background())
}

// TestPrefix: a library's lines carry its name.
func TestPrefix(t *testing.T) {
	var logs bytes.Buffer
	r := New(Config{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Prefix: "httplimit: "})
	r.Failed(context.Background(), Failure{Msg: "httplimit: rate limiter store failed; failure policy applied", Err: errTimeout})
	r.Answered(context.Background())
	if got := logs.String(); !strings.Contains(got, `msg="httplimit: rate limiter store failed; failure policy applied"`) ||
		!strings.Contains(got, `msg="httplimit: store answers again"`) {
		t.Errorf("logged %s", got)
	}
}

// TestConcurrent: calls from many goroutines count every failure once.
func TestConcurrent(t *testing.T) {
	var logs bytes.Buffer
	var mu sync.Mutex
	r := New(Config{Logger: slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &mu}, nil))})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 1000 {
				r.Failed(context.Background(), Failure{Msg: "failed", Kind: Policy, Name: fmt.Sprint("p", g), Err: errTimeout})
				if i%100 == 99 && g == 0 {
					r.Answered(context.Background())
				}
			}
		})
	}
	wg.Wait()
	r.mu.Lock()
	total := r.total
	r.mu.Unlock()
	if total == 0 || total > 8000 {
		t.Errorf("total %d", total)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(logs.String(), "\n"); n > 3 {
		t.Errorf("%d lines for 8000 failures in a moment:\n%s", n, logs.String())
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// BenchmarkAnswered is the cost a healthy store's calls pay.
func BenchmarkAnswered(b *testing.B) {
	r := New(Config{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		r.Answered(ctx)
	}
}

// BenchmarkFailed is the cost of a failed call during an outage, once it
// has been announced.
func BenchmarkFailed(b *testing.B) {
	r := New(Config{Circuit: func() string { return "open" }})
	ctx := context.Background()
	f := Failure{Msg: "failed", Kind: Policy, Name: "notify", Err: sluice.ErrCircuitOpen}
	r.Failed(ctx, f)
	b.ReportAllocs()
	for b.Loop() {
		r.Failed(ctx, f)
	}
}
