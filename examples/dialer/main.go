// Command dialer places outbound calls to downstream carriers at the rate
// each carrier accepts, from any number of worker goroutines in any number of
// processes: every call reserves a slot on its carrier's schedule, waits for
// it, and leaves. The schedules live in Redis with -redis, so every process
// that points at the same server shares them; calls above a carrier's rate
// are delayed, and a call that would wait longer than -max-delay is offered
// to the other carrier instead.
//
//	go run ./examples/dialer -carriers 45=4/s,46=10/s -workers 4 -for 5s
//	go run ./examples/dialer -redis redis://127.0.0.1:6390/0 -name p1 &
//	go run ./examples/dialer -redis redis://127.0.0.1:6390/0 -name p2
//
// With -in-progress N, a carrier also takes at most N calls in progress at
// once, across every process: a call holds a lease of its carrier's
// concurrency rule from before its slot until it hangs up, -call-length
// after it left; a carrier whose N calls are up is skipped for the next
// one. A process that dies frees its calls' slots when their leases
// expire (-lease):
//
//	go run ./examples/dialer -carriers 45=4/s -in-progress 30 -call-length 10s -workers 40 -for 20s
//
// Each call that leaves prints one line: when it left, its carrier, the
// process and worker that placed it, and how long it waited; with -json,
// one object per call.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/store"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// carrier is one downstream carrier and the schedule its calls go through:
// one queue per carrier, at the carrier's own rate; and, with a limit of
// calls in progress, the policy whose lease a call holds while it is up
// (nil: none).
type carrier struct {
	id    string
	sched *sluice.Schedule
	calls *sluice.Policy
}

// call is one call that left, as printed with -json.
type call struct {
	Process string `json:"process"`
	Worker  int    `json:"worker"`
	Carrier string `json:"carrier"`
	// Slot is the slot the schedule gave, in µs since the epoch on the
	// store's clock; Sent is when the call left, on this process's clock.
	Slot     int64 `json:"slot_us"`
	Sent     int64 `json:"sent_us"`
	WaitedUS int64 `json:"waited_us"`
	// InProgress is the carrier's calls in progress, this one included,
	// when it left (with -in-progress).
	InProgress int64 `json:"in_progress,omitempty"`

	start time.Time // the run's start, set by the test
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dialer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	carriers := fs.String("carriers", "45=4/s,46=10/s", "the carriers and their rates, as `id=rate,...`")
	workers := fs.Int("workers", 4, "worker goroutines placing calls")
	length := fs.Duration("for", 5*time.Second, "how long to place calls")
	startAt := fs.Int64("start", 0, "when to start, in `µs` since the epoch (default: now); lets processes start together")
	maxDelay := fs.Duration("max-delay", 2*time.Second, "the longest a call may wait for its carrier")
	redisURL := fs.String("redis", "", "share the schedules in Redis at this `URL` (redis://host:port/db); default: in memory")
	prefix := fs.String("prefix", "dialer", "the Redis key prefix")
	name := fs.String("name", fmt.Sprintf("pid%d", os.Getpid()), "this process's name in the output")
	asJSON := fs.Bool("json", false, "print one JSON object per call")
	timeout := fs.Duration("timeout", time.Second, "the deadline of each store call")
	inProgress := fs.Int64("in-progress", 0, "the most calls in progress at once per carrier (0: no limit)")
	callLength := fs.Duration("call-length", 0, "how long a call stays up after it left, holding its slot of -in-progress")
	lease := fs.Duration("lease", 10*time.Minute, "how long a call's slot of -in-progress is held if its process dies")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	cs, err := parseCarriers(*carriers, *maxDelay, *inProgress, *lease)
	if err != nil {
		fmt.Fprintln(stderr, "dialer:", err)
		return 2
	}
	store, err := openStore(*redisURL, *prefix)
	if err != nil {
		fmt.Fprintln(stderr, "dialer:", err)
		return 2
	}
	defer store.Close()
	// A call may wait seconds for its slot: a store call may take longer
	// than the default deadline, made for request paths, before it counts
	// as a failure.
	lim := sluice.NewLimiter(store, sluice.Config{Timeout: *timeout})
	if err := checkStore(ctx, lim, *name); err != nil {
		fmt.Fprintln(stderr, "dialer: the store does not answer:", err)
		return 1
	}

	start := time.Now()
	if *startAt != 0 {
		start = time.UnixMicro(*startAt)
	}
	ctx, cancel := context.WithDeadline(ctx, start.Add(*length))
	defer cancel()
	select {
	case <-time.After(time.Until(start)):
	case <-ctx.Done():
		return 0
	}

	var (
		mu  sync.Mutex
		enc = json.NewEncoder(stdout)
		wg  sync.WaitGroup
	)
	report := func(c call) {
		mu.Lock()
		defer mu.Unlock()
		if *asJSON {
			_ = enc.Encode(c)
			return
		}
		up := ""
		if c.InProgress > 0 {
			up = fmt.Sprintf(", %d in progress", c.InProgress)
		}
		fmt.Fprintf(stdout, "%s  call to carrier %-4s left  (%s worker %d, waited %v%s)\n",
			time.UnixMicro(c.Sent).Format("15:04:05.000000"), c.Carrier, c.Process, c.Worker,
			time.Duration(c.WaitedUS)*time.Microsecond, up)
	}
	logf := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(stderr, "dialer: "+format+"\n", args...)
	}
	for w := range *workers {
		wg.Go(func() { work(ctx, lim, cs, *name, w, *callLength, report, logf) })
	}
	wg.Wait()
	return 0
}

