// Package outage logs a store's failures at a rate an operator can read.
//
// A store that stops answering fails every call until it answers again, and
// one line per failed call turns an outage of the store into an outage of
// the log pipeline. A Reporter logs an outage as
//
//   - the first failure of each kind (a decision of a policy, a reservation
//     or cancellation of a schedule, a request of an Envoy domain), at once,
//     with its error;
//   - the circuit breaker opening, and its first half-open probe, at once;
//   - while failures go on, one summary per interval: how many calls failed
//     in it, the policies, schedules and domains involved, its first and
//     last error, the circuit's state, and the outage's length and total so
//     far;
//   - when the store answers again, one line with the outage's length and
//     total, and the circuit's state when it had opened: the probe that
//     succeeds is what closes it.
//
// A store that fails and answers by turns (timeouts under load) must not
// log a line per turn either. Outages less than an interval apart (from
// the store answering to the next failure) are one episode: the first
// failure of each kind, the circuit's opening and its half-open state are
// logged once per episode. An outage's end is logged at once when a line
// about it was logged since the previous end, or an interval has passed
// since that one; otherwise it waits for the first call after that
// interval (and says how long the store has been answering). Each end
// counts the failures since the previous one. A call answered by the open
// circuit after the store answered (decided before the probe closed it)
// is not a new failure.
//
// Lines are written by the calls that fail or are answered, never by a
// timer: a server with no traffic logs nothing. Metrics, not logs, count
// every call.
package outage

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicerate/sluice"
)

// DefaultInterval is Config.Interval's default.
const DefaultInterval = 10 * time.Second

// Kind is what a failed call was for; the lines name it.
type Kind uint8

const (
	// Policy is a decision of a policy (attribute "policy").
	Policy Kind = iota

	// Schedule is a reservation or cancellation of a schedule
	// ("schedule").
	Schedule

	// Domain is a request of an Envoy domain ("domain").
	Domain

	numKinds
)

// kindNames are the attribute names of each kind: of one, and of the list
// in summaries.
var kindNames = [numKinds]struct{ one, many string }{
	Policy:   {"policy", "policies"},
	Schedule: {"schedule", "schedules"},
	Domain:   {"domain", "domains"},
}

// maxNames is how many names of each kind a line lists; a list cut short
// ends in "…".
const maxNames = 8

// Config configures a Reporter. Its zero value is the default.
type Config struct {
	// Logger receives the lines. Default: discard.
	Logger *slog.Logger

	// Interval is the least time between two summaries of an outage.
	// Default DefaultInterval (10 s).
	Interval time.Duration

	// Now is the time. Default: time.Now.
	Now func() time.Time

	// Circuit returns the state of the circuit breaker over the store, as
	// sluice.Limiter.Circuit names it ("closed", "open", "half_open"). It
	// is read when a call fails during an outage and when it ends. Nil: the
	// circuit is not reported.
	Circuit func() string

	// Prefix starts the messages of the lines a Reporter writes itself
	// (summaries, the end, the circuit): "httplimit: ". Default none.
	Prefix string
}

// Failure is one call the store failed.
type Failure struct {
	// Msg is the message of the line logged when the failure is the first
	// of its kind in an outage: what the failure cost ("store failed;
	// decided by on_error"). Empty: no such line.
	Msg string

	// Tag, when its key is set, is that line's first attribute: the API,
	// the gRPC method.
	Tag slog.Attr

	// Kind and Name say what the call was for: policy "notify".
	Kind Kind
	Name string

	// Err is the error of the call.
	Err error

	// Attrs are more attributes of that line, after the name: what the
	// failure policy decided.
	Attrs []slog.Attr
}

// A Reporter's state, read without its lock by Answered.
const (
	quiet    int32 = iota // no outage
	failing               // the last call failed
	answered              // the store answered; the line that says so waits for the interval
)

