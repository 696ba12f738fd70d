package front

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	otelcodes "go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/store"
)

// Budgets. A Limiter over a store.Budgeter answers budgeted rules from
// slices it leases (sluice.Rule.Budget): Store forwards its Budget calls,
// timed and observed as Decide's are, and the budget metrics count what the
// Limiters did with their slices since the server started, those a reload
// swapped out included.

// budget is Budget of the store s wraps, which is a store.Budgeter.
func (s *Store) budget(ctx context.Context, req *store.Request, b *store.BudgetRequest) error {
	if s.tracer != nil {
		return s.budgetTraced(ctx, req, b)
	}
	start := time.Now()
	err := s.Store.(store.Budgeter).Budget(ctx, req, b)
	s.Observe("budget", start, err)
	if err == nil && s.m.obs != nil && len(req.Checks) > 0 {
		s.m.obs.Decided(req, false)
	}
	return err
}

// budgetTraced is budget in a span of its own, as decideTraced is Decide:
// what the call does with slices (sluice.budget.op: lease, renew or
// return), the policy, the rules whose slices it asks for and gives back,
// the units asked, granted and returned, whether its request fit, and the
// store's error.
func (s *Store) budgetTraced(ctx context.Context, req *store.Request, b *store.BudgetRequest) error {
	var rules []string
	var asked, returned int64
	for _, a := range b.Asks {
		asked += a.Want
		if a.Check >= 0 && a.Check < len(req.Checks) && !slices.Contains(rules, req.Checks[a.Check].Rule) {
			rules = append(rules, req.Checks[a.Check].Rule)
		}
	}
	for i := range b.Returns {
		r := &b.Returns[i]
		returned += r.Granted - r.Used
		if !slices.Contains(rules, r.Check.Rule) {
			rules = append(rules, r.Check.Rule)
		}
	}
	op := "return"
	if len(b.Asks) > 0 {
		op = "lease"
		if len(b.Returns) > 0 {
			op = "renew"
		}
	}
	ctx, span := s.tracer.Start(ctx, "sluice.store/Budget", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("sluice.budget.op", op), attribute.String("sluice.policy", req.Policy),
			attribute.StringSlice("sluice.rules", rules), attribute.Int("sluice.windows", len(req.Checks)),
			attribute.Int64("sluice.budget.units_asked", asked), attribute.Int64("sluice.budget.units_returned", returned)))
	defer span.End()
	start := time.Now()
	err := s.Store.(store.Budgeter).Budget(ctx, req, b)
	s.Observe("budget", start, err)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(otelcodes.Error, err.Error())
		return err
	}
	var granted int64
	for _, g := range b.Grants {
		granted += g.Granted
	}
	span.SetAttributes(attribute.Int64("sluice.budget.units_granted", granted))
	if len(req.Checks) > 0 {
		fits := true
		for i, r := range req.Results {
			fits = fits && (r.Fits || req.Checks[i].Shadow)
		}
		span.SetAttributes(attribute.Bool("sluice.fits", fits))
		if s.m.obs != nil {
			s.m.obs.Decided(req, false)
		}
	}
	return nil
}

// budgetStore is a Store over a store.Budgeter.
type budgetStore struct{ *Store }

// Budget implements store.Budgeter.
func (s budgetStore) Budget(ctx context.Context, req *store.Request, b *store.BudgetRequest) error {
	return s.budget(ctx, req, b)
}

// localBudgetStore is a Store over a store.Local that is a store.Budgeter.
type localBudgetStore struct{ localStore }

// Budget implements store.Budgeter.
func (s localBudgetStore) Budget(ctx context.Context, req *store.Request, b *store.BudgetRequest) error {
	return s.budget(ctx, req, b)
}

// shardedBudgetStore is a Store over a store.Sharded that is a
// store.Budgeter.
type shardedBudgetStore struct{ shardedStore }

// Budget implements store.Budgeter.
func (s shardedBudgetStore) Budget(ctx context.Context, req *store.Request, b *store.BudgetRequest) error {
	return s.budget(ctx, req, b)
}

var (
	_ store.Budgeter = budgetStore{}
	_ store.Budgeter = localBudgetStore{}
	_ store.Local    = localBudgetStore{}
	_ store.Budgeter = shardedBudgetStore{}
	_ store.Sharded  = shardedBudgetStore{}
)

