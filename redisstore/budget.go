package redisstore

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"time"

	"github.com/sluicerate/sluice/store"
)

// Budgets (store.Budgeter). Budget runs budget.lua: one round trip that
// gives back the returned slices, decides the request as decide.lua does,
// and grants the asks from the room their windows have left, at one time.
// A budgeted log or GCRA bucket keeps its slices in a sorted set beside its
// key, in its hash tag (slices.lua):
//
//	<prefix>:{<hash tag>}!s2l:<rule>[:<values>]   a budgeted log's slices
//	<prefix>:{<hash tag>}!s2g:<rule>[:<values>]   a budgeted bucket's holds
//
// A sliding counter keeps its slices as cost in its current bucket. Every
// decision of a budgeted window, by Budget or by Decide, counts its slices:
// the shape marks its rule budgeted (kindBudgeted), and the call declares
// the slices' key after the rules' keys (withSlices), as Redis asks of every
// key a script touches.
//
// A call whose keys fall in one slot (SlotsShared, or SlotsPerRule with
// rules that share their attributes) is one atomic step. One whose keys
// fall in several slots (SlotsPerRule) goes in parts, each atomic: the
// returns, one call per slot; the request, by Decide (one slot group, or
// crossslot.go's reserve / commit / rollback); then, when it was admitted,
// the asks, one call per slot, each granting from the room its window has
// at that call. The parts stay one-sided: a return only adds room, and a
// grant takes only the room its window has when it is made, counted in the
// store before any of it is admitted; what a failure between the parts
// costs is room (a return not made, a slice not granted), never an
// admission beyond the limit.

var _ store.Budgeter = (*Store)(nil)

// keepsSlices reports whether c's window keeps its slices in a key of
// their own: a budgeted log or GCRA bucket.
func keepsSlices(c *store.Check) bool {
	return c.Budget > 0 && (c.Algorithm == store.Log || c.Algorithm == store.GCRA)
}

// slicesMark follows a window key's hash tag in the key of its slices.
const slicesMark = "!s"

// slicesKey returns the key of the slices of the window at key: slicesMark
// after its hash tag, where no other key of the store has it.
func (n namer) slicesKey(key string) string {
	tag := n.tagOf(key)
	return tag + slicesMark + key[len(tag):]
}

// windowOfSlices returns the key of the window whose slices are at key,
// a key slicesKey returned.
func (n namer) windowOfSlices(key string) string {
	tag := n.tagOf(key)
	return tag + strings.TrimPrefix(key[len(tag):], slicesMark)
}

// withSlices returns keys, those of req's checks whose indexes are checks,
// followed by the slices key of each of them that keeps slices and the
// history key of each calendar quota that keeps history, in order
// (decision.lua's shape): every key a script deciding them touches. It
// returns keys itself when none does.
func (n namer) withSlices(req *store.Request, checks []int, keys []string) []string {
	var out []string
	for j, i := range checks {
		c := &req.Checks[i]
		if keepsSlices(c) || keepsHistory(c) {
			if out == nil {
				out = append(make([]string, 0, 2*len(keys)), keys...)
			}
			if keepsHistory(c) {
				out = append(out, n.besideKey(keys[j], historyMark))
			} else {
				out = append(out, n.slicesKey(keys[j]))
			}
		}
	}
	if out == nil {
		return keys
	}
	return out
}

// Sizes of budget.lua's packed returns and asks, and the integers it
// replies per ask.
const (
	sliceReturnSize = 4 + 6*8
	sliceAskSize    = 4 + 2*8
	grantWidth      = 5
)

// sliceKinds are budget.lua's numbers of a returned slice's algorithm.
var sliceKinds = [...]int32{store.Log: 0, store.GCRA: 1, store.SlidingCounter: 2, store.Concurrency: -1, store.Periodic: -1, store.Credits: -1}

// Budget implements store.Budgeter.
func (s *Store) Budget(ctx context.Context, req *store.Request, b *store.BudgetRequest) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := store.CheckDecide(req); err != nil {
		return err
	}
	if err := store.CheckBudget(req, b); err != nil {
		return err
	}
	pl := s.names.plan(req)
	rkeys := make([]string, len(b.Returns))
	for i := range b.Returns {
		r := &b.Returns[i]
		one := store.Request{Policy: req.Policy, Shared: r.Shared, Checks: []store.Check{r.Check}}
		rkeys[i] = s.names.plan(&one).keys[0]
	}
	b.GrantsBuffer()
	now := s.nowMicros()
	if len(pl.groups) <= 1 && s.oneTag(pl.keys, rkeys) {
		req.ResultsBuffer()
		return s.budgetCall(ctx, req, firstChecks(len(req.Checks)), pl.keys, 0, b.Returns, rkeys, b.Asks, b.Grants, now)
	}
	return s.budgetParts(ctx, req, b, pl, rkeys, now)
}

// oneTag reports whether keys and more all share one hash tag.
func (s *Store) oneTag(keys, more []string) bool {
	var tag string
	for _, list := range [2][]string{keys, more} {
		for _, k := range list {
			t := s.names.tagOf(k)
			if tag == "" {
				tag = t
			} else if t != tag {
				return false
			}
		}
	}
	return true
}

// tagOf returns key up to the end of its hash tag.
func (n namer) tagOf(key string) string {
	return key[:len(n.prefix)+strings.IndexByte(key[len(n.prefix):], '}')+1]
}

