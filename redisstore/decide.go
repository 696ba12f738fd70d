package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/sluicerate/sluice"
)

//go:embed decide.lua
var decideLua string

// scriptMode is the name decide.lua gives each mode.
var scriptMode = [...]string{
	sluice.ModeAllow:  "allow",
	sluice.ModePeek:   "peek",
	sluice.ModeRecord: "record",
}

// decide runs decide.lua for a validated request and builds the decision
// from its reply.
func (s *Store) decide(ctx context.Context, req *sluice.Request) (sluice.Decision, error) {
	rules := req.Policy.Rules
	args := make([]string, 3, 3+3*len(rules))
	args[0] = scriptMode[req.Mode]
	args[1] = strconv.FormatInt(req.Cost, 10)
	if s.clock != nil {
		args[2] = strconv.FormatInt(s.clock().UnixMicro(), 10)
	}
	for i := range rules {
		r := &rules[i]
		args = append(args,
			strconv.FormatInt(r.Window.Microseconds(), 10),
			strconv.FormatInt(r.Limit, 10),
			strconv.FormatInt(r.MinGap.Microseconds(), 10))
	}
	reply, err := run(ctx, s.ev, decideScript, keys(s.prefix, req.Policy, req.Attributes), args)
	if err != nil {
		return sluice.Decision{}, err
	}
	limits, err := parseDecision(reply, rules)
	if err != nil {
		return sluice.Decision{}, err
	}
	return sluice.NewDecision(limits), nil
}

// parseDecision reads decide.lua's reply: the time, then fits, used,
// retry-after and reset-after for every rule.
func parseDecision(reply []int64, rules []sluice.Rule) ([]sluice.LimitStatus, error) {
	if want := 1 + 4*len(rules); len(reply) != want {
		return nil, fmt.Errorf("redisstore: decide.lua replied %d integers for %d rules, want %d", len(reply), len(rules), want)
	}
	limits := make([]sluice.LimitStatus, len(rules))
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
