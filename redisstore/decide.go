package redisstore

import (
	"context"
	"encoding/binary"
	"fmt"
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
	if err := store.CheckDecide(req); err != nil {
		return err
	}
	pl := s.names.plan(req)
	if len(pl.groups) > 1 {
		if err := checkQuotas(req, &pl); err != nil {
			return err
		}
		return s.decideGroups(ctx, req, pl)
	}
	checks := pl.groups[0].checks
	now := s.nowMicros()
	reply, err := s.decider.decide(ctx, s.names.withSlices(req, checks, pl.keys), shapeOf(modeOf(req), req, now, checks))
	if err != nil {
		return fmt.Errorf("redisstore: running decide.lua: %w", err)
	}
	return parseResults(req, reply, nil, ruleWidth, now)
}

// Modes: the bits of a shape's mode (decision.lua's modes).
const (
	modeRecord = 1 // record whether the rules fit or not
	modeDry    = 2 // a peek: write nothing
	modeGroup  = 4 // one slot group of several (crossslot.go)
	modeOwn    = 8 // the time is the store's clock (Config.Clock), not Redis's
)

// modeOf returns the mode bits of req's mode.
func modeOf(req *store.Request) int32 {
	var m int32
	if req.Mode == store.ModeRecord {
		m |= modeRecord
	}
	if req.DryRun {
		m |= modeDry
	}
	return m
}

// The integers decide.lua replies per rule: used, retry-after µs times 4
// plus the status, and reset-after µs; in a group mode also the reset-after
// µs before any write and the time recorded at.
const (
	ruleWidth      = 3
	groupRuleWidth = 5
)

// Rule kinds (decision.lua's rules): the algorithm, plus kindShadow in
// shadow mode.
var ruleKinds = [...]int32{store.Log: 0, store.GCRA: 1, store.SlidingCounter: 2, store.Concurrency: 3, store.Periodic: 6, store.Credits: 7}

const kindShadow = 16

// kindBudgeted turns the log's kind (0) into a budgeted log's (4) and
// GCRA's (1) into a budgeted bucket's (5): windows whose slices count.
const kindBudgeted = 4

// Sizes in a shape: its head (rules, mode, time) and each rule's (kind,
// window, limit, third, cost), to which a calendar quota or a credits rule
// adds its own (appendCalendarRule).
const (
	shapeHead = 4 + 4 + 8
	shapeRule = 4 + 8*4
)

// shapeOf returns the shape of req's checks whose indexes are checks, in
// mode, at the time now (µs; -1 for Redis's TIME): the part of decide.lua's
// packed numbers (see decide.lua) that one request's decision needs.
// Requests of one policy, cost and mode have equal shapes, which a batch
// sends once.
func shapeOf(mode int32, req *store.Request, now int64, checks []int) string {
	var room [shapeHead + 4*shapeRule]byte
	b := room[:0]
	if now >= 0 {
		mode |= modeOwn
	}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(checks)))
	b = binary.LittleEndian.AppendUint32(b, uint32(mode))
	b = binary.LittleEndian.AppendUint64(b, uint64(max(now, 0)))
	for _, i := range checks {
		c := &req.Checks[i]
		kind := ruleKinds[c.Algorithm]
		if keepsSlices(c) {
			kind += kindBudgeted // its slices count (slices.lua)
		}
		if c.Shadow {
			kind += kindShadow
		}
		third := c.MinGap.Microseconds()
		if c.Algorithm == store.GCRA {
			third = c.Burst
		}
		b = binary.LittleEndian.AppendUint32(b, uint32(kind))
		b = binary.LittleEndian.AppendUint64(b, uint64(c.Window.Microseconds()))
		b = binary.LittleEndian.AppendUint64(b, uint64(c.Limit))
		b = binary.LittleEndian.AppendUint64(b, uint64(third))
		b = binary.LittleEndian.AppendUint64(b, uint64(c.Cost))
		if c.Algorithm == store.Periodic || c.Algorithm == store.Credits {
			b = appendCalendarRule(b, c, now, checks)
		}
	}
	return string(b)
}

// shapeRules returns the number of rules of shape sh, and its mode.
func shapeRules(sh string) (n int, mode int32) {
	return int(le32(sh, 0)), int32(le32(sh, 4))
}

// le32 reads the little-endian 32-bit integer at s[at:].
func le32(s string, at int) uint32 {
	return uint32(s[at]) | uint32(s[at+1])<<8 | uint32(s[at+2])<<16 | uint32(s[at+3])<<24
}

// shapeIsLog reports whether every rule of shape sh keeps the log. (Rules
// after the first that does not may be longer than shapeRule: it stops
// there.)
func shapeIsLog(sh string) bool {
	for at := shapeHead; at+4 <= len(sh); at += shapeRule {
		if le32(sh, at)%kindShadow != 0 {
			return false
		}
	}
	return true
}

// replyWidth returns how many integers decide.lua replies for a request of
// shape sh.
func replyWidth(sh string) int {
	n, mode := shapeRules(sh)
	if mode&modeGroup != 0 {
		return n * groupRuleWidth
	}
	return n * ruleWidth
}

