package sluice

import (
	"fmt"
	"slices"
	"time"

	"github.com/sluicerate/sluice/store"
)

// Calendar quotas and credits as rules. A calendar quota is a rule with a
// Period (its Algorithm left at the default): the store counts it as a
// store.Periodic check whose Calendar is the rule's period in its
// Location, and whose Window is store.MaxPeriodLength, the longest a
// period lasts. A credits rule is a rule whose Algorithm is Credits: a
// store.Credits check whose Calendar is its Refill's period (none without
// a refill) and whose Window, unused, is 1µs. Covers links a credits rule
// to a calendar quota before it in its policy, with the same By: the
// check of the quota is the one the credits check's Covers names, and a
// request the quota does not apply to (a condition, an unlimited
// override) is not checked against the credits either, since the quota
// then has room for it.

// quota reports whether r is a calendar quota or a credits rule.
func (r *Rule) quota() bool { return r.Period != noPeriod || r.Algorithm == Credits }

// noPeriod is the zero Period: a rule that is not a calendar quota, a
// credits balance that never refills.
const noPeriod = store.NoPeriod

// storeAlgorithm returns the algorithm of r's checks.
func (r *Rule) storeAlgorithm() store.Algorithm {
	switch {
	case r.concurrent():
		return store.Concurrency
	case r.Period != noPeriod:
		return store.Periodic
	}
	return r.Algorithm
}

// calendarWindow is the Window of a calendar quota's checks, and
// creditsWindow that of a credits rule's.
const (
	calendarWindow = store.MaxPeriodLength
	creditsWindow  = time.Microsecond
)

// setQuota sets the fields of c, a check of r, that a calendar quota or a
// credits rule has: its calendar, history and refill. covers is the index
// plus one of the check of the quota r covers, 0 for none.
func (r *Rule) setQuota(c *store.Check, covers int) {
	switch {
	case r.Period != noPeriod:
		c.Algorithm, c.Window = store.Periodic, calendarWindow
		c.Calendar = store.Calendar{Period: r.Period, Location: r.Location, WeekStart: r.WeekStart}
		c.History = r.History
	case r.Algorithm == Credits:
		c.Window, c.Covers = creditsWindow, covers
		c.Refill = store.Refill{To: r.Refill.To, Add: r.Refill.Add}
		if r.Refill.Every != noPeriod {
			c.Calendar = store.Calendar{Period: r.Refill.Every, Location: r.Location, WeekStart: r.WeekStart}
		}
	}
}

// validateQuota reports why r, a calendar quota or a credits rule, cannot
// be enforced, or nil.
func (r *Rule) validateQuota() error {
	kind := "a calendar quota"
	if r.Algorithm == Credits {
		kind = "a credits rule"
	}
	switch {
	case r.Period != noPeriod && r.Algorithm == Credits:
		return fmt.Errorf("a credits rule has no period of its own; its refill has one (refill: {to: N, every: month}), or make it a calendar quota without credits")
	case r.Period > Year:
		return fmt.Errorf("unknown period %v; use day, week, month or year", r.Period)
	case r.Period != noPeriod && r.Algorithm != Log:
		return fmt.Errorf("a calendar quota counts per period and takes no algorithm (it has %v); leave algorithm out", r.Algorithm)
	case r.Limit < 0:
		return fmt.Errorf("limit %d is negative; use 0 to block, or a positive limit", r.Limit)
	case r.Limit > MaxCost:
		return fmt.Errorf("limit %d is more than 2^53 (%d), the most sluice counts", r.Limit, int64(MaxCost))
	case r.Window != 0:
		return fmt.Errorf("%s takes no window (it has %v): %s; leave window out", kind, r.Window, quotaWindowReason(r))
	case r.MinGap != 0 || r.Burst != 0:
		return fmt.Errorf("%s takes no min gap or burst; put them in a rule of their own beside it", kind)
	case r.Spread != 0 || r.SpreadBy != "":
		return fmt.Errorf("%s cannot be spread: its count is one per key", kind)
	case r.Budget != 0:
		return fmt.Errorf("%s cannot be budgeted; leave budget out", kind)
	case r.Concurrency != 0 || r.Lease != 0:
		return fmt.Errorf("%s is not a concurrency rule; put concurrency and lease in a rule of their own beside it", kind)
	case r.WeekStart < time.Sunday || r.WeekStart > time.Saturday:
		return fmt.Errorf("week start %d is not a day of the week (0 Sunday to 6 Saturday)", r.WeekStart)
	}
	if r.Period != noPeriod {
		switch {
		case r.WeekStart != time.Sunday && r.Period != Week:
			return fmt.Errorf("a week start is for period week; this quota's period is %v: leave week_start out", r.Period)
		case r.History < 0 || r.History > MaxHistory:
			return fmt.Errorf("history %d; keep 0 to %d periods", r.History, MaxHistory)
		case r.Refill != (Refill{}) || r.Covers != "":
			return fmt.Errorf("refill and covers are a credits rule's (credits: N, algorithm Credits); a calendar quota starts from 0 each period")
		}
		return nil
	}
	f := r.Refill
	switch {
	case r.History != 0:
		return fmt.Errorf("history is a calendar quota's (period: month, say); a credits rule keeps a balance, not periods")
	case f.To < 0 || f.Add < 0 || f.To > MaxCost || f.Add > MaxCost:
		return fmt.Errorf("refill to %d, add %d; give 1 to 2^53", f.To, f.Add)
	case f.To > 0 && f.Add > 0:
		return fmt.Errorf("refill has both to (%d) and add (%d); keep to, to renew the balance, or add, to roll it over", f.To, f.Add)
	case (f.To > 0 || f.Add > 0) && f.Every == noPeriod:
		return fmt.Errorf("refill has no period; say every: day, week, month or year")
	case f.Every != noPeriod && f.To == 0 && f.Add == 0:
		return fmt.Errorf("refill every %v has neither to nor add; give to: N (the balance each period starts at) or add: N (what each period adds)", f.Every)
	case f.Every > Year:
		return fmt.Errorf("unknown refill period %v; use day, week, month or year", f.Every)
	case r.WeekStart != time.Sunday && f.Every != Week:
		return fmt.Errorf("a week start is for a refill every week; leave week_start out")
	case r.Location != nil && f.Every == noPeriod:
		return fmt.Errorf("a time zone is for a refill's period; this credits rule has no refill: leave the time zone out")
	}
	return nil
}

