package memstore

import (
	"context"
	"math"
	"time"

	"github.com/sluicerate/sluice/store"
)

// Credits: a balance that decisions draw down by their cost. A credits
// window keeps its balance in used, the index of the period of its last
// refill (0 without a calendar) in oldest, and, in credit, the ids of the
// changes Credit applied. Its state exists from its first write: until
// then the balance is the check's Limit. A window never expires (a
// balance is money); its ids are forgotten after store.CreditIDTTL, and
// past the newest store.MaxCreditIDs.

var _ store.Crediter = (*Store)(nil)

// credit is the part of a credits window that other windows do not have:
// the ids of the changes it applied, oldest first.
type credit struct {
	ids []creditID
}

// creditID is the id of an applied change, and when it was applied (µs).
type creditID struct {
	id string
	at int64
}

// creditsIndex returns the index of the refill period now falls in: 0
// for a check without a calendar.
func creditsIndex(c *store.Check, now int64) int64 {
	if c.Calendar.IsZero() {
		return 0
	}
	idx, _, _ := c.Calendar.At(now)
	return idx
}

// creditsBalance returns the balance of w (nil: none), brought up to now
// by live.
func creditsBalance(c *store.Check, w *window) int64 {
	if w == nil || w.credit == nil {
		return c.Limit
	}
	return w.used
}

// creditsRoll applies to w the refills of the periods that began since
// its last one: To once, Add once per period.
func creditsRoll(w *window, c *store.Check, now int64) {
	if w.credit == nil || c.Calendar.IsZero() {
		return
	}
	idx := creditsIndex(c, now)
	if idx <= w.oldest {
		return
	}
	switch r := c.Refill; {
	case r.To > 0:
		w.used = r.To
	case r.Add > 0:
		n := idx - w.oldest
		if n > (store.MaxCost-w.used)/r.Add {
			w.used = store.MaxCost
		} else {
			w.used += n * r.Add
		}
	}
	w.oldest = idx
}

// creditsInit gives w, a window not yet written, a balance of c's Limit
// at the period of now.
func creditsInit(w *window, c *store.Check, now int64) {
	if w.credit != nil {
		return
	}
	w.credit = &credit{}
	w.used, w.oldest = c.Limit, creditsIndex(c, now)
	w.expires = math.MaxInt64
}

// creditsDraw returns a balance of bal once a decision draws cost from
// it: never below 0, which only a settle or a change asked for goes to.
func creditsDraw(bal, cost int64) int64 {
	switch {
	case bal >= cost:
		return bal - cost
	case bal > 0:
		return 0
	}
	return bal
}

func creditsCheck(res *store.Result, c *store.Check, w *window) {
	if creditsBalance(c, w) < c.Cost {
		res.Fits, res.Cause = false, store.CauseCredits
	}
}

// creditsWait returns how long from now until the balance of w (nil:
// none) has c's cost, after the decision drew it (pending) or not: until
// the refill that brings it there, store.MaxRetry when none will.
func creditsWait(c *store.Check, w *window, pending bool, now int64) int64 {
	bal := creditsBalance(c, w)
	if pending {
		bal = creditsDraw(bal, c.Cost)
	}
	if bal >= c.Cost {
		return 0
	}
	never := store.MaxRetry.Microseconds()
	r := c.Refill
	if c.Calendar.IsZero() || r.To == 0 && r.Add == 0 || r.To > 0 && r.To < c.Cost {
		return never
	}
	idx, _, end := c.Calendar.At(now)
	if r.To > 0 {
		return end - now
	}
	// The periods of Add it takes; past 2^16 of them (179 years of days)
	// is past MaxRetry.
	n := (c.Cost - bal + r.Add - 1) / r.Add
	if n > 1<<16 {
		return never
	}
	return min(c.Calendar.Start(idx+n)-now, never)
}

// creditsAdd draws c's cost from w as a decision does.
func creditsAdd(w *window, c *store.Check, now int64) {
	creditsInit(w, c, now)
	w.used = creditsDraw(w.used, c.Cost)
}

