package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicerate/sluice/store"
)

// Decide implements store.Store: one round trip runs decide.lua, which
// checks every window and records the request in all of them or none, on
// the Redis server's clock (or Config.Clock). A request whose keys fall into
// several slot groups (SlotsPerRule) takes one round trip per group
// (crossslot.go).
//
// An error from Redis, a lost connection or a context that ends first is
// returned as an error; the request may or may not have been recorded, and
// it is never sent again.
func (s *Store) Decide(ctx context.Context, req *store.Request) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	pl := s.names.plan(req)
	if len(pl.groups) > 1 {
		return s.decideGroups(ctx, req, pl)
	}
	reply, err := s.decider.decide(ctx, pl.keys, decideArgs(scriptMode(req), req, s.nowArg(), pl.groups[0].checks))
	if err != nil {
		return fmt.Errorf("redisstore: running decide.lua: %w", err)
	}
	return parseResults(req, reply, nil, 5)
}

// scriptMode returns decide.lua's name of req's mode (modes in
// decision.lua).
func scriptMode(req *store.Request) string {
	switch {
	case req.Mode == store.ModeRecord && req.DryRun:
		return "peek-record"
	case req.Mode == store.ModeRecord:
		return "record"
	case req.DryRun:
		return "peek"
	}
	return "allow"
}

// decideArgs returns decide.lua's arguments, in mode at the time now (µs
// in decimal, or "" for Redis's TIME), for the checks of req whose indexes
// are checks.
func decideArgs(mode string, req *store.Request, now string, checks []int) []string {
	args := make([]string, 3, 3+4*len(checks))
	args[0], args[1] = mode, now
	var flags []byte // rules in decision.lua: one character per check, "" when all are "."
	for k, i := range checks {
		c := &req.Checks[i]
		if f := flagOf(c); f != '.' {
			if flags == nil {
				flags = make([]byte, len(checks))
				for j := range flags {
					flags[j] = '.'
				}
			}
			flags[k] = f
		}
		a := argsOf(c)
		args = append(args, a[0], a[1], a[2], costArg(c.Cost))
	}
	args[2] = string(flags)
	return args
}

// flagOf returns c's character in decide.lua's flags: its algorithm, upper
// case in shadow mode ("s" for the log).
func flagOf(c *store.Check) byte {
	f := [...]byte{store.Log: '.', store.GCRA: 'g', store.SlidingCounter: 'c'}[c.Algorithm]
	if c.Shadow {
		f = [...]byte{store.Log: 's', store.GCRA: 'G', store.SlidingCounter: 'C'}[c.Algorithm]
	}
	return f
}

// ruleShape is what decide.lua needs of a check besides its cost and
// flag.
type ruleShape struct {
	window, limit, third int64
}

// ruleArgs caches the decimal arguments of the rule shapes seen, so that a
// decision formats none of them; at most maxRuleArgs shapes are kept.
var (
	ruleArgs     sync.Map // ruleShape -> *[3]string
	ruleArgsSize atomic.Int64
)

const maxRuleArgs = 4096

// argsOf returns decide.lua's first three arguments for c: window µs, limit
// and min gap µs (GCRA's burst instead).
func argsOf(c *store.Check) *[3]string {
	third := c.MinGap.Microseconds()
	if c.Algorithm == store.GCRA {
		third = c.Burst
	}
	k := ruleShape{c.Window.Microseconds(), c.Limit, third}
	if v, ok := ruleArgs.Load(k); ok {
		return v.(*[3]string)
	}
	a := &[3]string{strconv.FormatInt(k.window, 10), strconv.FormatInt(k.limit, 10), strconv.FormatInt(k.third, 10)}
	if ruleArgsSize.Load() < maxRuleArgs {
		if _, loaded := ruleArgs.LoadOrStore(k, a); !loaded {
			ruleArgsSize.Add(1)
		}
	}
	return a
}

// smallCosts are the decimal forms of the costs most requests have.
var smallCosts = func() (c [17]string) {
	for i := range c {
		c[i] = strconv.Itoa(i)
	}
	return c
}()

func costArg(cost int64) string {
	if cost >= 0 && cost < int64(len(smallCosts)) {
		return smallCosts[cost]
	}
	return strconv.FormatInt(cost, 10)
}

// statusCause is the cause of each status decide.lua replies for a rule
// (1 fits, 0 no room, -1 too soon).
var statusCause = map[int64]store.Cause{1: store.CauseNone, 0: store.CauseLimit, -1: store.CauseGap}

// parseResults reads decide.lua's reply into req.Results: the time, then
// stride numbers per check, of which the first five are its status, used,
// remaining, retry-after and reset-after. The reply's checks are those of
// req whose indexes are in (nil: all of them, in order); their results go
// to the same indexes of req.Results, which the caller has sized when in is
// not nil.
func parseResults(req *store.Request, reply []int64, in []int, stride int) error {
	n := len(in)
	if in == nil {
		n = len(req.Checks)
		req.ResultsBuffer()
	}
	if want := 1 + stride*n; len(reply) != want {
		return fmt.Errorf("redisstore: decide.lua replied %d integers for %d rules, want %d", len(reply), n, want)
	}
	for k := range n {
		i := k
		if in != nil {
			i = in[k]
		}
		v := reply[1+stride*k : 1+stride*(k+1)]
		status, used, remaining, retry, reset := v[0], v[1], v[2], v[3], v[4]
		cause, ok := statusCause[status]
		if !ok || used < 0 || remaining < 0 || retry < 0 || reset < 0 {
			return fmt.Errorf("redisstore: decide.lua replied status=%d used=%d remaining=%d retry=%dµs reset=%dµs for rule %q, not a valid status",
				status, used, remaining, retry, reset, req.Checks[i].Rule)
		}
		req.Results[i] = store.Result{Fits: cause == store.CauseNone, Cause: cause, Used: used, Remaining: remaining,
			RetryAfter: time.Duration(retry) * time.Microsecond, ResetAfter: time.Duration(reset) * time.Microsecond}
	}
	return nil
}