// work places calls until ctx ends. Worker w starts with carrier w and goes
// round the carriers; a call its carrier rejects (the wait would be longer
// than MaxDelay) is offered to the next one, and when every carrier rejects
// it the worker waits until the first one could take it. A store failure is
// logged, and the call tried again an interval later. With a limit of calls
// in progress, a call first takes its lease (a carrier whose calls are all
// up is skipped like a full one), and holds it until callLength after it
// left.
func work(ctx context.Context, lim *sluice.Limiter, cs []carrier, process string, w int, callLength time.Duration, report func(call), logf func(string, ...any)) {
	next := w % len(cs)
	for {
		var (
			wait = time.Duration(-1)
			done = 0
		)
		for try := range cs {
			c := cs[(next+try)%len(cs)]
			asked := time.Now()
			lease, up, err := takeLine(ctx, lim, c)
			switch {
			case err != nil && ctx.Err() != nil:
				return
			case err != nil:
				logf("worker %d: %v; trying again in %v", w, err, c.sched.Interval())
				wait = shorter(wait, c.sched.Interval())
				continue
			case lease == nil:
				// Every line of the carrier is busy: try the next one, and
				// this one again an interval later.
				wait = shorter(wait, c.sched.Interval())
				continue
			}
			r, err := lim.Wait(ctx, c.sched, nil, 1)
			if err != nil {
				_, _ = lease.Release(context.WithoutCancel(ctx)) // a release that fails expires
			}
			switch {
			case err == nil:
				sent := time.Now()
				report(call{Process: process, Worker: w, Carrier: c.id, Slot: r.Slot.UnixMicro(),
					Sent: sent.UnixMicro(), WaitedUS: sent.Sub(asked).Microseconds(), InProgress: up})
				hangUp(ctx, lease, callLength)
				next = (next + try + 1) % len(cs)
				wait = 0
			case errors.Is(err, sluice.ErrRejected):
				// Full: try the next carrier.
				if d := r.Delay - c.sched.MaxDelay; wait < 0 || d < wait {
					wait = d
				}
				continue
			case errors.Is(err, sluice.ErrDeadlineBeforeSlot):
				done++
				continue
			case ctx.Err() != nil:
				return
			default:
				// The store failed: the call was not placed. A slot the
				// store may have reserved all the same is left unused.
				logf("worker %d: %v; trying again in %v", w, err, c.sched.Interval())
				if wait < 0 || c.sched.Interval() < wait {
					wait = c.sched.Interval()
				}
				continue
			}
			break
		}
		if done == len(cs) {
			return // no carrier has a slot before the end
		}
		if wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return
			}
		}
	}
}

