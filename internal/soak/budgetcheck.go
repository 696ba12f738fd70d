package soak

import (
	"math"
	"slices"
	"time"
)

// The budget checker, like the decision checker, knows nothing of sluice
// or of slices: it sees each process's admissions of the budgeted rule as
// send and reply times, and holds them to the rule's promise, at most
// BudgetLimit in any window of BudgetWindow (SlidingOver). It also counts
// what the rule admitted per window, to measure what slices cost: the
// admissions answered in each window (ReplyCounts: what callers were
// given in it), and those certainly in it (WindowCounts: a lower bound
// that leaves out the admissions whose call spans an edge of the window);
// in windows away from every fault (the steady state), and from a fault
// to a slice's life and a window after it, when a slice a killed process
// held is counted in the store and used by nobody.

// BudgetAdmissions returns the admissions among calls, sorted by their
// reply (SortAdmissions).
func BudgetAdmissions(calls []BudgetCall) []Interval {
	var adm []Interval
	for _, c := range calls {
		if c.Outcome == Allowed {
			adm = append(adm, Interval{Sent: c.Sent, Replied: c.Replied})
		}
	}
	SortAdmissions(adm)
	return adm
}

// WindowCounts returns, for each instant t of ends (sorted), how many
// admissions certainly lie in the window (t-window, t]: those sent after
// t-window and answered by t, by the rule SlidingOver uses. It is a lower
// bound on what the store admitted in that window. adm must be sorted by
// Replied.
func WindowCounts(adm []Interval, window time.Duration, ends []int64) []int64 {
	out := make([]int64, len(ends))
	left := 0
	for k, t := range ends {
		from := t - int64(window) + usMargin
		for left < len(adm) && adm[left].Replied <= from {
			left++ // answered by from, so sent by it: outside this window and later ones
		}
		var n int64
		for i := left; i < len(adm) && adm[i].Replied <= t; i++ {
			if adm[i].Sent > from {
				n++
			}
		}
		out[k] = n
	}
	return out
}

// ReplyCounts returns, for each instant t of ends (sorted), how many
// admissions were answered in the window (t-window, t]: what the callers
// were given in it, to act on. adm must be sorted by Replied.
func ReplyCounts(adm []Interval, window time.Duration, ends []int64) []int64 {
	out := make([]int64, len(ends))
	for k, t := range ends {
		lo, _ := slices.BinarySearchFunc(adm, t-int64(window)+1, func(a Interval, t int64) int { return cmpInt(a.Replied, t) })
		hi, _ := slices.BinarySearchFunc(adm, t+1, func(a Interval, t int64) int { return cmpInt(a.Replied, t) })
		out[k] = int64(hi - lo)
	}
	return out
}

// Span is an interval of time [From, To], ns.
type Span struct{ From, To int64 }

// MergeSpans returns spans sorted by From with those that overlap or
// touch merged into one.
func MergeSpans(spans []Span) []Span {
	spans = slices.Clone(spans)
	slices.SortFunc(spans, func(a, b Span) int { return cmpInt(a.From, b.From) })
	var out []Span
	for _, sp := range spans {
		if n := len(out); n > 0 && sp.From <= out[n-1].To {
			out[n-1].To = max(out[n-1].To, sp.To)
			continue
		}
		out = append(out, sp)
	}
	return out
}

// SteadyEnds returns the instants from + window, from + window + step, ...
// up to to whose windows (t-window, t] overlap none of busy (sorted by
// From, as MergeSpans returns them): the ends of the windows that lie in
// [from, to] and away from every fault.
func SteadyEnds(from, to int64, step, window time.Duration, busy []Span) []int64 {
	var out []int64
	k := 0
	for t := from + int64(window); t <= to; t += int64(step) {
		for k < len(busy) && busy[k].To <= t-int64(window) {
			k++ // ended before this window and every later one
		}
		if !slices.ContainsFunc(busy[k:], func(s Span) bool { return s.From <= t && s.To > t-int64(window) }) {
			out = append(out, t)
		}
	}
	return out
}