// Reporter logs the failures of one store (see the package
// documentation). It is safe for concurrent use; a call answered while
// the store is healthy costs an atomic load. Its zero value is not usable;
// create one with New.
type Reporter struct {
	log      *slog.Logger
	interval time.Duration
	now      func() time.Time
	circuit  func() string
	prefix   string

	state atomic.Int32
	due   atomic.Int64 // answered: when the end may be logged, in Unix ns

	mu sync.Mutex

	// The episode: outages less than an interval apart.
	announced [numKinds]bool // the first failure of each kind was logged
	circ      string         // the circuit's state when last read
	opened    bool           // the circuit opened
	probed    bool           // its half-open state was logged

	// The outage: the failures since the last end line.
	start   time.Time // its first failure
	end     time.Time // when the store answered after the last failure; zero: never
	total   int64
	names   [numKinds]names
	lastErr error // the last error from the store

	// What the lines have said.
	since   time.Time // the last first line, summary or end: the start of the period
	period  period    // the failures since then
	lastEnd time.Time // the last end line; zero: none
	logged  bool      // a line was logged since the last end line
}

// New returns a Reporter configured by cfg.
func New(cfg Config) *Reporter {
	r := &Reporter{log: cfg.Logger, interval: cfg.Interval, now: cfg.Now, circuit: cfg.Circuit, prefix: cfg.Prefix}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.interval <= 0 {
		r.interval = DefaultInterval
	}
	if r.now == nil {
		r.now = time.Now
	}
	return r
}

// Interval returns the least time between two summaries.
func (r *Reporter) Interval() time.Duration { return r.interval }

// Failed reports a call the store failed, whether it reached the store or
// was answered by the open circuit (an error wrapping
// sluice.ErrCircuitOpen).
func (r *Reporter) Failed(ctx context.Context, f Failure) {
	now := r.now()
	open := errors.Is(f.Err, sluice.ErrCircuitOpen)
	r.mu.Lock()
	defer r.mu.Unlock()
	st := r.state.Load()
	episode := !r.end.IsZero() && now.Sub(r.end) < r.interval
	switch {
	case st == failing:
	case episode && open:
		return // decided before the probe that closed the circuit
	case st == answered && episode:
		// The outage goes on: its end was not logged.
	case st == answered:
		r.logEnd(ctx, now)
		r.begin(now)
	case episode:
		r.start, r.total, r.lastErr = now, 0, nil
		for i := range r.names {
			r.names[i].reset()
		}
	default:
		r.begin(now)
	}
	r.state.Store(failing)
	r.count(f, open)
	if f.Kind < numKinds && !r.announced[f.Kind] {
		r.announced[f.Kind] = true
		r.first(ctx, f)
	}
	r.observe(ctx, now)
	if !now.Before(r.since.Add(r.interval)) {
		r.summary(ctx, now)
	}
}

// Answered reports a call the store answered.
func (r *Reporter) Answered(ctx context.Context) {
	st := r.state.Load()
	if st == quiet {
		return
	}
	now := r.now()
	if st == answered && now.UnixNano() < r.due.Load() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch r.state.Load() {
	case quiet:
		return
	case failing:
		r.end = now
		if due := r.lastEnd.Add(r.interval); !r.logged && now.Before(due) {
			r.due.Store(due.UnixNano())
			r.state.Store(answered)
			return
		}
	case answered:
		if now.Before(r.lastEnd.Add(r.interval)) {
			return
		}
	}
	r.logEnd(ctx, now)
}

// begin starts an episode, and its first outage, at now.
func (r *Reporter) begin(now time.Time) {
	r.announced = [numKinds]bool{}
	r.circ, r.opened, r.probed = "closed", false, false
	r.start, r.total, r.lastErr = now, 0, nil
	for i := range r.names {
		r.names[i].reset()
	}
	r.since = now
	r.period.reset()
}

// count adds f to the outage and the period.
func (r *Reporter) count(f Failure, open bool) {
	r.total++
	r.period.count++
	if f.Kind < numKinds {
		r.names[f.Kind].add(f.Name)
		r.period.names[f.Kind].add(f.Name)
	}
	if open {
		r.period.open++
		return
	}
	if r.period.first == nil {
		r.period.first = f.Err
	}
	r.period.last, r.lastErr = f.Err, f.Err
}