// creditsReport sets res's figures for the balance of w (nil: none), with
// c's cost drawn by a decision when pending: Remaining is the balance,
// Used what the Limit has lost of it.
func creditsReport(res *store.Result, c *store.Check, w *window, pending bool) {
	bal := creditsBalance(c, w)
	if pending {
		bal = creditsDraw(bal, c.Cost)
	}
	res.Remaining = bal
	res.Used = min(max(0, c.Limit-bal), store.MaxCost)
	res.ResetAfter = 0
}

// creditsMoot reports whether a refill To has set the balance of w since
// a lease drew from it in refill period at: the balance the draw came
// from is gone, and the refill owes nothing to it, so a settle or a
// release of that lease changes nothing (as a refill just after them
// would have undone what they changed).
func creditsMoot(c *store.Check, w *window, at int64) bool {
	return c.Refill.To > 0 && w.oldest > at
}

// creditsSettle takes delta more cost from w's balance (gives it back
// when negative), saturating at ±store.MaxCost: a settle records work
// that happened, so it may take the balance below 0.
func creditsSettle(w *window, delta int64) {
	w.used = min(max(w.used-delta, -store.MaxCost), store.MaxCost)
}

// Credit implements store.Crediter.
func (s *Store) Credit(ctx context.Context, req *store.CreditRequest) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	if err := store.CheckCredit(req); err != nil {
		return err
	}
	c := &req.Check
	if err := store.CheckQuotas([]store.Check{{Rule: c.Rule, Algorithm: c.Algorithm, Calendar: c.Calendar, Refill: c.Refill}}); err != nil {
		return err // the check alone: what it covers is not in the request
	}
	k := key{policy: req.Policy, rule: c.Rule, values: encodeValues(c.Values)}
	h := k.hash(s.seed)
	sh := &s.shards[h&s.mask]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := s.micros()
	j, _ := sh.live(h, &k, c, now)
	w := sh.at(j)
	req.Applied = false
	if req.Op != store.CreditGet && (w == nil || !w.credit.applied(req.ID, now)) {
		if w == nil {
			w = &window{h: h}
			creditsInit(w, c, now)
			sh.enqueue(w, expiryClass(c))
			sh.insert(&k, w)
		}
		creditsInit(w, c, now)
		if req.Op == store.CreditSet {
			w.used = req.Amount
		} else {
			w.used = min(max(w.used+req.Amount, -store.MaxCost), store.MaxCost)
		}
		w.credit.remember(req.ID, now)
		req.Applied = true
	}
	req.Balance = creditsBalance(c, w)
	req.NextRefill = 0
	if r := c.Refill; !c.Calendar.IsZero() && (r.To > 0 || r.Add > 0) {
		_, _, end := c.Calendar.At(now)
		req.NextRefill = time.Duration(end-now) * time.Microsecond
	}
	return nil
}

// applied reports whether cr (nil: none) remembers a change of id at
// now: one applied less than store.CreditIDTTL ago, among the newest
// store.MaxCreditIDs.
func (cr *credit) applied(id string, now int64) bool {
	if cr == nil || id == "" {
		return false
	}
	since := now - store.CreditIDTTL.Microseconds()
	for i := len(cr.ids) - 1; i >= 0; i-- {
		if cr.ids[i].at <= since {
			return false
		}
		if cr.ids[i].id == id {
			return true
		}
	}
	return false
}

// remember keeps id (none when empty) as applied at now, forgetting the
// ids past store.CreditIDTTL and the oldest past store.MaxCreditIDs.
func (cr *credit) remember(id string, now int64) {
	since := now - store.CreditIDTTL.Microseconds()
	drop := 0
	for drop < len(cr.ids) && (cr.ids[drop].at <= since || len(cr.ids)-drop >= store.MaxCreditIDs) {
		drop++
	}
	if drop > 0 {
		n := copy(cr.ids, cr.ids[drop:])
		clear(cr.ids[n:])
		cr.ids = cr.ids[:n]
	}
	if id != "" {
		cr.ids = append(cr.ids, creditID{id: id, at: now})
	}
}
