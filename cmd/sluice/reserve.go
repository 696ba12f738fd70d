package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/internal/edge"
	"github.com/sluicerate/sluice/internal/launch"
)

// reserveLine is one reservation of `sluice reserve`, as printed with --json.
type reserveLine struct {
	N       int    `json:"n"`
	OK      bool   `json:"ok"`
	DelayMS int64  `json:"delay_ms"`
	DelayUS int64  `json:"delay_us"`
	Slot    string `json:"slot"`
	ID      string `json:"id"`
	Queue   int64  `json:"queue"`
	Reason  string `json:"reason"`
}

func runReserve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("reserve", stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, `usage: sluice reserve --config FILE --schedule NAME --attr k=v [--n N] [--cost C] [--json] [--redis URL]
       sluice reserve --rate 4/s [--max-delay D] [--max-queue Q] [--schedule NAME] --attr k=v ...

Makes N reservations on a schedule back to back and prints each: whether it
was given a slot, how long it would wait, its ID and the queue length. With
--config the schedule comes from the file; without it, from --rate,
--max-delay and --max-queue, queued by every --attr given; --max-delay
defaults to 0, as a file's schedule without max_delay: only a reservation
that may go at once is given a slot, so give it to queue the others. The
store is Redis at --redis, else the file's store, else memory.
Exit status: 0 every reservation got a slot, 1 one was rejected, 2 usage.

flags:`)
		fs.PrintDefaults()
	}
	var attrs attrFlag
	file := fs.String("config", "", "the configuration `file` that defines the schedule")
	name := fs.String("schedule", "", "the schedule's `name`")
	fs.Var(&attrs, "attr", "an attribute `name=value`; repeat for several")
	n := fs.Int("n", 1, "how many reservations to make")
	cost := fs.Int64("cost", 1, "the cost of each reservation, in intervals")
	asJSON := fs.Bool("json", false, "print one JSON object per reservation")
	redisURL := fs.String("redis", "", "use Redis at this `URL` (redis://host:port/db)")
	rate := fs.String("rate", "", "without --config: the schedule's `rate`, such as 4/s or 100/1m")
	maxDelay := fs.Duration("max-delay", 0, "without --config: the longest wait accepted (0: none, only reservations that may go at once)")
	maxQueue := fs.Int64("max-queue", 0, "without --config: the longest the queue may be, in reservations waiting or in progress (0: no bound)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	fail := func(format string, a ...any) int { return usageError(stderr, "reserve", format, a...) }
	if *n < 1 {
		return fail("--n is %d; make at least 1 reservation", *n)
	}

	var (
		sched *sluice.Schedule
		cfg   *config.Config
	)
	switch {
	case *file != "":
		if *rate != "" {
			return fail("--rate defines a schedule without a file; use either --config or --rate")
		}
		if *name == "" {
			return fail("--schedule is required with --config")
		}
		var err error
		if cfg, err = config.Load(*file); err != nil {
			return fail("%v", err)
		}
		if sched = cfg.Schedule(*name); sched == nil {
			var names []string
			for _, s := range cfg.Schedules {
				names = append(names, s.Name)
			}
			return fail("%v: %q is not in %s (schedules: %s)", edge.ErrUnknownSchedule, *name, *file, strings.Join(names, ", "))
		}
	case *rate != "":
		r, err := sluice.ParseRate(*rate)
		if err != nil {
			return fail("--rate: %v", err)
		}
		sched = &sluice.Schedule{Name: *name, By: attrs.keys, Rate: r, MaxDelay: *maxDelay, MaxQueue: *maxQueue}
		if sched.Name == "" {
			sched.Name = "cli"
		}
		if err := sched.Validate(); err != nil {
			return fail("%v", err)
		}
	default:
		return fail("give the schedule with --config FILE --schedule NAME, or with --rate")
	}

	store, err := launch.Open(cfg, *redisURL)
	if err != nil {
		return fail("%v", err)
	}
	defer store.Close()
	where := store.Where
	// The Limiter goes straight to the opened store, which keeps the
	// schedules (store.Scheduler). A command line is not a request path: a
	// store call has a second unless the file says otherwise.
	lc := sluice.Config{Timeout: time.Second}
	if cfg != nil && cfg.Store != nil {
		lc.OnError = cfg.Store.OnError
		if cfg.Store.Timeout > 0 {
			lc.Timeout = cfg.Store.Timeout
		}
	}
	lim := sluice.NewLimiter(store.Store, lc)

	if !*asJSON {
		fmt.Fprintf(stdout, "schedule %q on %s: %v (one every %v), max delay %v", sched.Name, where, sched.Rate, sched.Interval(), sched.MaxDelay)
		if sched.MaxQueue > 0 {
			fmt.Fprintf(stdout, ", max queue %d", sched.MaxQueue)
		}
		fmt.Fprintln(stdout)
	}
	enc := json.NewEncoder(stdout)
	code := exitOK
	for i := range *n {
		r, err := lim.Reserve(ctx, sched, attrs.values, *cost)
		if err != nil {
			return fail("%v", err)
		}
		line := reserveLine{N: i + 1, OK: r.OK, DelayMS: r.Delay.Milliseconds(), DelayUS: r.Delay.Microseconds(),
			Slot: r.Slot.UTC().Format(time.RFC3339Nano), ID: r.ID, Queue: r.Queue, Reason: string(r.Reason)}
		if !r.OK {
			code = exitDenied
		}
		if *asJSON {
			if err := enc.Encode(line); err != nil {
				return exitUsage
			}
			continue
		}
		if r.OK {
			fmt.Fprintf(stdout, "#%-3d ok        leaves in %-10v queue %-3d id %s\n", line.N, r.Delay, r.Queue, r.ID)
		} else {
			fmt.Fprintf(stdout, "#%-3d rejected  (%s) it would wait %v, queue %d (max delay %v", line.N, r.Reason, r.Delay, r.Queue, sched.MaxDelay)
			if sched.MaxQueue > 0 {
				fmt.Fprintf(stdout, ", max queue %d", sched.MaxQueue)
			}
			fmt.Fprintln(stdout, ")")
		}
	}
	return code
}
