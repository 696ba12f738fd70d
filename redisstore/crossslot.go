package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/sluicerate/sluice/store"
)

// Cross-slot decisions (SlotsPerRule).
//
// Each rule's keys carry their own hash tag, the policy name and the values
// of the rule's By attributes:
//
//	<prefix>:{<policy>[,<rule's values>]}2<kind>:<rule>
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

// decideGroups decides req over the several slot groups of its plan.
func (s *Store) decideGroups(ctx context.Context, req *store.Request, pl plan) error {
	req.ResultsBuffer()
	d := &groupDecision{s: s, req: req, now: s.nowMicros()}
	switch {
	case req.Mode == store.ModeRecord:
		// Recorded whatever the windows hold: each group records on its own.
		for _, g := range pl.groups {
			if _, err := d.run(ctx, g, modeOf(req)); err != nil {
				return err
			}
		}
	case req.DryRun:
		// A peek: each group as if it were alone; when one denies, those
		// that fit are reported as the denial leaves them, unrecorded.
		var fit []groupResult
		for _, g := range pl.groups {
			res, err := d.run(ctx, g, modeDry|modeGroup)
			if err != nil {
				return err
			}
			if res.fits {
				fit = append(fit, res)
			}
		}
		if len(fit) < len(pl.groups) {
			d.unrecord(fit)
		}
	default:
		return d.reserve(ctx, pl.groups)
	}
	return nil
}

// groupDecision is a request on its way through its slot groups.
type groupDecision struct {
	s   *Store
	req *store.Request
	now int64 // the time: Config.Clock's µs, or -1 for Redis's TIME
}

// groupResult is what decide.lua did in a group mode on one group: whether
// the group fit (every check but the shadow ones), and per check the time
// the request was recorded at (0 if it was not) and the reset-after from
// before any write.
type groupResult struct {
	group
	fits        bool
	at          []int64
	resetBefore []time.Duration
	balances    []int64 // a credits check's balance before any write (its resetBefore is 0)
}

// reserve decides an Allow over groups, in order: each group checks and
// records the request when its windows fit; the first that denies rolls
// back those before it, and the groups after it are peeked so that the
// decision reports every window.
func (d *groupDecision) reserve(ctx context.Context, groups []group) error {
	var written []groupResult
	for gi, g := range groups {
		res, err := d.run(ctx, g, modeGroup)
		if err != nil {
			d.s.rollback(ctx, d.req, written)
			return err
		}
		if res.fits {
			written = append(written, res)
			continue
		}
		d.s.rollback(ctx, d.req, written)
		d.unrecord(written)
		for _, g := range groups[gi+1:] {
			res, err := d.run(ctx, g, modeDry|modeGroup)
			switch {
			case err != nil:
				// The request is denied whatever these windows hold; report
				// them as fitting with nothing counted rather than fail a
				// decision already made.
				for _, i := range g.checks {
					d.req.Results[i] = store.Result{Fits: true}
				}
			case res.fits:
				d.unrecord([]groupResult{res})
			}
		}
		return nil
	}
	return nil
}

// run runs decide.lua in mode on group g and writes its checks' results
// into the request's. A group mode's result tells what rollback needs.
func (d *groupDecision) run(ctx context.Context, g group, mode int32) (groupResult, error) {
	reply, err := d.s.decider.decide(ctx, d.s.names.withSlices(d.req, g.checks, g.keys), shapeOf(mode, d.req, d.now, g.checks))
	if err != nil {
		return groupResult{}, fmt.Errorf("redisstore: running decide.lua: %w", err)
	}
	res := groupResult{group: g, fits: true}
	stride := ruleWidth
	if mode&modeGroup != 0 {
		stride = groupRuleWidth
	}
	if err := parseResults(d.req, reply, g.checks, stride, d.now); err != nil {
		return groupResult{}, err
	}
	for k, i := range g.checks {
		res.fits = res.fits && (d.req.Results[i].Fits || d.req.Checks[i].Shadow)
		if stride == groupRuleWidth {
			v := reply[groupRuleWidth*k : groupRuleWidth*(k+1)]
			before, at := v[3], v[4]
			var balance int64
			if d.req.Checks[i].Algorithm == store.Credits {
				balance, before = before, 0 // decision.lua's balance before
			}
			res.balances = append(res.balances, balance)
			if before < 0 || at < 0 {
				return groupResult{}, fmt.Errorf("redisstore: decide.lua (mode %d) replied reset-before=%dµs time=%d for rule %q, not a valid write",
					mode, before, at, d.req.Checks[i].Rule)
			}
			res.at = append(res.at, at)
			res.resetBefore = append(res.resetBefore, time.Duration(before)*time.Microsecond)
		}
	}
	return res, nil
}

