package decide

import (
	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/envoy"
	"github.com/sluicerate/sluice/store"
)

// applyOverrides gives each window of p the figures of its runtime
// override, when ov has one: before the windows are sorted into requests,
// so that a window whose override its hits cannot fit is impossible as
// any other.
func (p *plan) applyOverrides(ov sluice.Overrides) {
	if ov == nil {
		return
	}
	policy := envoy.PolicyName(p.domain)
	for k := range p.windows {
		c := &p.windows[k].check
		o, ok := ov.Override(policy, c.Rule, c.Values)
		if !ok {
			continue
		}
		p.windows[k].overridden = true
		c.Limit = o.Limit
		if c.Algorithm == store.Periodic {
			continue // a calendar period takes a limit only
		}
		if o.Window > 0 {
			c.Window = o.Window
		}
		if o.MinGap > 0 && c.Algorithm == sluice.Log {
			c.MinGap = o.MinGap
		}
		switch {
		case c.Limit == 0:
			c.Algorithm, c.Burst = sluice.Log, 0 // a limit of 0 blocks; GCRA has no empty bucket
		case c.Algorithm == sluice.GCRA && o.Burst > 0:
			c.Burst = o.Burst
		case c.Algorithm == sluice.GCRA:
			c.Burst = c.Limit
		}
	}
}

// reported is l as a response reports the window w: l itself, or with a
// runtime override's limit and window.
func (w *pending) reported(l envoy.Limit) envoy.Limit {
	if !w.overridden {
		return l
	}
	o := envoy.RuleLimit(&sluice.LimitStatus{Limit: w.check.Limit, Window: w.check.Window})
	o.Name, o.Algorithm, o.Replaces = l.Name, w.check.Algorithm, l.Replaces
	if l.Period != store.NoPeriod {
		o.Unit, o.Multiplier, o.Window, o.Period, o.Algorithm = l.Unit, l.Multiplier, l.Window, l.Period, l.Algorithm
	}
	return o
}
