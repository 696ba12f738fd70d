package store

import "fmt"

// CheckQuotas reports what is wrong with the calendar quotas and credits
// of checks (Periodic and Credits checks, and Covers), nil when a store
// may decide them: the errors name the check and the field. CheckDecide
// calls it; a store calls it in Acquire too.
func CheckQuotas(checks []Check) error {
	for i := range checks {
		c := &checks[i]
		switch {
		case c.Algorithm == Periodic && (c.Calendar.Period < Day || c.Calendar.Period > Year):
			return fmt.Errorf("sluice: calendar rule %q: period %s; give day, week, month or year", c.Rule, periodName(c.Calendar.Period))
		case c.Algorithm == Periodic && c.History < 0:
			return fmt.Errorf("sluice: calendar rule %q: history %d is negative; give how many past periods to keep, or 0", c.Rule, c.History)
		case (c.Algorithm == Periodic || c.Algorithm == Credits) && c.Budget > 0:
			return fmt.Errorf("sluice: %v rule %q takes no budget; remove it", c.Algorithm, c.Rule)
		case c.Covers != 0 && c.Algorithm != Credits:
			return fmt.Errorf("sluice: rule %q covers check %d but is not a credits rule (algorithm %v)", c.Rule, c.Covers, c.Algorithm)
		case c.Covers < 0 || c.Covers > len(checks) || c.Covers == i+1:
			return fmt.Errorf("sluice: credits rule %q covers check %d of %d; give another check of the request, counted from 1", c.Rule, c.Covers, len(checks))
		case c.Covers > 0 && checks[c.Covers-1].Algorithm != Periodic:
			return fmt.Errorf("sluice: credits rule %q covers rule %q, which is not a calendar rule (algorithm %v)", c.Rule, checks[c.Covers-1].Rule, checks[c.Covers-1].Algorithm)
		case c.Algorithm == Credits:
			if err := checkRefill(c); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkRefill(c *Check) error {
	r := c.Refill
	switch {
	case r.To < 0 || r.To > MaxCost || r.Add < 0 || r.Add > MaxCost:
		return fmt.Errorf("sluice: credits rule %q: refill to %d, add %d; each is 0 to 2^53", c.Rule, r.To, r.Add)
	case r.To > 0 && r.Add > 0:
		return fmt.Errorf("sluice: credits rule %q: refill both to %d and add %d; give one", c.Rule, r.To, r.Add)
	case (r.To > 0 || r.Add > 0) && (c.Calendar.Period < Day || c.Calendar.Period > Year):
		return fmt.Errorf("sluice: credits rule %q: a refill with period %s; give day, week, month or year", c.Rule, periodName(c.Calendar.Period))
	}
	return nil
}

// CheckUsage reports what is wrong with req, nil when a store may answer
// it: the errors name the field.
func CheckUsage(req *UsageRequest) error {
	c := &req.Check
	if c.Algorithm != Periodic {
		return fmt.Errorf("sluice: usage of rule %q: not a calendar rule (algorithm %v)", c.Rule, c.Algorithm)
	}
	if req.At < 0 {
		return fmt.Errorf("sluice: usage of rule %q: time %d µs is before 1970; give a time since the Unix epoch, or 0 for the store's time", c.Rule, req.At)
	}
	return CheckQuotas([]Check{*c})
}

// periodName names p in an error: "none" for NoPeriod.
func periodName(p Period) string {
	if p == NoPeriod {
		return "none"
	}
	return p.String()
}

// Waived reports whether the denial of check i of a decided request
// (checks and their results) is waived: check i, a Periodic check, did not
// fit, and a Credits check covering it (Check.Covers) fit, so its balance
// pays for the request in the quota's place.
func Waived(checks []Check, results []Result, i int) bool {
	if i >= len(results) || results[i].Fits || checks[i].Algorithm != Periodic {
		return false
	}
	for j := range checks {
		if checks[j].Covers == i+1 {
			return j < len(results) && results[j].Fits
		}
	}
	return false
}
