package soak

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// Table returns the results as a Markdown table, one row per phase.
func Table(res []Result) string {
	var b strings.Builder
	b.WriteString("| topology | phase | fault lasted | decisions | admitted | degraded (errors + open circuit) | NOSCRIPT | p99 | degraded from / until | recovery | others' CPU | lost | over-admissions | counter over 2×limit | leases granted / denied for slots / failed | over N | settle units lost | slots held by nobody | note |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range res {
		span, rec, lasted, others := "", "", "", ""
		if r.Phase.FaultStart != 0 {
			others = fmt.Sprintf("%.2f", r.Others)
			lasted = secs(time.Duration(r.Phase.FaultEnd - r.Phase.FaultStart))
			span = "none"
			if r.FirstDegraded >= 0 {
				span = fmt.Sprintf("+%s / %s", secs(r.FirstDegraded), signed(r.LastDegraded))
			}
			rec = "not normal"
			if r.Recovery >= 0 {
				rec = secs(r.Recovery)
			}
		}
		over := fmt.Sprint(r.Over)
		if r.OverWins > 0 {
			over = fmt.Sprintf("%d (%d windows)", r.Over, r.OverWins)
		}
		lost := fmt.Sprint(r.Lost)
		if r.LostWins > 0 {
			lost = fmt.Sprintf("%d (%d windows)", r.Lost, r.LostWins)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %d | %d (%d + %d) | %d | %s | %s | %s | %s | %s | %s | %d | %d / %d / %d | %d | %d | %d | %s |\n",
			r.Phase.Topology, r.Phase.Name, lasted, r.Decisions, r.Allowed, r.Degraded, r.Degraded-r.Circuit, r.Circuit, r.NoScript, r.P99.Round(10*time.Microsecond),
			span, rec, others, lost, over, r.CounterOver, r.Leases, r.LeaseDenied, r.LeaseFailed, r.OverSlots, r.SettleLost, r.Nobody, r.Phase.Note)
	}
	return b.String()
}

// BudgetTable returns the budget workload's results as a Markdown table,
// one row per phase.
func BudgetTable(res []Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| topology | phase | decisions | admitted | answered locally | degraded | over-admissions | admitted per steady window, %% of %d: answered in it / certainly in it (windows) | fewest answered in a steady window | fewest answered in a window, fault to %v after it (%% of %d) |\n",
		BudgetLimit, BudgetTime+BudgetWindow, BudgetLimit)
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range res {
		steady, steadyLow, low := "none", "", ""
		if r.BudgetSteadyLow >= 0 {
			steadyLow = fmt.Sprintf("%d (%.1f%%)", r.BudgetSteadyLow, 100*float64(r.BudgetSteadyLow)/BudgetLimit)
		}
		if r.BudgetSteadyWins > 0 {
			replied, certain, wins := SteadyShare([]Result{r})
			steady = fmt.Sprintf("%.1f%% / %.1f%% (%d)", 100*replied, 100*certain, wins)
		}
		if r.BudgetLow >= 0 && r.Phase.FaultStart != 0 {
			low = fmt.Sprintf("%d (%.1f%%)", r.BudgetLow, 100*float64(r.BudgetLow)/BudgetLimit)
		}
		local := "0"
		if r.BudgetDecisions > 0 {
			local = fmt.Sprintf("%d (%.1f%%)", r.BudgetLocal, 100*float64(r.BudgetLocal)/float64(r.BudgetDecisions))
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %s | %d | %d | %s | %s | %s |\n",
			r.Phase.Topology, r.Phase.Name, r.BudgetDecisions, r.BudgetAdmitted, local, r.BudgetDegraded, r.BudgetOver, steady, steadyLow, low)
	}
	return b.String()
}

// secs writes d in seconds to the tenth.
func secs(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

// signed writes d relative to a fault's end: "+0.3s" after it, "-0.2s"
// before.
func signed(d time.Duration) string {
	if d == math.MinInt64 {
		return "none"
	}
	if d < 0 {
		return "-" + secs(-d)
	}
	return "+" + secs(d)
}