// quotaWindowReason says what stands for a window in r.
func quotaWindowReason(r *Rule) string {
	if r.Period != noPeriod {
		return fmt.Sprintf("its period, %v, is its window", r.Period)
	}
	return "a balance lasts until it is spent"
}

// validateNotQuota reports a field of calendar quotas and credits rules on
// r, which is neither, or nil.
func (r *Rule) validateNotQuota() error {
	switch {
	case r.Algorithm == store.Periodic || r.Algorithm == store.Concurrency:
		return fmt.Errorf("unknown algorithm %v; a calendar quota is a rule with a period, a concurrency rule one with a concurrency", r.Algorithm)
	case r.Location != nil || r.WeekStart != 0 || r.History != 0:
		return fmt.Errorf("a time zone, week start or history is for a calendar quota (a period: day, week, month or year); give the rule a period or leave them out")
	case r.Refill != (Refill{}) || r.Covers != "":
		return fmt.Errorf("refill and covers are a credits rule's (credits: N, algorithm Credits); make the rule one or leave them out")
	}
	return nil
}

// validateCovers reports why credits rule r, at index i of p, cannot cover
// the calendar quota it names, or nil.
func (p *Policy) validateCovers(i int) error {
	r := &p.Rules[i]
	if r.Covers == "" {
		return nil
	}
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w: policy %q rule %q: covers %q: %s", ErrInvalidPolicy, p.Name, r.Name, r.Covers, fmt.Sprintf(format, args...))
	}
	j := slices.IndexFunc(p.Rules, func(q Rule) bool { return q.Name == r.Covers })
	switch {
	case j < 0:
		return invalid("no rule of that name comes before it in the policy; name a calendar quota, and put the credits rule after it")
	case p.Rules[j].Period == noPeriod:
		return invalid("not a calendar quota; credits pay for the overage of a rule with a period")
	case j > i:
		return invalid("the quota comes after the credits rule; put the credits rule after the quota it covers")
	case !slices.Equal(p.Rules[j].By, r.By):
		return invalid("the quota is keyed by %q and the credits by %q; a balance covers the quota of the same key: give both the same by", p.Rules[j].By, r.By)
	case r.Shadow || p.Rules[j].Shadow:
		return invalid("a credits rule that covers a quota, and the quota, cannot be shadow: the credits decide in the quota's place")
	}
	for k := range i {
		if q := &p.Rules[k]; q.Covers == r.Covers {
			return invalid("rule %q covers it already; one balance pays for a quota's overage", q.Name)
		}
	}
	return nil
}

