package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/sluicerate/sluice/internal/launch"
	"github.com/sluicerate/sluice/internal/oneshot"
)

func runReserve(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("reserve", stderr)
	fs.Usage = func() { fmt.Fprintln(stderr, help("reserve")); fs.PrintDefaults() }
	var attrs attrFlag
	var spec oneshot.ScheduleSpec
	fs.StringVar(&spec.File, "config", "", "the configuration `file` that defines the schedule")
	fs.StringVar(&spec.Name, "schedule", "", "the schedule's `name`")
	fs.Var(&attrs, "attr", "an attribute `name=value`; repeat for several")
	n := fs.Int("n", 1, "how many reservations to make")
	cost := fs.Int64("cost", 1, "the cost of each reservation, in intervals")
	asJSON := fs.Bool("json", false, "print one JSON object per reservation")
	redisURL := fs.String("redis", "", "use Redis at this `URL` (redis://host:port/db)")
	fs.StringVar(&spec.Rate, "rate", "", "without --config: the schedule's `rate`, such as 4/s or 100/1m")
	fs.DurationVar(&spec.MaxDelay, "max-delay", 0, "without --config: the longest wait accepted (0: none, only reservations that may go at once)")
	fs.Int64Var(&spec.MaxQueue, "max-queue", 0, "without --config: the longest the queue may be, in reservations waiting or in progress (0: no bound)")
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if *n < 1 {
		return usageError(stderr, "reserve", "--n is %d; make at least 1 reservation", *n)
	}
	spec.By = attrs.keys
	sched, cfg, err := spec.Schedule()
	if err != nil {
		return usageError(stderr, "reserve", "%v", err)
	}
	store, err := launch.Open(cfg, *redisURL)
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
