// Package oneshot runs one command-line request against a store and
// writes what was decided, as text or JSON: a peek at a policy (`sluice
// check --policy`) and reservations on a schedule (`sluice reserve`).
package oneshot

import (
	"context"
	"fmt"
	"io"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/internal/wire"
	"github.com/sluicerate/sluice/store"
)

// Peek is one request decided without recording it, as `sluice check
// --json` prints it: the decision as the HTTP API returns it, with the
// policy and the store.
type Peek struct {
	Policy string `json:"policy"`
	Store  string `json:"store"`
	wire.DecisionJSON

	policy   *sluice.Policy
	cost     int64
	decision sluice.Decision
}

// PeekPolicy decides one request of cost against p on st, the store at
// where, without recording it: what /v1/peek answers. cfg (nil: none) is
// the file p is from, whose store's on_error applies.
func PeekPolicy(ctx context.Context, st store.Store, where string, cfg *config.Config, p *sluice.Policy, attrs map[string]string, cost int64) (*Peek, error) {
	lc := sluice.Config{}
	if cfg != nil && cfg.Store != nil {
		lc.OnError = cfg.Store.OnError
	}
	d, err := sluice.NewLimiter(st, lc).Peek(ctx, p, attrs, cost)
	if err != nil {
		return nil, err
	}
	return &Peek{Policy: p.Name, Store: where, DecisionJSON: wire.NewDecisionJSON(&d), policy: p, cost: cost, decision: d}, nil
}

// Allowed reports whether the request would be allowed.
func (pk *Peek) Allowed() bool { return pk.decision.Allowed }

// WriteText writes the decision in a line, then each limit's figures in
// a line: what it has used, and why it does not fit.
func (pk *Peek) WriteText(w io.Writer) {
	d := &pk.decision
	switch {
	case d.Unlimited:
		fmt.Fprintf(w, "policy %q on %s: allowed with no limit: no rule applies to these attributes\n", pk.Policy, pk.Store)
	case d.Allowed:
		fmt.Fprintf(w, "policy %q on %s: allowed (cost %d, remaining %d)\n", pk.Policy, pk.Store, pk.cost, d.Remaining)
	default:
		fmt.Fprintf(w, "policy %q on %s: denied by %s (%s; cost %d, remaining %d)\n", pk.Policy, pk.Store, d.DeniedBy, d.Cause, pk.cost, d.Remaining)
	}
	for _, l := range d.Limits() {
		r := ruleNamed(pk.policy, l.Rule)
		if r != nil && r.Algorithm == sluice.GCRA {
			fmt.Fprintf(w, "  %-16s %d of a burst of %d used (gcra, %d per %v)", l.Rule, l.Used, l.Used+l.Remaining, l.Limit, l.Window)
		} else {
			fmt.Fprintf(w, "  %-16s %d/%d used per %v", l.Rule, l.Used, l.Limit, l.Window)
		}
		if r != nil && r.Spread > 1 {
			fmt.Fprintf(w, " in one of %d sub-windows", r.Spread)
		}
		switch {
		case l.Limit == 0:
			fmt.Fprint(w, "  blocked: a limit of 0 admits nothing")
		case !l.Fits && l.Shadow:
			fmt.Fprintf(w, "  would deny (%s; shadow); retry in %v", l.Cause, l.RetryAfter.Round(1e6))
		case !l.Fits:
			fmt.Fprintf(w, "  does not fit (%s); retry in %v", l.Cause, l.RetryAfter.Round(1e6))
		}
		fmt.Fprintln(w)
	}
}

// ruleNamed returns p's rule named name, or nil.
func ruleNamed(p *sluice.Policy, name string) *sluice.Rule {
	for i := range p.Rules {
		if p.Rules[i].Name == name {
			return &p.Rules[i]
		}
	}
	return nil
}
