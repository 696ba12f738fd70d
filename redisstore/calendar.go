package redisstore

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/sluicerate/sluice/store"
)

// Calendar quotas and credits (store.Periodic, store.Credits).
//
//	<prefix>:{<hash tag>}2p:<rule>[:<values>]     a calendar quota's count: "<index>:<count>"
//	<prefix>:{<hash tag>}!h2p:<rule>[:<values>]   its history: a list of "<index>:<total>"
//	<prefix>:{<hash tag>}2b:<rule>[:<values>]     a credits balance: "<balance>:<index>"
//	<prefix>:{<hash tag>}!i2b:<rule>[:<values>]   the ids of the changes Credit applied
//
// periodic.lua and credits.lua are their codecs. Lua has no time zones, so
// a shape carries, per calendar rule, the index k of the period this
// process's clock is in (store.Calendar) and the starts of periods k-1 to
// k+2; the script takes the period its own clock (Redis's TIME) is in among
// k-1, k and k+1. A history and the ids live beside their window, in its
// hash tag: a decision declares a history's key after its rules' keys, as
// a budgeted window's slices (withSlices); the ids are read by Credit alone.

var (
	_ store.Crediter  = (*Store)(nil)
	_ store.Historian = (*Store)(nil)
)

// Marks after a window key's hash tag in the key of its history and of its
// credits' ids (as slicesMark).
const (
	historyMark = "!h"
	idsMark     = "!i"
)

// keepsHistory reports whether c's window keeps its past periods' totals
// in a key of their own.
func keepsHistory(c *store.Check) bool {
	return c.Algorithm == store.Periodic && c.History > 0
}

// besideKey returns the key that mark names beside the window at key.
func (n namer) besideKey(key, mark string) string {
	tag := n.tagOf(key)
	return tag + mark + key[len(tag):]
}

// periods is what a shape says of a calendar at an instant: the index k
// of the period it falls in and the starts of periods k-1 to k+2 (µs).
type periods struct{ k, s0, s1, s2, s3 int64 }

// periodsOf returns cal's periods at now (µs).
func periodsOf(cal store.Calendar, now int64) periods {
	k, start, end := cal.At(now)
	return periods{k: k, s0: cal.Start(k - 1), s1: start, s2: end, s3: cal.Start(k + 2)}
}

// maxCachedCalendars bounds periodsCache: past it, the cache starts over.
const maxCachedCalendars = 256

// periodsCache holds, per calendar, the periods a shape last carried, so
// that the decisions of one period cost a map read instead of five time
// zone conversions. An entry answers for any instant in [s1, s2), where
// its index k is the period's by definition; an instant outside computes
// its periods and replaces the entry. Calendars are compared by their
// Location's pointer, so one zone loaded twice is cached twice.
var periodsCache struct {
	mu sync.RWMutex
	m  map[store.Calendar]periods
}

// cachedPeriods returns cal's periods at now (µs) from periodsCache,
// computing and caching them when the cached ones are of another period.
func cachedPeriods(cal store.Calendar, now int64) periods {
	periodsCache.mu.RLock()
	p, ok := periodsCache.m[cal]
	periodsCache.mu.RUnlock()
	if ok && p.s1 <= now && now < p.s2 {
		return p
	}
	p = periodsOf(cal, now)
	periodsCache.mu.Lock()
	if periodsCache.m == nil || len(periodsCache.m) >= maxCachedCalendars {
		periodsCache.m = make(map[store.Calendar]periods)
	}
	periodsCache.m[cal] = p
	periodsCache.mu.Unlock()
	return p
}

// appendPeriods appends to a shape the index k of the period of cal at now
// (µs; below 0: this process's clock) and the starts of periods k-1 to
// k+2.
func appendPeriods(b []byte, cal store.Calendar, now int64) []byte {
	if cal.IsZero() {
		for range 5 {
			b = binary.LittleEndian.AppendUint64(b, 0)
		}
		return b
	}
	if now < 0 {
		now = time.Now().UnixMicro()
	}
	p := cachedPeriods(cal, now)
	b = binary.LittleEndian.AppendUint64(b, uint64(p.k))
	b = binary.LittleEndian.AppendUint64(b, uint64(p.s0))
	b = binary.LittleEndian.AppendUint64(b, uint64(p.s1))
	b = binary.LittleEndian.AppendUint64(b, uint64(p.s2))
	return binary.LittleEndian.AppendUint64(b, uint64(p.s3))
}

// appendCalendarRule appends to a shape what a calendar quota's or a
// credits rule's c adds after the four numbers every rule has, at now
// (shapeOf's); checks are the indexes of the shape's rules in the request.
func appendCalendarRule(b []byte, c *store.Check, now int64, checks []int) []byte {
	b = appendPeriods(b, c.Calendar, now)
	if c.Algorithm == store.Periodic {
		return binary.LittleEndian.AppendUint32(b, uint32(c.History))
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(c.Refill.To))
	b = binary.LittleEndian.AppendUint64(b, uint64(c.Refill.Add))
	var covers uint32
	for j, i := range checks {
		if c.Covers > 0 && i == c.Covers-1 {
			covers = uint32(j + 1)
		}
	}
	b = binary.LittleEndian.AppendUint32(b, covers)
	var cal uint32
	if !c.Calendar.IsZero() {
		cal = 1
	}
	return binary.LittleEndian.AppendUint32(b, cal)
}