// unrecord reports the checks of groups that fit, recorded (or, for a
// peek, reported as recorded), as a denial leaves them: without the
// request.
func (d *groupDecision) unrecord(groups []groupResult) {
	for _, res := range groups {
		for k, i := range res.checks {
			r, c := &d.req.Results[i], &d.req.Checks[i]
			if c.Algorithm == store.Credits {
				// The balance before: not drawn (res.balances), or drawn
				// and given back.
				r.Remaining = res.balances[k]
				r.Used = max(0, c.Limit-r.Remaining)
				continue
			}
			r.Used -= c.Cost
			r.Remaining = max(0, c.Limit-r.Used)
			if c.Algorithm == store.GCRA {
				r.Remaining = c.Burst - r.Used
			}
			r.ResetAfter = res.resetBefore[k]
			if r.Fits {
				r.RetryAfter = 0
			}
		}
	}
}

// rollback removes the entries of written, most recent group first. It runs
// each rollback once: in ctx while ctx lasts, otherwise in the background
// with its own timeout. A rollback that fails leaves its entries to expire
// with their windows (over-counting, never under-counting).
func (s *Store) rollback(ctx context.Context, req *store.Request, written []groupResult) {
	for i := len(written) - 1; i >= 0; i-- {
		w := written[i]
		// One rollback per cost: a group's checks may count differently.
		for _, part := range splitByCost(req, w) {
			s.rollbackOnce(ctx, part.keys, part.args)
		}
	}
}

// rollbackCall is one rollback.lua call: keys of one cost, and its args.
type rollbackCall struct {
	keys, args []string
}

// splitByCost returns the rollback calls of a group's writes, one per cost.
func splitByCost(req *store.Request, w groupResult) []rollbackCall {
	var calls []rollbackCall
	byCost := map[int64]int{}
	for k, i := range w.checks {
		if w.at[k] == 0 {
			continue // not recorded there
		}
		c := &req.Checks[i]
		j, ok := byCost[c.Cost]
		if !ok {
			j = len(calls)
			byCost[c.Cost] = j
			calls = append(calls, rollbackCall{args: []string{costArg(c.Cost)}})
		}
		var param int64 // GCRA's interval, the counter's window
		at := w.at[k]
		switch c.Algorithm {
		case store.GCRA:
			param = gcraInterval(c)
		case store.SlidingCounter:
			param = c.Window.Microseconds()
		case store.Periodic:
			at, _, _ = c.Calendar.At(at) // the period it was counted in
		}
		calls[j].keys = append(calls[j].keys, w.keys[k])
		calls[j].args = append(calls[j].args, strconv.FormatInt(at, 10), string(flagOf(c)), strconv.FormatInt(param, 10))
	}
	return calls
}

// rollbackOnce runs one rollback.lua call, once.
func (s *Store) rollbackOnce(ctx context.Context, keys, args []string) {
	if ctx.Err() == nil {
		_, _ = run(ctx, s.ev, rollbackScript, keys, args)
		return
	}
	select {
	case backgroundRollbacks <- struct{}{}:
	default:
		return // too many already: leave the entries to expire
	}
	go func() {
		defer func() { <-backgroundRollbacks }()
		bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		_, _ = run(bg, s.ev, rollbackScript, keys, args)
	}()
}

// gcraInterval is GCRA's time per unit of c's cost, µs: Window/Limit
// rounded up (gcraInterval in gcra.lua).
func gcraInterval(c *store.Check) int64 {
	w := c.Window.Microseconds()
	if c.Limit <= 0 {
		return w
	}
	return (w + c.Limit - 1) / c.Limit
}

// flagOf returns c's algorithm in rollback.lua's arguments: "." the log,
// "g" GCRA, "c" the sliding counter, "p" a calendar quota, "b" a credits
// balance, upper case in shadow mode ("s" for the log).
func flagOf(c *store.Check) byte {
	f := [...]byte{store.Log: '.', store.GCRA: 'g', store.SlidingCounter: 'c', store.Concurrency: '.', store.Periodic: 'p', store.Credits: 'b'}[c.Algorithm]
	if c.Shadow {
		f = [...]byte{store.Log: 's', store.GCRA: 'G', store.SlidingCounter: 'C', store.Concurrency: 's', store.Periodic: 'P', store.Credits: 'B'}[c.Algorithm]
	}
	return f
}

// smallCosts are the decimal forms of the costs most requests have.
var smallCosts = func() (c [17]string) {
	for i := range c {
		c[i] = strconv.Itoa(i)
	}
	return c
}()

// costArg returns cost in decimal.
func costArg(cost int64) string {
	if cost >= 0 && cost < int64(len(smallCosts)) {
		return smallCosts[cost]
	}
	return strconv.FormatInt(cost, 10)
}
