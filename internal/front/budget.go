package front

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/tracing"
	"github.com/sluicerate/sluice/store"
)

// Budgets. A Limiter over a store.Budgeter answers budgeted rules from
// slices it leases (sluice.Rule.Budget): Store forwards its Budget calls,
// timed and observed as Decide's are, and the budget metrics count what the
// Limiters did with their slices since the server started, those a reload
// swapped out included.

// budget is Budget of the store s wraps, which is a store.Budgeter, in a
// span of its own when tracing is on (tracing.BudgetAttributes).
func (s *Store) budget(ctx context.Context, req *store.Request, b *store.BudgetRequest) error {
	var span trace.Span
	if s.tracer != nil {
		ctx, span = s.tracer.Start(ctx, "sluice.store/Budget", trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(tracing.BudgetAttributes(req, b)...))
		defer span.End()
	}
	start := time.Now()
	err := s.Store.(store.Budgeter).Budget(ctx, req, b)
	s.Observe("budget", start, err)
	if span != nil {
		tracing.BudgetDone(span, req, b, err)
	}
	if err == nil && s.m.obs != nil && len(req.Checks) > 0 {
		s.m.obs.Decided(req, false)
	}
	return err
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