// checkQuotas reports why the store cannot decide req's calendar and
// credits checks as planned (pl, of several slot groups): a credits check
// must share a slot group with the calendar quota it covers, so one script
// call decides both.
// (store.CheckQuotas has checked the rest.)
func checkQuotas(req *store.Request, pl *plan) error {
	for i := range req.Checks {
		c := &req.Checks[i]
		if c.Covers <= 0 {
			continue
		}
		if len(pl.groups) > 1 && pl.groupOf(i) != pl.groupOf(c.Covers-1) {
			return fmt.Errorf("redisstore: policy %q: credits rule %q and the calendar quota %q it covers fall into different slot groups (Slots is SlotsPerRule and they go by different attributes); give them the same attributes, or use SlotsShared",
				req.Policy, c.Rule, req.Checks[c.Covers-1].Rule)
		}
	}
	return nil
}

// groupOf returns the index of the group of pl holding check i.
func (pl *plan) groupOf(i int) int {
	for g := range pl.groups {
		for _, j := range pl.groups[g].checks {
			if j == i {
				return g
			}
		}
	}
	return -1
}

// creditsRetry returns the RetryAfter of a credits check denied with
// retry µs to the next period's start and m periods until a refill makes
// its cost fit (decide.lua's reply): retry when m is 1, else retry plus the
// m-1 periods after the next, which this process's calendar counts. The
// next period is the one at now + retry, now this process's time (µs), and
// at most 11 hours from the store's: less than half the shortest period
// (a day of 23 hours), so that the next period's index is certain.
func creditsRetry(c *store.Check, retry, m, now int64) int64 {
	if m <= 1 || c.Calendar.IsZero() {
		return retry
	}
	next, start, _ := c.Calendar.At(now + retry + (11 * time.Hour).Microseconds())
	if m-1 > (store.MaxRetry.Microseconds()-retry)/(23*time.Hour).Microseconds() {
		return store.MaxRetry.Microseconds()
	}
	return min(retry+c.Calendar.Start(next+m-1)-start, store.MaxRetry.Microseconds())
}

// Credit implements store.Crediter: one round trip runs credit.lua (a
// function of the store's library where the server has functions) over
// the balance and the ids of its changes, in the balance's slot.
func (s *Store) Credit(ctx context.Context, req *store.CreditRequest) error {
	c := req.Check
	c.Covers = 0 // the balance alone: what it pays for is a decision's
	one := store.Request{Policy: req.Policy, Shared: req.Shared, Checks: []store.Check{c}}
	bad := store.CheckCredit(req)
	if bad == nil {
		bad = store.CheckQuotas(one.Checks)
	}
	reply, err := s.runOne(ctx, bad, creditFunction, creditScript, &one, s.nowMicros(), idsMark,
		strconv.Itoa(int(req.Op)), strconv.FormatInt(req.Amount, 10), req.ID)
	if err != nil {
		return err
	}
	if len(reply) != 3 || reply[1] != 0 && reply[1] != 1 || reply[2] < 0 {
		return fmt.Errorf("redisstore: credit.lua replied %v, want {balance, 0 or 1, µs to the next refill}", reply)
	}
	req.Balance, req.Applied, req.NextRefill = reply[0], reply[1] == 1, time.Duration(reply[2])*time.Microsecond
	return nil
}

// Usage implements store.Historian: one round trip runs usage.lua (a
// function of the store's library where the server has functions) over
// the window's count and its history, in the window's slot.
func (s *Store) Usage(ctx context.Context, req *store.UsageRequest) error {
	c := req.Check
	one := store.Request{Policy: req.Policy, Shared: req.Shared, Checks: []store.Check{c}}
	mark := ""
	if keepsHistory(&c) {
		mark = historyMark
	}
	reply, err := s.runOne(ctx, store.CheckUsage(req), usageFunction, usageScript, &one, cmp.Or(req.At, s.nowMicros()), mark)
	if err != nil {
		return err
	}
	if len(reply)%2 != 1 {
		return fmt.Errorf("redisstore: usage.lua replied %d integers, want the period's index and pairs of index and count", len(reply))
	}
	cur := reply[0]
	req.Periods = req.Periods[:0]
	for j := range c.History + 1 {
		idx := cur - int64(j)
		start, end := c.Calendar.Bounds(idx)
		p := store.PeriodUsage{Index: idx, Start: start, End: end}
		for at := 1; at < len(reply); at += 2 {
			if reply[at] == idx {
				p.Used = reply[at+1]
				break
			}
		}
		req.Periods = append(req.Periods, p)
	}
	return nil
}

// runOne runs f (sc where the server has no functions) over the window of
// one's only check, for Credit and Usage. It first returns ErrClosed when
// the store is closed, ctx's error when ctx has ended, then bad (the
// request's own validation) when it is not nil. The keys are the window's
// and, when mark is not empty, the key beside it that mark names; the
// arguments the check's shape at now (µs; below 0: Redis's clock), then
// args.
func (s *Store) runOne(ctx context.Context, bad error, f *function, sc *script, one *store.Request, now int64, mark string, args ...string) ([]int64, error) {
	if s.closed.Load() {
		return nil, store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if bad != nil {
		return nil, bad
	}
	key := s.names.plan(one).keys[0]
	keys := []string{key}
	if mark != "" {
		keys = append(keys, s.names.besideKey(key, mark))
	}
	return s.runFunction(ctx, f, sc, keys, append([]string{shapeOf(0, one, now, firstChecks(1))}, args...))
}
