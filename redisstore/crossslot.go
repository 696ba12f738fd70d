package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/sluicerate/sluice"
)

// Cross-slot decisions (SlotsPerRule).
//
// Each rule's keys carry their own hash tag, the policy name and the values
// of the rule's By attributes:
//
//	<prefix>:{<policy>[,<rule's values>]}:<policy>:<rule>[:<values>]
//
// Rules whose tags are equal for a request form a slot group, decided by
// one script call. A policy with one group (every rule goes by the same
// values, e.g. all per user) is decided exactly as with SlotsShared: one
// atomic call of decide.lua. A policy with several groups (a global cap
// over a per-user cap) is decided group by group, in a fixed order: groups
// whose rules go by more attributes first, ties in policy order, so the
// global cap, the hottest key and the likeliest to deny, comes last.
//
//   - Allow: decide.lua in "group" mode checks each group and records the
//     request in it when all its rules fit (reserve). When every group fits, the request is
//     admitted (commit: nothing more to do). When a group denies, rollback.lua
//     takes the request's cost out of the entries of its time in the earlier
//     groups, and the groups after it are peeked so that the decision
//     reports every rule.
//   - Peek and Record run decide.lua on each group.
//
// Failures between the steps cost at most over-counting, never admitting
// more than the limits: an error from a group (or a lost reply) ends the
// decision with that error after rolling back the groups that certainly
// recorded; a group whose reply was lost may have recorded and is not rolled
// back; a rollback that fails leaves its entries until their window passes.
// A process that dies between the steps leaves its entries likewise.

// rollbackTimeout bounds a rollback that runs after its caller's context
// ended, and maxBackgroundRollbacks how many of those may run at once
// (beyond that, entries are left to expire).
const (
	rollbackTimeout        = time.Second
	maxBackgroundRollbacks = 64
)

// backgroundRollbacks limits the rollbacks running after their caller's
// context ended.
var backgroundRollbacks = make(chan struct{}, maxBackgroundRollbacks)

// layout is where a request's rules live under SlotsPerRule.
type layout struct {
	keys   []string // per rule, in policy order
	groups [][]int  // rule indexes of each slot group, in decision order
}

// ruleKeys returns the keys of p's rules for attrs, each under its own hash
// tag, and the slot groups.
func ruleKeys(prefix string, p *sluice.Policy, attrs map[string]string) layout {
	l := layout{keys: make([]string, len(p.Rules))}
	tags := make([]string, len(p.Rules))
	var buf []byte
	for i := range p.Rules {
		r := &p.Rules[i]
		buf = append(buf[:0], prefix...)
		buf = append(buf, ":{"...)
		buf = appendPart(buf, p.Name)
		for _, a := range r.By {
			buf = append(buf, ',')
			buf = appendPart(buf, attrs[a])
		}
		buf = append(buf, '}')
		tags[i] = string(buf[len(prefix)+1:])
		buf = append(buf, ':')
		buf = appendPart(buf, p.Name)
		buf = append(buf, ':')
		buf = appendPart(buf, r.Name)
		for j, a := range r.By {
			if j == 0 {
				buf = append(buf, ':')
			} else {
				buf = append(buf, ',')
			}
			buf = appendPart(buf, attrs[a])
		}
		l.keys[i] = string(buf)
	}
	for i := range p.Rules {
		found := false
		for g := range l.groups {
			if tags[l.groups[g][0]] == tags[i] {
				l.groups[g] = append(l.groups[g], i)
				found = true
				break
			}
		}
		if !found {
			l.groups = append(l.groups, []int{i})
		}
	}
	slices.SortStableFunc(l.groups, func(a, b []int) int {
		return len(p.Rules[b[0]].By) - len(p.Rules[a[0]].By)
	})
	return l
}

// decideGroups decides a validated request under SlotsPerRule.
func (s *Store) decideGroups(ctx context.Context, req *sluice.Request) (sluice.Decision, error) {
	l := ruleKeys(s.prefix, req.Policy, req.Attributes)
	rules := req.Policy.Rules
	now := ""
	if s.clock != nil {
		now = strconv.FormatInt(s.clock().UnixMicro(), 10)
	}
	limits := make([]sluice.LimitStatus, len(rules))
	if len(l.groups) == 1 || req.Mode != sluice.ModeAllow {
		for _, g := range l.groups {
			if err := s.decideGroup(ctx, req.Mode, req.Cost, now, rules, l, g, limits); err != nil {
				return sluice.Decision{}, err
			}
		}
		return sluice.NewDecision(limits), nil
	}

	// Reserve group by group; roll back on the first group that denies.
	var written []reservation
	for gi, g := range l.groups {
		res, fit, err := s.reserveGroup(ctx, req.Cost, now, rules, l, g, limits)
		if err != nil {
			s.rollback(ctx, req.Cost, written)
			return sluice.Decision{}, err
		}
		if fit {
			written = append(written, res)
			continue
		}
		s.rollback(ctx, req.Cost, written)
		for _, w := range written {
			for k, i := range w.rules {
				st := &limits[i]
				st.Used -= req.Cost
				st.Remaining = max(0, st.Limit-st.Used)
				st.ResetAfter = w.resetBefore[k]
			}
		}
		for _, g := range l.groups[gi+1:] {
			if err := s.decideGroup(ctx, sluice.ModePeek, req.Cost, now, rules, l, g, limits); err != nil {
				// The request is denied whatever these rules hold; report
				// them as fitting with nothing counted rather than fail a
				// decision already made.
				for _, i := range g {
					limits[i] = sluice.LimitStatus{Rule: rules[i].Name, Limit: rules[i].Limit, Window: rules[i].Window,
						Remaining: rules[i].Limit, Fits: true}
				}
			}
		}
		return sluice.NewDecision(limits), nil
	}
	return sluice.NewDecision(limits), nil
}

