package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/internal/oneshot"
)

// scheduleFlags are the flags that give sluice reserve its schedule.
type scheduleFlags struct {
	file, name, rate *string
	maxDelay         *time.Duration
	maxQueue         *int64
}

func runReserve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("reserve", stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, help("reserve")); fs.PrintDefaults() }
	var attrs attrFlag
	sf := scheduleFlags{file: fs.String("config", "", "the configuration `file` that defines the schedule"),
		name: fs.String("schedule", "", "the schedule's `name`")}
	fs.Var(&attrs, "attr", "an attribute `name=value`; repeat for several")
	n := fs.Int("n", 1, "how many reservations to make")
	cost := fs.Int64("cost", 1, "the cost of each reservation, in intervals")
	asJSON := fs.Bool("json", false, "print one JSON object per reservation")
	redisURL := fs.String("redis", "", "use Redis at this `URL` (redis://host:port/db)")
	sf.rate = fs.String("rate", "", "without --config: the schedule's `rate`, such as 4/s or 100/1m")
	sf.maxDelay = fs.Duration("max-delay", 0, "without --config: the longest wait accepted (0: none, only reservations that may go at once)")
	sf.maxQueue = fs.Int64("max-queue", 0, "without --config: the longest the queue may be, in reservations waiting or in progress (0: no bound)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *n < 1 {
		return usageError(stderr, "reserve", "--n is %d; make at least 1 reservation", *n)
	}
	sched, cfg, err := sf.schedule(attrs.keys)
	if err != nil {
		return usageError(stderr, "reserve", "%v", err)
	}
	store, err := openConfiguredStore(cfg, *redisURL)
	if err != nil {
		return usageError(stderr, "reserve", "%v", err)
	}
	defer store.Close()
	enc, code := json.NewEncoder(stdout), exitOK
	emit := func(l oneshot.Line) error {
		if !l.OK {
			code = exitDenied
		}
		if *asJSON {
			return enc.Encode(l)
		}
		fmt.Fprintln(stdout, l)
		return nil
	}
	if !*asJSON {
		fmt.Fprintln(stdout, oneshot.ScheduleText(sched, store.Where))
	}
	if err := oneshot.Reserve(ctx, store.Store, cfg, sched, attrs.values, *cost, *n, emit); err != nil {
		return usageError(stderr, "reserve", "%v", err)
	}
	return code
}

// schedule returns the schedule the flags give, from the file (and the
// file) or from --rate, queued by attrs.
func (f *scheduleFlags) schedule(attrs []string) (*sluice.Schedule, *config.Config, error) {
	switch {
	case *f.file != "" && *f.rate != "":
		return nil, nil, errors.New("--rate defines a schedule without a file; use either --config or --rate")
	case *f.file != "" && *f.name == "":
		return nil, nil, errors.New("--schedule is required with --config")
	case *f.file != "":
		cfg, err := config.Load(*f.file)
		if err != nil {
			return nil, nil, err
		}
		sched, err := cfg.FindSchedule(*f.name)
		return sched, cfg, err
	case *f.rate != "":
		r, err := sluice.ParseRate(*f.rate)
		if err != nil {
			return nil, nil, fmt.Errorf("--rate: %v", err)
		}
		sched := &sluice.Schedule{Name: cmp.Or(*f.name, "cli"), By: attrs, Rate: r, MaxDelay: *f.maxDelay, MaxQueue: *f.maxQueue}
		return sched, nil, sched.Validate()
	}
	return nil, nil, errors.New("give the schedule with --config FILE --schedule NAME, or with --rate")
}
