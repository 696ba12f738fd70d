package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicerate/sluice"
)

// Decide implements sluice.Store: one round trip runs decide.lua, which
// checks every rule and records the request in all of them or none, on the
// Redis server's clock (or Config.Clock). A policy whose keys fall into
// several slot groups (SlotsPerRule) takes one round trip per group
// (crossslot.go).
//
// An error from Redis, a lost connection or a context that ends first is
// returned as an error; the request may or may not have been recorded, and
// it is never sent again.
func (s *Store) Decide(ctx context.Context, req *sluice.Request) (sluice.Decision, error) {
	if s.closed.Load() {
		return sluice.Decision{}, sluice.ErrStoreClosed
	}
	if err := ctx.Err(); err != nil {
		return sluice.Decision{}, err
	}
	pl := planOf(s.prefix, s.perRule, req.Policy, req.Attributes)
	if len(pl.groups) > 1 {
		return s.decideGroups(ctx, req, pl)
	}
	reply, err := s.decider.decide(ctx, pl.keys, decideArgs(req, s.nowArg()))
	if err != nil {
		return sluice.Decision{}, fmt.Errorf("redisstore: running decide.lua: %w", err)
	}
	limits, err := parseStatuses(req.LimitsBuffer(), reply, req.Policy.Rules, nil, 4)
	if err != nil {
		return sluice.Decision{}, err
	}
	return sluice.NewDecision(limits), nil
}

// scriptMode returns decide.lua's name of req's mode (MODES in window.lua).
func scriptMode(req *sluice.Request) string {
	switch {
	case req.Mode == sluice.ModeRecord && req.DryRun:
		return "peek-record"
	case req.Mode == sluice.ModeRecord:
		return "record"
	case req.DryRun:
		return "peek"
	}
	return "allow"
}

// decideArgs returns decide.lua's arguments for req at the time now (µs in
// decimal, or "" for Redis's TIME).
func decideArgs(req *sluice.Request, now string) []string {
	return groupArgs(scriptMode(req), req, now, firstRules(len(req.Policy.Rules)))
}

// groupArgs returns decide.lua's arguments, in mode, for the rules of req's
// policy whose indexes are rules.
func groupArgs(mode string, req *sluice.Request, now string, rules []int) []string {
	args := make([]string, 3, 3+3*len(rules))
	args[0], args[1], args[2] = mode, strconv.FormatInt(req.Cost, 10), now
	for _, i := range rules {
		a := argsOf(&req.Policy.Rules[i])
		args = append(args, a[:]...)
	}
	return args
}

// ruleShape is what decide.lua needs of a rule.
type ruleShape struct {
	window, limit, gap int64
}

// ruleArgs caches the decimal arguments of the rule shapes seen, so that a
// decision formats none of them; at most maxRuleArgs shapes are kept.
var (
	ruleArgs     sync.Map // ruleShape -> *[3]string
	ruleArgsSize atomic.Int64
)

const maxRuleArgs = 4096

// argsOf returns decide.lua's three arguments for r: window µs, limit and
// min gap µs.
func argsOf(r *sluice.Rule) *[3]string {
	k := ruleShape{r.Window.Microseconds(), r.Limit, r.MinGap.Microseconds()}
	if v, ok := ruleArgs.Load(k); ok {
		return v.(*[3]string)
	}
	a := &[3]string{strconv.FormatInt(k.window, 10), strconv.FormatInt(k.limit, 10), strconv.FormatInt(k.gap, 10)}
	if ruleArgsSize.Load() < maxRuleArgs {
		if _, loaded := ruleArgs.LoadOrStore(k, a); !loaded {
			ruleArgsSize.Add(1)
		}
	}
	return a
}

// statusCause is the cause of each status decide.lua replies for a rule
// (STATUS in window.lua); 1 is a rule that fits.
var statusCause = map[int64]sluice.Cause{1: "", 0: sluice.CauseLimit, -1: sluice.CauseGap}

// parseStatuses reads decide.lua's reply into limits: the time, then
// stride numbers per rule, of which the first four are its status, used,
// retry-after and reset-after. The reply's rules are those of rules whose
// indexes are in (nil: all of them, in order); their statuses go to the
// same indexes of limits.
func parseStatuses(limits []sluice.LimitStatus, reply []int64, rules []sluice.Rule, in []int, stride int) ([]sluice.LimitStatus, error) {
	n := len(in)
	if in == nil {
		n = len(rules)
	}
	if want := 1 + stride*n; len(reply) != want {
		return nil, fmt.Errorf("redisstore: decide.lua replied %d integers for %d rules, want %d", len(reply), n, want)
	}
	for k := range n {
		i := k
		if in != nil {
			i = in[k]
		}
		r := &rules[i]
		v := reply[1+stride*k : 1+stride*(k+1)]
		status, used, retry, reset := v[0], v[1], v[2], v[3]
		cause, ok := statusCause[status]
		if !ok || used < 0 || retry < 0 || reset < 0 {
			return nil, fmt.Errorf("redisstore: decide.lua replied status=%d used=%d retry=%dµs reset=%dµs for rule %q, not a valid status",
				status, used, retry, reset, r.Name)
		}
		limits[i] = sluice.LimitStatus{
			Rule:       r.Name,
			Limit:      r.Limit,
			Window:     r.Window,
			Used:       used,
			Remaining:  max(0, r.Limit-used),
			Fits:       cause == "",
			Cause:      cause,
			RetryAfter: time.Duration(retry) * time.Microsecond,
			ResetAfter: time.Duration(reset) * time.Microsecond,
		}
	}
	return limits, nil
}