// budgetStep is the step between the ends of the windows the budget
// checker counts.
const budgetStep = 100 * time.Millisecond

// budgetAftermath is how long after a fault's end, or a degraded
// decision's answer, the windows the budget checker counts are not
// steady: a slice's life and a window (a slice the fault stranded is
// counted until then), and 2 s to recover.
const budgetAftermath = BudgetTime + BudgetWindow + 2*time.Second

// AnalyzeBudget adds the budget workload's figures to res (one per phase,
// as Analyze returns them): calls are every budget process's decisions;
// the steady windows start warmup after the first phase's start.
func AnalyzeBudget(res []Result, phases []Phase, calls []BudgetCall, warmup time.Duration) {
	if len(phases) == 0 {
		return
	}
	phaseOf, blame := blamers(phases)
	for _, c := range calls {
		i := phaseOf(c.Sent)
		if i < 0 {
			continue
		}
		r := &res[i]
		r.BudgetDecisions++
		switch {
		case c.Outcome == Allowed:
			r.BudgetAdmitted++
		case c.Outcome.Degraded():
			r.BudgetDegraded++
		}
		if c.Local {
			r.BudgetLocal++
		}
	}
	adm := BudgetAdmissions(calls)
	over := make([]int64, len(phases))
	for _, o := range SlidingOver(adm, BudgetLimit, BudgetWindow) {
		if i := blame(o.At); i >= 0 {
			over[i] = max(over[i], o.Excess)
		}
	}
	// Not steady: from a fault until its aftermath ends, and from a
	// degraded decision (the store failed, or the circuit was open)
	// until its own: a failure is a fault, whether the soak injected it
	// or the machine stalled the store past its deadline.
	var busy []Span
	for i, p := range phases {
		res[i].BudgetOver = over[i]
		res[i].BudgetLow, res[i].BudgetSteadyLow = -1, -1
		if p.FaultStart != 0 {
			busy = append(busy, Span{p.FaultStart, p.FaultEnd + int64(budgetAftermath)})
		}
	}
	for _, c := range calls {
		if c.Outcome.Degraded() {
			busy = append(busy, Span{c.Sent, c.Replied + int64(budgetAftermath)})
		}
	}
	first, last := phases[0].Start+int64(warmup), phases[len(phases)-1].End
	steady := SteadyEnds(first, last, budgetStep, BudgetWindow, MergeSpans(busy))
	certain := WindowCounts(adm, BudgetWindow, steady)
	for k, n := range ReplyCounts(adm, BudgetWindow, steady) {
		if i := phaseOf(steady[k]); i >= 0 {
			if res[i].BudgetSteadyLow < 0 || n < res[i].BudgetSteadyLow {
				res[i].BudgetSteadyLow = n
			}
			res[i].BudgetSteady += n
			res[i].BudgetSteadyCertain += certain[k]
			res[i].BudgetSteadyWins++
		}
	}
	// From the fault to a slice's life and a window after its end, at
	// most to the phase's end.
	for i, p := range phases {
		if p.FaultStart == 0 {
			continue
		}
		var ends []int64
		for t := p.FaultStart; t <= min(p.End, p.FaultEnd+int64(BudgetTime+BudgetWindow)); t += int64(budgetStep) {
			ends = append(ends, t)
		}
		if counts := ReplyCounts(adm, BudgetWindow, ends); len(counts) > 0 {
			res[i].BudgetLow = slices.Min(counts)
		}
	}
}

// SteadyShare returns the mean of the admissions answered per steady
// window over res as a share of BudgetLimit, the same of those certainly
// in it, and the number of windows; NaNs when there are none.
func SteadyShare(res []Result) (replied, certain float64, wins int) {
	var sum, sure int64
	for _, r := range res {
		sum += r.BudgetSteady
		sure += r.BudgetSteadyCertain
		wins += r.BudgetSteadyWins
	}
	if wins == 0 {
		return math.NaN(), math.NaN(), 0
	}
	return float64(sum) / float64(wins) / BudgetLimit, float64(sure) / float64(wins) / BudgetLimit, wins
}
