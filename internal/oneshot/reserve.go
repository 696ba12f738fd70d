package oneshot

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/store"
)

// Line is one reservation of `sluice reserve`, as printed with --json.
type Line struct {
	N       int    `json:"n"`
	OK      bool   `json:"ok"`
	DelayMS int64  `json:"delay_ms"`
	DelayUS int64  `json:"delay_us"`
	Slot    string `json:"slot"`
	ID      string `json:"id"`
	Queue   int64  `json:"queue"`
	Reason  string `json:"reason"`

	delay time.Duration
	sched *sluice.Schedule
}

// Reserve makes n reservations of cost on sched back to back, on st, and
// calls each with every one's Line; it stops at the first error. cfg
// (nil: none) is the file sched is from: its store's on_error and timeout
// apply. The Limiter goes straight to st, which keeps the schedules
// (store.Scheduler). A command line is not a request path: a store call
// has a second unless the file says otherwise.
func Reserve(ctx context.Context, st store.Store, cfg *config.Config, sched *sluice.Schedule, attrs map[string]string, cost int64, n int, each func(Line) error) error {
	lc := sluice.Config{Timeout: time.Second}
	if cfg != nil && cfg.Store != nil {
		lc.OnError = cfg.Store.OnError
		if cfg.Store.Timeout > 0 {
			lc.Timeout = cfg.Store.Timeout
		}
	}
	lim := sluice.NewLimiter(st, lc)
	for i := range n {
		r, err := lim.Reserve(ctx, sched, attrs, cost)
		if err != nil {
			return err
		}
		line := Line{N: i + 1, OK: r.OK, DelayMS: r.Delay.Milliseconds(), DelayUS: r.Delay.Microseconds(),
			Slot: r.Slot.UTC().Format(time.RFC3339Nano), ID: r.ID, Queue: r.Queue, Reason: string(r.Reason), delay: r.Delay, sched: sched}
		if err := each(line); err != nil {
			return err
		}
	}
	return nil
}

// ScheduleText is the line the text output starts with: sched on the
// store at where.
func ScheduleText(sched *sluice.Schedule, where string) string {
	return fmt.Sprintf("schedule %q on %s: %v (one every %v), max delay %v%s", sched.Name, where, sched.Rate, sched.Interval(), sched.MaxDelay, maxQueueText(sched))
}

// String is l as one line of text: its slot's delay, queue and ID, or
// why it was rejected.
func (l Line) String() string {
	if l.OK {
		return fmt.Sprintf("#%-3d ok        leaves in %-10v queue %-3d id %s", l.N, l.delay, l.Queue, l.ID)
	}
	s := &sluice.Schedule{}
	if l.sched != nil {
		s = l.sched
	}
	return fmt.Sprintf("#%-3d rejected  (%s) it would wait %v, queue %d (max delay %v%s)", l.N, l.Reason, l.delay, l.Queue, s.MaxDelay, maxQueueText(s))
}

// maxQueueText is ", max queue Q" for a schedule that has one, else "".
func maxQueueText(s *sluice.Schedule) string {
	if s.MaxQueue > 0 {
		return fmt.Sprintf(", max queue %d", s.MaxQueue)
	}
	return ""
}

// ScheduleSpec names the schedule to reserve on: File's schedule Name, or
// one of its own at Rate (then Name defaults to "cli"). Its errors name
// the flags of sluice reserve that set each field.
type ScheduleSpec struct {
	File, Name, Rate string
	MaxDelay         time.Duration
	MaxQueue         int64
	By               []string // a schedule at Rate queues by these attributes
}

// Schedule returns the schedule s names, and with File the file it is
// from.
func (s *ScheduleSpec) Schedule() (*sluice.Schedule, *config.Config, error) {
	switch {
	case s.File != "" && s.Rate != "":
		return nil, nil, errors.New("--rate defines a schedule without a file; use either --config or --rate")
	case s.File != "" && s.Name == "":
		return nil, nil, errors.New("--schedule is required with --config")
	case s.File != "":
		cfg, err := config.Load(s.File)
		if err != nil {
			return nil, nil, err
		}
		sched, err := cfg.FindSchedule(s.Name)
		return sched, cfg, err
	case s.Rate != "":
		r, err := sluice.ParseRate(s.Rate)
		if err != nil {
			return nil, nil, fmt.Errorf("--rate: %v", err)
		}
		sched := &sluice.Schedule{Name: cmp.Or(s.Name, "cli"), By: s.By, Rate: r, MaxDelay: s.MaxDelay, MaxQueue: s.MaxQueue}
		return sched, nil, sched.Validate()
	}
	return nil, nil, errors.New("give the schedule with --config FILE --schedule NAME, or with --rate")
}
