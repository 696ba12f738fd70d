package redisstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sluicerate/sluice/store"
)

// Leases. Acquire runs lease.lua and Finish finish.lua, one round trip
// each, over the request's keys and the lease's record, all in the slot of
// the request's hash tag:
//
//	<prefix>:{<hash tag>}2n:<rule>[:<values>]   a concurrency rule's window
//	<prefix>:{<hash tag>}2e:<token>              a lease's record
//
// A concurrency window is a sorted set of the tokens of the leases alive,
// scored by their expiry (concurrency.lua); a record is a hash of the
// lease's id, estimate, expiry and receipts (lease.lua), or, for a lease
// abandoned before it was taken, a tombstone (finish.lua). A lease's token
// is 32 hex digits of the SHA-256 of its id: the id's random part makes it
// unique, and an id altered to name other windows has another token. The
// kinds n and e (keys.go) keep both from ever sharing a key with another
// kind's.
//
// A policy whose windows fall into several slot groups (Config.Slots
// SlotsPerRule, with rules of different attributes) cannot be leased: its
// lease would not be one atomic step. The scripts run as decide.lua's do
// (routed by the slot map, acknowledged by replicas with
// Config.WaitForReplicas).

var _ store.Leaser = (*Store)(nil)

// leaseKind is Layout2's letter for a lease's record.
const leaseKind = 'e'

// leaseToken returns the token of the lease id.
func leaseToken(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:16])
}

// leaseKey returns the key of the record of the lease of token whose
// windows' first key is first (of policy): in first's slot.
func (n namer) leaseKey(first, policy, token string) string {
	tag := first[:len(n.prefix)+strings.IndexByte(first[len(n.prefix):], '}')+1]
	if n.layout == Layout1 {
		// "@lease" cannot be an encoded rule name: '@' is percent-encoded.
		return tag + ":" + string(appendPart(nil, policy)) + ":@lease:" + token
	}
	return tag + "2" + string(leaseKind) + ":" + token
}

// leasePlan returns the keys of req's windows and its lease's record, or
// why the request cannot be leased.
func (s *Store) leasePlan(req *store.Request, id string) (keys []string, token string, err error) {
	pl := s.names.plan(req)
	if len(pl.groups) > 1 {
		if err := checkQuotas(req, &pl); err != nil {
			return nil, "", notLeasable{err} // the reason Decide gives
		}
		return nil, "", fmt.Errorf("redisstore: policy %q: its windows fall into %d slot groups (Slots is SlotsPerRule and its rules go by different attributes); a lease's windows must share one slot: lease a policy whose rules share their attributes, or use SlotsShared: %w",
			req.Policy, len(pl.groups), store.ErrNotLeasable)
	}
	token = leaseToken(id)
	return append(pl.keys, s.names.leaseKey(pl.keys[0], req.Policy, token)), token, nil
}

// notLeasable is the error of a request a lease cannot be taken on, for
// the reason its error says: its message is that error's, and it matches
// store.ErrNotLeasable too.
type notLeasable struct{ error }

func (e notLeasable) Unwrap() []error { return []error{e.error, store.ErrNotLeasable} }

// Acquire implements store.Leaser: one round trip runs lease.lua (a
// function of the store's library where the server has functions), which
// decides the request as decide.lua does and, when it is admitted, holds
// the lease, on the Redis server's clock (or Config.Clock). An error may
// leave the lease held or not, or the call may run later: it is never sent
// again, and a lease held so expires with its lease time unless a Finish
// abandons it (store.LeaseAbandon). An id abandoned or acquired before
// takes nothing (lease.lua reads its record first: one HMGET).
func (s *Store) Acquire(ctx context.Context, req *store.Request, lease *store.LeaseGrant) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := store.CheckQuotas(req.Checks); err != nil {
		return err
	}
	keys, token, err := s.leasePlan(req, lease.ID)
	if err != nil {
		return err
	}
	var cost int64 = 1
	for i := range req.Checks {
		if req.Checks[i].Algorithm != store.Concurrency {
			cost = req.Checks[i].Cost
			break
		}
	}
	all := firstChecks(len(req.Checks))
	if w := s.names.withSlices(req, all, keys[:len(all)]); len(w) > len(all) {
		keys = append(w, keys[len(all)]) // the budgeted rules' slices, then the record (lease.lua)
	}
	now := s.nowMicros()
	sh := shapeOf(modeOf(req)|modeGroup, req, now, all)
	args := []string{sh, token, lease.ID, strconv.FormatInt(lease.TTL.Microseconds(), 10), strconv.FormatInt(cost, 10)}
	reply, err := s.runFunction(ctx, leaseFunction, leaseScript, keys, args)
	if err != nil {
		return err
	}
	lease.Expires = time.Time{}
	if len(reply) == 1 && reply[0] == -1 {
		// The id was abandoned (or acquired) before this call ran.
		store.DenyAbandoned(req)
		return nil
	}
	n := len(req.Checks) * groupRuleWidth
	if len(reply) != n+1 {
		return fmt.Errorf("redisstore: lease.lua replied %d integers for %d rules, want %d", len(reply), len(req.Checks), n+1)
	}
	if err := parseResults(req, reply[:n], nil, groupRuleWidth, now); err != nil {
		return err
	}
	if exp := reply[n]; exp != 0 {
		lease.Expires = time.UnixMicro(exp)
	}
	return nil
}

// Finish implements store.Leaser: one round trip runs finish.lua. An
// abandon of a lease not alive leaves a tombstone at the lease's record's
// key (its id, and its expiry in the field dead) for its lease time.
func (s *Store) Finish(ctx context.Context, req *store.FinishRequest) (store.LeaseState, error) {
	if s.closed.Load() {
		return store.LeaseState{}, store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return store.LeaseState{}, err
	}
	dreq := &store.Request{Policy: req.Policy, Shared: req.Shared, Checks: req.Checks}
	keys, token, err := s.leasePlan(dreq, req.ID)
	if err != nil {
		return store.LeaseState{}, err
	}
	all := firstChecks(len(req.Checks))
	if w := s.names.withSlices(dreq, all, keys[:len(all)]); len(w) > len(all) {
		keys = append(w, keys[len(all)]) // as Acquire declared them (finish.lua)
	}
	sh := shapeOf(0, dreq, s.nowMicros(), all)
	args := []string{sh, strconv.Itoa(int(req.Op)), strconv.FormatInt(req.Cost, 10),
		strconv.FormatInt(req.TTL.Microseconds(), 10), req.ID, token}
	reply, err := s.runFunction(ctx, finishFunction, finishScript, keys, args)
	if err != nil {
		return store.LeaseState{}, err
	}
	if len(reply) != 2 || reply[0] != 0 && reply[0] != 1 || reply[1] < 0 {
		return store.LeaseState{}, fmt.Errorf("redisstore: finish.lua replied %v, want {0 or 1, expiry}", reply)
	}
	st := store.LeaseState{Held: reply[0] == 1}
	if reply[1] > 0 {
		st.Expires = time.UnixMicro(reply[1])
	}
	return st, nil
}