// takeLine takes a lease of c's calls in progress and returns it with the
// calls in progress with it, or a nil lease when they are all up. Without
// a limit it returns a lease that holds nothing.
func takeLine(ctx context.Context, lim *sluice.Limiter, c carrier) (*sluice.Lease, int64, error) {
	if c.calls == nil {
		return &sluice.Lease{}, 0, nil
	}
	lease, d, err := lim.Acquire(ctx, c.calls, nil, 1)
	if err != nil || !d.Allowed {
		return nil, 0, err
	}
	return lease, d.Limits()[0].Used, nil
}

// hangUp keeps the call up for length, or until ctx ends, then releases
// its lease.
func hangUp(ctx context.Context, lease *sluice.Lease, length time.Duration) {
	if length > 0 {
		select {
		case <-time.After(length):
		case <-ctx.Done():
		}
	}
	_, _ = lease.Release(context.WithoutCancel(ctx)) // a release that fails expires
}

// shorter returns the shorter of the wait so far (-1: none yet) and d.
func shorter(wait, d time.Duration) time.Duration {
	if wait < 0 || d < wait {
		return d
	}
	return wait
}

// checkStore makes and cancels a reservation on a schedule of this process
// alone, so that a store that does not answer is reported before any call
// is placed (and Redis has the scripts loaded when calls start).
func checkStore(ctx context.Context, lim *sluice.Limiter, process string) error {
	check := &sluice.Schedule{Name: "dialer-check", By: []string{"process"}, Rate: sluice.Rate{Events: 1, Per: time.Millisecond}}
	attrs := map[string]string{"process": process}
	r, err := lim.Reserve(ctx, check, attrs, 1)
	if err != nil {
		return err
	}
	_, err = lim.Cancel(ctx, check, attrs, r.ID)
	return err
}

// parseCarriers parses "45=4/s,46=10/s"; with inProgress above 0, each
// carrier takes that many calls in progress at once, a call's slot held at
// most lease.
func parseCarriers(s string, maxDelay time.Duration, inProgress int64, lease time.Duration) ([]carrier, error) {
	var cs []carrier
	for part := range strings.SplitSeq(s, ",") {
		id, rate, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || id == "" {
			return nil, fmt.Errorf("carrier %q is not ID=RATE, as in 45=4/s", part)
		}
		r, err := sluice.ParseRate(rate)
		if err != nil {
			return nil, fmt.Errorf("carrier %s: %w", id, err)
		}
		sched := &sluice.Schedule{Name: "carrier-" + id, Rate: r, MaxDelay: maxDelay}
		if err := sched.Validate(); err != nil {
			return nil, err
		}
		c := carrier{id: id, sched: sched}
		if inProgress > 0 {
			c.calls = &sluice.Policy{Name: "calls-" + id, Rules: []sluice.Rule{
				{Name: "in-progress", Concurrency: inProgress, Lease: lease},
			}}
			if err := c.calls.Validate(); err != nil {
				return nil, fmt.Errorf("carrier %s: %w", id, err)
			}
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// openStore opens Redis at url, or the in-memory store when url is empty.
func openStore(url, prefix string) (store.Store, error) {
	if url == "" {
		return memstore.New(memstore.Config{}), nil
	}
	opt, err := rueidis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("-redis %q: %w", url, err)
	}
	return redisstore.New(redisstore.Config{Addrs: opt.InitAddress, Username: opt.Username,
		Password: opt.Password, DB: opt.SelectDB, Prefix: prefix})
}
