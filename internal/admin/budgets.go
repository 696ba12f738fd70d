package admin

import (
	"net/http"
	"time"

	"github.com/sluicerate/sluice/internal/front"
	"github.com/sluicerate/sluice/internal/wire"
)

// slicesShown is the most slices GET /api/v1/budgets lists: a budgeted
// rule keyed by a user holds a slice per active user.
const slicesShown = 500

// budgetsJSON is the answer of GET /api/v1/budgets: the slices of
// budgeted rules this server holds now (sluice.Limiter.Slices), and what
// its Limiters did with slices since it started.
type budgetsJSON struct {
	Now    time.Time   `json:"now"`
	Slices []sliceJSON `json:"slices"`

	// Held counts every slice held; Slices lists the first slicesShown,
	// by policy, rule and values.
	Held int `json:"held"`

	// The totals of sluice_budget_decisions_total and
	// sluice_budget_units_total.
	Local         int64 `json:"local"`
	Store         int64 `json:"store"`
	SlicesLeased  int64 `json:"slices_leased"`
	UnitsLeased   int64 `json:"units_leased"`
	UnitsReturned int64 `json:"units_returned"`
	UnitsStranded int64 `json:"units_stranded"`
}

// sliceJSON is one slice this server holds: its window, its size, how
// much of it was admitted, and how long this server may still admit from
// it.
type sliceJSON struct {
	Policy  string   `json:"policy"`
	Rule    string   `json:"rule"`
	Values  []string `json:"values"`
	Granted int64    `json:"granted"`
	Used    int64    `json:"used"`
	LeftMS  int64    `json:"left_ms"`
}

func (a *admin) handleBudgets(w http.ResponseWriter, r *http.Request) {
	held := a.f.State().Limiter.Slices()
	st := a.f.BudgetStats()
	out := budgetsJSON{Now: a.v.clock.Now().UTC(), Slices: make([]sliceJSON, 0, min(len(held), slicesShown)), Held: len(held),
		Local: st.Local, Store: st.Store, SlicesLeased: st.SlicesLeased, UnitsLeased: st.UnitsLeased,
		UnitsReturned: st.UnitsReturned, UnitsStranded: st.UnitsStranded}
	for _, s := range held[:min(len(held), slicesShown)] {
		out.Slices = append(out.Slices, sliceJSON{Policy: s.Policy, Rule: s.Rule, Values: wire.NonNil(s.Values),
			Granted: s.Granted, Used: s.Used, LeftMS: wire.Millis(s.Left)})
	}
	front.WriteJSON(w, out)
}