// budgetTotals is what the Limiters a reload swapped out did with their
// slices. A Limiter swapped out is counted as it goes on (requests that
// read the old state may still be deciding) until its Close has given
// its slices back; then its counts join base.
type budgetTotals struct {
	mu      sync.Mutex
	base    sluice.BudgetStats
	retired []*sluice.Limiter // swapped out, not closed yet
}

// addBudget adds st to to.
func addBudget(to *sluice.BudgetStats, st sluice.BudgetStats) {
	to.SlicesLeased += st.SlicesLeased
	to.UnitsLeased += st.UnitsLeased
	to.UnitsReturned += st.UnitsReturned
	to.UnitsStranded += st.UnitsStranded
	to.Local += st.Local
	to.Store += st.Store
}

// retire counts l's slices from now on as those of a Limiter swapped out.
func (t *budgetTotals) retire(l *sluice.Limiter) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.retired = append(t.retired, l)
}

// closed adds the counts of l, retired and now closed, to the totals.
func (t *budgetTotals) closed(l *sluice.Limiter) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, r := range t.retired {
		if r == l {
			addBudget(&t.base, l.BudgetStats())
			t.retired = append(t.retired[:i], t.retired[i+1:]...)
			return
		}
	}
}

// stats returns what the Limiters swapped out and cur, the current one
// (nil: none), did with slices since the server started.
func (t *budgetTotals) stats(cur *sluice.Limiter) sluice.BudgetStats {
	t.mu.Lock()
	defer t.mu.Unlock()
	total := t.base
	for _, l := range t.retired {
		addBudget(&total, l.BudgetStats())
	}
	if cur != nil {
		addBudget(&total, cur.BudgetStats())
	}
	return total
}

// BudgetStats returns what the server's Limiters did with the slices of
// budgeted rules since it started.
func (f *Front) BudgetStats() sluice.BudgetStats {
	var cur *sluice.Limiter
	if st := f.state.Load(); st != nil {
		cur = st.Limiter
	}
	return f.budgets.stats(cur)
}

// CloseLimiter gives back the slices of l (sluice.Limiter.Close), the
// current state's Limiter on shutdown or one a reload swapped out
// (Publish), whose counts then join the totals.
func (f *Front) CloseLimiter(l *sluice.Limiter) error {
	err := l.Close()
	f.budgets.closed(l)
	return err
}

// budgetCollectors are the budgets' metrics.
func (f *Front) budgetCollectors() []prometheus.Collector {
	counter := func(name, help string, labels prometheus.Labels, v func(sluice.BudgetStats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels},
			func() float64 { return float64(v(f.BudgetStats())) })
	}
	const decisions = "Decisions of policies with a budgeted rule, by who answered: local (every rule from slices this server leased, without a store call) or store."
	const units = "Units of the slices of budgeted rules, by what became of them: leased (granted by the store), returned (given back unused before the slice ended: on a new lease, a reload or shutdown), " +
		"stranded (unused when the slice ended, or whose return failed: the store counts them as spent until the slice's end)."
	return []prometheus.Collector{
		counter("sluice_budget_slices_total", "Slices of budgeted rules' capacity the store granted this server.", nil,
			func(st sluice.BudgetStats) int64 { return st.SlicesLeased }),
		counter("sluice_budget_units_total", units, prometheus.Labels{"outcome": "leased"},
			func(st sluice.BudgetStats) int64 { return st.UnitsLeased }),
		counter("sluice_budget_units_total", units, prometheus.Labels{"outcome": "returned"},
			func(st sluice.BudgetStats) int64 { return st.UnitsReturned }),
		counter("sluice_budget_units_total", units, prometheus.Labels{"outcome": "stranded"},
			func(st sluice.BudgetStats) int64 { return st.UnitsStranded }),
		counter("sluice_budget_decisions_total", decisions, prometheus.Labels{"answered": "local"},
			func(st sluice.BudgetStats) int64 { return st.Local }),
		counter("sluice_budget_decisions_total", decisions, prometheus.Labels{"answered": "store"},
			func(st sluice.BudgetStats) int64 { return st.Store }),
	}
}