// singleArgs returns decide.lua's arguments for one request of shape sh.
func singleArgs(sh string) []string {
	return []string{oneOfOne, sh}
}

// oneOfOne is the head of decide.lua's arguments for one request.
var oneOfOne = batchHead(1, 1)

// batchHead returns the head of decide.lua's arguments: the number of
// requests and of shapes.
func batchHead(requests, shapes int) string {
	b := binary.LittleEndian.AppendUint32(make([]byte, 0, 8), uint32(requests))
	return string(binary.LittleEndian.AppendUint32(b, uint32(shapes)))
}

// statusCause is the cause of each status decide.lua replies for a rule
// (decision.lua's check: 0 fits, 1 no room, 2 too soon, 3 its leases all
// alive).
var statusCause = [...]store.Cause{0: store.CauseNone, 1: store.CauseLimit, 2: store.CauseGap, 3: store.CauseConcurrency}

// parseResults reads decide.lua's reply into req.Results: stride numbers
// per check, of which the first three are its used, its retry-after µs
// times 4 plus its status, and its reset-after µs; for a credits check the
// balance in place of used, and in place of reset-after the periods until
// a refill makes a denied cost fit (creditsRetry, at now: the shape's time
// in µs, or -1 for this process's clock). The reply's checks are
// those of req whose indexes are in (nil: all of them, in order); their
// results go to the same indexes of req.Results, which the caller has
// sized when in is not nil.
func parseResults(req *store.Request, reply []int64, in []int, stride int, now int64) error {
	n := len(in)
	if in == nil {
		n = len(req.Checks)
		req.ResultsBuffer()
	}
	if want := stride * n; len(reply) != want {
		return fmt.Errorf("redisstore: decide.lua replied %d integers for %d rules, want %d", len(reply), n, want)
	}
	for k := range n {
		i := k
		if in != nil {
			i = in[k]
		}
		v := reply[stride*k : stride*(k+1)]
		if req.Checks[i].Algorithm == store.Credits {
			if err := parseCredits(req, i, v, now); err != nil {
				return err
			}
			continue
		}
		used, status, retry, reset := v[0], v[1]&3, v[1]>>2, v[2]
		// Status 3 (its leases all alive) is a concurrency rule's, the only
		// one that rule has besides 0.
		if used < 0 || v[1] < 0 || reset < 0 || (status == 3) != (req.Checks[i].Algorithm == store.Concurrency) && status != 0 {
			return fmt.Errorf("redisstore: decide.lua replied used=%d status=%d retry=%dµs reset=%dµs for rule %q, not a valid status",
				used, status, retry, reset, req.Checks[i].Rule)
		}
		c := &req.Checks[i]
		remaining := max(0, c.Limit-used)
		if c.Algorithm == store.GCRA {
			remaining = 0
			if c.Limit > 0 {
				remaining = c.Burst - used
			}
		}
		if remaining < 0 {
			return fmt.Errorf("redisstore: decide.lua replied used=%d for rule %q of burst %d, more than it holds", used, c.Rule, c.Burst)
		}
		cause := statusCause[status]
		req.Results[i] = store.Result{Fits: cause == store.CauseNone, Cause: cause, Used: used, Remaining: remaining,
			RetryAfter: time.Duration(retry) * time.Microsecond, ResetAfter: time.Duration(reset) * time.Microsecond}
	}
	for k := range n {
		i := k
		if in != nil {
			i = in[k]
		}
		// A credits check that pays for a calendar quota's overage, and
		// denies with it, is retried when either has room: at the sooner
		// of their waits (store.Check.Covers).
		c, r := &req.Checks[i], &req.Results[i]
		if c.Covers > 0 && !r.Fits {
			if q := req.Results[c.Covers-1]; !q.Fits && q.RetryAfter < r.RetryAfter {
				r.RetryAfter = q.RetryAfter
			}
		}
	}
	return nil
}

// parseCredits reads decide.lua's reply v for credits check i of req:
// the balance, the retry-after µs times 4 plus the status (0 fits, 1 the
// balance is short), and the periods until a refill makes the cost fit.
func parseCredits(req *store.Request, i int, v []int64, now int64) error {
	c := &req.Checks[i]
	bal, status, retry, m := v[0], v[1]&3, v[1]>>2, v[2]
	if v[1] < 0 || status > 1 || m < 0 || bal < -store.MaxCost || bal > store.MaxCost {
		return fmt.Errorf("redisstore: decide.lua replied balance=%d status=%d retry=%dµs periods=%d for credits rule %q, not a valid status",
			bal, status, retry, m, c.Rule)
	}
	if now < 0 {
		now = time.Now().UnixMicro()
	}
	r := store.Result{Fits: status == 0, Used: max(0, c.Limit-bal), Remaining: bal}
	if status != 0 {
		r.Cause = store.CauseCredits
	}
	if retry > 0 {
		r.RetryAfter = time.Duration(creditsRetry(c, retry, m, now)) * time.Microsecond
	}
	req.Results[i] = r
	return nil
}