// coveredBy returns the index of the check in checks of the rule named
// covered, or -1: the quota a credits rule covers, among a request's
// checks so far.
func coveredBy(checks []store.Check, covered string) int {
	for i := len(checks) - 1; i >= 0; i-- {
		if same(checks[i].Rule, covered) {
			return i
		}
	}
	return -1
}

// coveredCheck reports whether checks[i] is a Periodic check that a
// Credits check of checks covers.
func coveredCheck(checks []store.Check, i int) bool {
	if checks[i].Algorithm != store.Periodic {
		return false
	}
	for j := range checks {
		if checks[j].Algorithm == store.Credits && checks[j].Covers == i+1 {
			return true
		}
	}
	return false
}

// checkQuota reports what is wrong with the calendar, history, refill and
// covers of checks[i], a check of a request built by a caller of
// Limiter.Decide, or nil: what setQuota guarantees for a policy's.
func checkQuota(checks []store.Check, i int) error {
	c := &checks[i]
	cal, f := c.Calendar, c.Refill
	calendar := func() error {
		switch {
		case cal.Period > Year:
			return fmt.Errorf("unknown period %v", cal.Period)
		case cal.WeekStart < time.Sunday || cal.WeekStart > time.Saturday:
			return fmt.Errorf("week start %d is not a day of the week", cal.WeekStart)
		}
		return nil
	}
	switch c.Algorithm {
	case store.Periodic:
		switch {
		case cal.Period == noPeriod:
			return fmt.Errorf("a calendar check without a period; give its Calendar a day, week, month or year")
		case c.Window > calendarWindow:
			return fmt.Errorf("window %v is longer than a period lasts (store.MaxPeriodLength); give store.MaxPeriodLength", c.Window)
		case c.History < 0 || c.History > MaxHistory:
			return fmt.Errorf("history %d; keep 0 to %d periods", c.History, MaxHistory)
		case f != (store.Refill{}) || c.Covers != 0 || c.Budget != 0:
			return fmt.Errorf("a calendar check takes no refill, covers or budget")
		}
		return calendar()
	case store.Credits:
		switch {
		case f.To < 0 || f.Add < 0 || f.To > MaxCost || f.Add > MaxCost || f.To > 0 && f.Add > 0:
			return fmt.Errorf("refill to %d, add %d: at most one of them, 1 to 2^53", f.To, f.Add)
		case (f.To > 0 || f.Add > 0) != (cal.Period != noPeriod):
			return fmt.Errorf("a refill (to %d, add %d) needs a period, and a period a refill", f.To, f.Add)
		case c.History != 0 || c.Budget != 0:
			return fmt.Errorf("a credits check takes no history or budget")
		case c.Covers < 0 || c.Covers > i || c.Covers > 0 && checks[c.Covers-1].Algorithm != store.Periodic:
			return fmt.Errorf("covers %d names no calendar check before it in the request", c.Covers)
		}
		return calendar()
	}
	if cal != (store.Calendar{}) || c.History != 0 || f != (store.Refill{}) || c.Covers != 0 {
		return fmt.Errorf("a calendar, history, refill or covers on a %v check; they are for calendar and credits checks", c.Algorithm)
	}
	return nil
}

// covering returns what status s of check i of req, a calendar or credits
// check, adds to a Decision's Remaining (-1: nothing), and whether its
// denial is waived, when a credits check covers a calendar one (see
// store.Check.Covers): the quota's Remaining is its own plus the
// credits', which are then not counted on their own; a quota that does not
// fit is waived, its credits deciding in its place; and credits that do
// not fit either may fit again when the quota's next period starts, so
// their RetryAfter is the sooner of the two.
func covering(req *store.Request, i int, s *LimitStatus) (remaining int64, waived bool) {
	c := &req.Checks[i]
	switch c.Algorithm {
	case store.Credits:
		if c.Covers <= 0 || c.Covers > len(req.Results) {
			return s.Remaining, false
		}
		if q := &req.Results[c.Covers-1]; !s.Fits && !q.Fits && q.RetryAfter > 0 {
			s.RetryAfter = min(s.RetryAfter, q.RetryAfter)
		}
		return -1, false
	case store.Periodic:
		for j := i + 1; j < len(req.Checks); j++ {
			if k := &req.Checks[j]; k.Algorithm == store.Credits && k.Covers == i+1 {
				return min(MaxCost, s.Remaining+max(0, req.Results[j].Remaining)), !s.Fits
			}
		}
	}
	return s.Remaining, false
}