// first logs f as the first failure of its kind.
func (r *Reporter) first(ctx context.Context, f Failure) {
	if f.Msg == "" {
		return
	}
	attrs := make([]slog.Attr, 0, 4+len(f.Attrs))
	if f.Tag.Key != "" {
		attrs = append(attrs, f.Tag)
	}
	attrs = append(attrs, slog.String(kindNames[f.Kind].one, f.Name))
	attrs = append(attrs, f.Attrs...)
	attrs = append(attrs, slog.Any("err", f.Err), slog.String("summary_every", r.interval.String()))
	r.log.LogAttrs(ctx, slog.LevelWarn, f.Msg, attrs...)
	r.logged = true
}

// observe reads the circuit's state and logs its first opening and its
// first half-open state in the episode.
func (r *Reporter) observe(ctx context.Context, now time.Time) {
	if r.circuit == nil {
		return
	}
	c := r.circuit()
	if c == r.circ {
		return
	}
	r.circ = c
	switch {
	case c == "open" && !r.opened:
		r.opened, r.logged = true, true
		attrs := []slog.Attr{slog.String("outage", duration(now.Sub(r.start))), slog.Int64("failed", r.total)}
		if r.lastErr != nil {
			attrs = append(attrs, slog.Any("last_err", r.lastErr))
		}
		r.log.LogAttrs(ctx, slog.LevelWarn, r.prefix+"store circuit breaker open: the store is not called until a probe succeeds", attrs...)
	case c == "half_open" && !r.probed:
		r.opened, r.probed, r.logged = true, true, true
		r.log.LogAttrs(ctx, slog.LevelInfo, r.prefix+"store circuit breaker half-open: one call probes the store",
			slog.String("outage", duration(now.Sub(r.start))))
	}
}

// summary logs the period and starts a new one.
func (r *Reporter) summary(ctx context.Context, now time.Time) {
	attrs := []slog.Attr{slog.Int64("failed", r.period.count), slog.String("period", duration(now.Sub(r.since)))}
	attrs = appendNames(attrs, &r.period.names)
	if r.period.first != nil {
		attrs = append(attrs, slog.Any("first_err", r.period.first), slog.Any("last_err", r.period.last))
	}
	if r.period.open > 0 {
		attrs = append(attrs, slog.Int64("by_open_circuit", r.period.open))
	}
	if r.opened {
		attrs = append(attrs, slog.String("circuit", r.circ))
	}
	attrs = append(attrs, slog.String("outage", duration(now.Sub(r.start))), slog.Int64("total", r.total))
	r.log.LogAttrs(ctx, slog.LevelWarn, r.prefix+"store still failing", attrs...)
	r.since, r.logged = now, true
	r.period.reset()
}

// logEnd logs the end of the outage: the store answered at r.end.
func (r *Reporter) logEnd(ctx context.Context, now time.Time) {
	attrs := []slog.Attr{slog.String("outage", duration(r.end.Sub(r.start))), slog.Int64("failed", r.total)}
	attrs = appendNames(attrs, &r.names)
	if r.lastErr != nil {
		attrs = append(attrs, slog.Any("last_err", r.lastErr))
	}
	if r.opened && r.circuit != nil {
		r.circ = r.circuit()
		attrs = append(attrs, slog.String("circuit", r.circ))
	}
	if now.After(r.end) {
		attrs = append(attrs, slog.String("answering_for", duration(now.Sub(r.end))))
	}
	r.log.LogAttrs(ctx, slog.LevelInfo, r.prefix+"store answers again", attrs...)
	r.lastEnd, r.since, r.logged = now, now, false
	r.period.reset()
	r.state.Store(quiet)
}

// appendNames appends the lists of names that are not empty.
func appendNames(attrs []slog.Attr, ns *[numKinds]names) []slog.Attr {
	for k := range ns {
		if len(ns[k].list) > 0 {
			attrs = append(attrs, slog.Any(kindNames[k].many, ns[k].value()))
		}
	}
	return attrs
}

// duration formats d to the millisecond, for both text and JSON logs.
func duration(d time.Duration) string { return d.Round(time.Millisecond).String() }