// groupArgs returns the rule arguments of a group's rules: window, limit
// and gap of each.
func groupArgs(args []string, rules []sluice.Rule, g []int) []string {
	for _, i := range g {
		args = appendRuleArgs(args, &rules[i])
	}
	return args
}

func groupKeys(l layout, g []int) []string {
	ks := make([]string, len(g))
	for k, i := range g {
		ks[k] = l.keys[i]
	}
	return ks
}

// decideGroup runs decide.lua in mode on one group and writes its rules'
// statuses into limits.
func (s *Store) decideGroup(ctx context.Context, mode sluice.Mode, cost int64, now string, rules []sluice.Rule, l layout, g []int, limits []sluice.LimitStatus) error {
	args := groupArgs([]string{scriptMode[mode], strconv.FormatInt(cost, 10), now}, rules, g)
	reply, err := run(ctx, s.ev, decideScript, groupKeys(l, g), args)
	if err != nil {
		return err
	}
	return s.parseGroup(reply, rules, g, limits)
}

// parseGroup reads decide.lua's statuses of group g's rules into limits.
func (s *Store) parseGroup(reply []int64, rules []sluice.Rule, g []int, limits []sluice.LimitStatus) error {
	grules := make([]sluice.Rule, len(g))
	for k, i := range g {
		grules[k] = rules[i]
	}
	st, err := parseDecision(reply, grules)
	if err != nil {
		return err
	}
	for k, i := range g {
		limits[i] = st[k]
	}
	return nil
}

// reservation is what decide.lua wrote in one group in "group" mode: for
// each rule, the time the request was recorded at, and the reset-after from
// before the write.
type reservation struct {
	keys        []string
	rules       []int
	ts          []int64
	resetBefore []time.Duration
}

// reserveGroup runs decide.lua in "group" mode on one group, writes its
// rules' statuses into limits and reports whether the group fit (and so was
// recorded).
func (s *Store) reserveGroup(ctx context.Context, cost int64, now string, rules []sluice.Rule, l layout, g []int, limits []sluice.LimitStatus) (reservation, bool, error) {
	args := groupArgs([]string{"group", strconv.FormatInt(cost, 10), now}, rules, g)
	keys := groupKeys(l, g)
	reply, err := run(ctx, s.ev, decideScript, keys, args)
	if err != nil {
		return reservation{}, false, err
	}
	n := len(g)
	if want := 2 + 6*n; len(reply) != want || reply[1+4*n] != 0 && reply[1+4*n] != 1 {
		return reservation{}, false, fmt.Errorf("redisstore: decide.lua (group) replied %d integers for %d rules, want %d", len(reply), n, want)
	}
	if err := s.parseGroup(reply[:1+4*n], rules, g, limits); err != nil {
		return reservation{}, false, err
	}
	recorded := reply[1+4*n] == 1
	res := reservation{keys: keys, rules: g}
	for k, i := range g {
		before, ts := reply[2+4*n+2*k], reply[3+4*n+2*k]
		if before < 0 || recorded && (!limits[i].Fits || ts <= 0) {
			return reservation{}, false, fmt.Errorf("redisstore: decide.lua (group) replied reset-before=%dµs time=%d for rule %q, not a valid write",
				before, ts, rules[i].Name)
		}
		res.ts = append(res.ts, ts)
		res.resetBefore = append(res.resetBefore, time.Duration(before)*time.Microsecond)
	}
	return res, recorded, nil
}

// rollback removes the entries of written, most recent group first. It runs
// each rollback once: in ctx while ctx lasts, otherwise in the background
// with its own timeout. A rollback that fails leaves its entries to expire
// with their windows (over-counting, never under-counting).
func (s *Store) rollback(ctx context.Context, cost int64, written []reservation) {
	for i := len(written) - 1; i >= 0; i-- {
		w := written[i]
		args := []string{strconv.FormatInt(cost, 10)}
		for k := range w.keys {
			args = append(args, strconv.FormatInt(w.ts[k], 10))
		}
		if ctx.Err() == nil {
			_, _ = run(ctx, s.ev, rollbackScript, w.keys, args)
			continue
		}
		select {
		case backgroundRollbacks <- struct{}{}:
		default:
			continue // too many already: leave the entries to expire
		}
		go func() {
			defer func() { <-backgroundRollbacks }()
			bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
			defer cancel()
			_, _ = run(bg, s.ev, rollbackScript, w.keys, args)
		}()
	}
}
