package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicerate/sluice"
)

// scriptMode is the name decide.lua gives each mode.
var scriptMode = [...]string{
	sluice.ModeAllow:  "allow",
	sluice.ModePeek:   "peek",
	sluice.ModeRecord: "record",
}

// decide runs decide.lua for a validated request and builds the decision
// from its reply, in req.Limits when it is large enough.
func (s *Store) decide(ctx context.Context, req *sluice.Request) (sluice.Decision, error) {
	rules := req.Policy.Rules
	now := ""
	if s.clock != nil {
		now = strconv.FormatInt(s.clock().UnixMicro(), 10)
	}
	args := decideArgs(req, now)
	reply, err := run(ctx, s.ev, decideScript, keys(s.prefix, req.Policy, req.Attributes), args)
	if err != nil {
		return sluice.Decision{}, err
	}
	limits, err := parseDecisionInto(req.LimitsBuffer(), reply, rules)
	if err != nil {
		return sluice.Decision{}, err
	}
	return sluice.NewDecision(limits), nil
}

// decideArgs returns decide.lua's arguments for req at the time now (µs in
// decimal, or "" for Redis's TIME).
func decideArgs(req *sluice.Request, now string) []string {
	rules := req.Policy.Rules
	args := make([]string, 3, 3+3*len(rules))
	args[0], args[1], args[2] = scriptMode[req.Mode], strconv.FormatInt(req.Cost, 10), now
	for i := range rules {
		args = appendRuleArgs(args, &rules[i])
	}
	return args
}

// appendRuleArgs appends decide.lua's three arguments for r.
func appendRuleArgs(args []string, r *sluice.Rule) []string {
	a := argsOf(r)
	return append(args, a[:]...)
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

// parseDecision reads decide.lua's reply: the time, then fits, used,
// retry-after and reset-after for every rule.
func parseDecision(reply []int64, rules []sluice.Rule) ([]sluice.LimitStatus, error) {
	return parseDecisionInto(make([]sluice.LimitStatus, len(rules)), reply, rules)
}

// parseDecisionInto is parseDecision writing into limits, which holds one
// status per rule.
func parseDecisionInto(limits []sluice.LimitStatus, reply []int64, rules []sluice.Rule) ([]sluice.LimitStatus, error) {
	if want := 1 + 4*len(rules); len(reply) != want {
		return nil, fmt.Errorf("redisstore: decide.lua replied %d integers for %d rules, want %d", len(reply), len(rules), want)
	}
	for i := range rules {
		r := &rules[i]
		v := reply[1+4*i : 5+4*i]
		fits, used, retry, reset := v[0], v[1], v[2], v[3]
		if fits != 0 && fits != 1 || used < 0 || retry < 0 || reset < 0 || fits == 1 && retry != 0 {
			return nil, fmt.Errorf("redisstore: decide.lua replied fits=%d used=%d retry=%dµs reset=%dµs for rule %q, not a valid status",
				fits, used, retry, reset, r.Name)
		}
		limits[i] = sluice.LimitStatus{
			Rule:       r.Name,
			Limit:      r.Limit,
			Window:     r.Window,
			Used:       used,
			Remaining:  max(0, r.Limit-used),
			Fits:       fits == 1,
			RetryAfter: time.Duration(retry) * time.Microsecond,
			ResetAfter: time.Duration(reset) * time.Microsecond,
		}
	}
	return limits, nil
}