// budgetCall runs budget.lua over req's checks whose indexes are checks
// (keys theirs) in mode, with returns (rkeys theirs) and asks (each ask's
// Check an index in checks), setting the checks' results (unless mode is
// dry) and grants.
func (s *Store) budgetCall(ctx context.Context, req *store.Request, checks []int, keys []string, mode int32,
	returns []store.SliceReturn, rkeys []string, asks []store.SliceAsk, grants []store.Grant, now int64) error {
	rb := make([]byte, 0, sliceReturnSize*len(returns))
	for i := range returns {
		r := &returns[i]
		rb = binary.LittleEndian.AppendUint32(rb, uint32(sliceKinds[r.Check.Algorithm]))
		for _, v := range [...]int64{r.Check.Window.Microseconds(), r.Check.Limit, r.Start, r.End, r.Granted, r.Used} {
			rb = binary.LittleEndian.AppendUint64(rb, uint64(v))
		}
	}
	ab := make([]byte, 0, sliceAskSize*len(asks))
	for _, a := range asks {
		ab = binary.LittleEndian.AppendUint32(ab, uint32(a.Check))
		ab = binary.LittleEndian.AppendUint64(ab, uint64(a.Want))
		ab = binary.LittleEndian.AppendUint64(ab, uint64(req.Checks[checks[a.Check]].Budget.Microseconds()))
	}
	args := make([]string, 0, 3+len(returns)+len(asks))
	args = append(args, shapeOf(mode, req, now, checks), string(rb), string(ab))
	for i := range returns {
		args = append(args, returns[i].ID)
	}
	for _, a := range asks {
		args = append(args, a.ID)
	}
	all := s.names.withSlices(req, checks, keys)
	if len(rkeys) > 0 {
		all = append(make([]string, 0, len(all)+2*len(rkeys)), all...)
		for _, k := range rkeys {
			all = append(all, k, s.names.slicesKey(k))
		}
	}
	reply, err := s.runFunction(ctx, budgetFunction, budgetScript, all, args)
	if err != nil {
		return err
	}
	n := ruleWidth * len(checks)
	if len(reply) != n+grantWidth*len(asks) {
		return fmt.Errorf("redisstore: budget.lua replied %d integers for %d rules and %d asks, want %d", len(reply), len(checks), len(asks), n+grantWidth*len(asks))
	}
	if mode&modeDry == 0 {
		if err := parseResults(req, reply[:n], checks, ruleWidth, now); err != nil {
			return err
		}
	}
	for k, a := range asks {
		v, c := reply[n+grantWidth*k:n+grantWidth*(k+1)], &req.Checks[checks[a.Check]]
		granted, start, end, used, reset := v[0], v[1], v[2], v[3], v[4]
		if granted < 0 || granted > a.Want || end < start || used < 0 || reset < 0 {
			return fmt.Errorf("redisstore: budget.lua replied granted=%d start=%d end=%d used=%d reset=%dµs for an ask of %d of rule %q, not a grant",
				granted, start, end, used, reset, a.Want, c.Rule)
		}
		remaining := max(0, c.Limit-used)
		if c.Algorithm == store.GCRA {
			remaining = 0
			if c.Limit > 0 {
				remaining = max(0, c.Burst-used)
			}
		}
		grants[k] = store.Grant{Granted: granted, Start: start, End: end, Life: time.Duration(end-start) * time.Microsecond,
			Result: store.Result{Used: used, Remaining: remaining, ResetAfter: time.Duration(reset) * time.Microsecond}}
	}
	return nil
}

// budgetParts runs Budget over keys in several slots: the returns, one call
// per slot; the request by Decide; the asks, when it is admitted, one call
// per slot (see the top of this file).
func (s *Store) budgetParts(ctx context.Context, req *store.Request, b *store.BudgetRequest, pl plan, rkeys []string, now int64) error {
	none := &store.Request{Policy: req.Policy}
	for done := make([]bool, len(b.Returns)); ; {
		var rets []store.SliceReturn
		var keys []string
		tag := ""
		for i := range b.Returns {
			if done[i] || tag != "" && s.names.tagOf(rkeys[i]) != tag {
				continue
			}
			tag, done[i] = s.names.tagOf(rkeys[i]), true
			rets, keys = append(rets, b.Returns[i]), append(keys, rkeys[i])
		}
		if tag == "" {
			break
		}
		if err := s.budgetCall(ctx, none, nil, nil, 0, rets, keys, nil, nil, now); err != nil {
			return err
		}
	}
	if len(req.Checks) > 0 {
		d := *req
		d.Mode, d.DryRun = store.ModeAllow, false
		if err := s.Decide(ctx, &d); err != nil {
			return err
		}
		req.Results = d.Results
		for i := range req.Checks {
			if !req.Results[i].Fits && !req.Checks[i].Shadow {
				for a := range b.Grants {
					b.Grants[a].Start = max(now, 0)
				}
				return nil
			}
		}
	}
	// The asks' windows, read at cost 0 in dry mode: the request was
	// decided above.
	peek := store.Request{Policy: req.Policy, Shared: req.Shared, Checks: append([]store.Check(nil), req.Checks...)}
	for i := range peek.Checks {
		peek.Checks[i].Cost = 0
	}
	for done := make([]bool, len(b.Asks)); ; {
		var checks, which []int
		var keys []string
		var asks []store.SliceAsk
		tag := ""
		for a, ask := range b.Asks {
			k := pl.keys[ask.Check]
			if done[a] || tag != "" && s.names.tagOf(k) != tag {
				continue
			}
			tag, done[a] = s.names.tagOf(k), true
			asks = append(asks, store.SliceAsk{Check: len(checks), Want: ask.Want, ID: ask.ID})
			checks, keys, which = append(checks, ask.Check), append(keys, k), append(which, a)
		}
		if tag == "" {
			return nil
		}
		grants := make([]store.Grant, len(asks))
		if err := s.budgetCall(ctx, &peek, checks, keys, modeDry, nil, nil, asks, grants, now); err != nil {
			return err
		}
		for k, a := range which {
			b.Grants[a] = grants[k]
		}
	}
}
