package soak

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"time"
)

// Phase is one stretch of a run: the baseline, or one fault from a little
// before it strikes until the next phase starts. Times are ns of
// CLOCK_REALTIME; a baseline has no fault (FaultStart and FaultEnd 0).
type Phase struct {
	Topology string
	Name     string
	Start    int64
	// FaultStart is when the fault was injected, FaultEnd when it was
	// over: the flush returned, SIGCONT was sent, the restarted server
	// answered, the new master answered ROLE as master.
	FaultStart, FaultEnd int64
	End                  int64
	// Note says what else the fault caused (a failover it triggered).
	Note string
	// Lossy, Outage and Control are the fault's (see Fault).
	Lossy, Outage, Control bool
}

// Result is what a phase cost.
type Result struct {
	Phase     Phase
	Decisions int
	Allowed   int
	// Degraded counts decisions made by the failure policy: store errors,
	// NOSCRIPT, an open circuit. NoScript counts those whose error named
	// NOSCRIPT.
	Degraded, NoScript int
	// Circuit counts the degraded decisions the open circuit answered
	// without calling the store; the others are store errors.
	Circuit int
	// P99 is the 99th percentile of the phase's decision latencies.
	P99 time.Duration
	// Recovery is the time from FaultEnd to the start of the first second
	// from then on with no degraded decision and a p99 latency within the
	// threshold (a normal second), in steps of 100 ms; negative when the
	// phase has no such second.
	Recovery time.Duration
	// FirstDegraded is the first degraded decision sent after FaultStart,
	// relative to it (negative: none); LastDegraded the last, relative to
	// FaultEnd (math.MinInt64: none).
	FirstDegraded, LastDegraded time.Duration
	// Over is the certain over-admissions of the exact bounds (the log,
	// the minimum gap, GCRA): per window, the largest excess of a set of
	// admissions completed in the phase (or, for a fault phase, up to a
	// window and 2 s after the fault, when the next phase has begun),
	// summed over windows. OverWins
	// counts the windows with any. CounterOver is the same for the
	// sliding counter against its own bound (twice its limit).
	Over, OverWins, CounterOver int64
	// Lost is the admissions the log windows certainly lost: per window,
	// the most that a peek made in the phase (counted as Over is) found
	// missing, summed over windows.
	Lost, LostWins int64
	// Leases, LeaseDenied and LeaseFailed count the lease workload's
	// acquires sent in the phase: granted, denied by the concurrency rule,
	// failed.
	Leases, LeaseDenied, LeaseFailed int
	// OverSlots counts the instants at which more than LeaseSlots leases
	// of a window were certainly held (OverSlots), blamed as Over is.
	OverSlots int
	// SettleLost is the units the settle windows certainly held and the
	// store did not count (SettleMissing): per window, the most a peek
	// found missing, summed over windows, blamed as Lost is.
	SettleLost int64
	// Nobody counts the denials for the concurrency rule answered in the
	// phase while fewer than LeaseSlots leases were possibly held
	// (HeldByNobody): slots held by nobody past every lease time.
	Nobody int
	// BudgetDecisions, BudgetAdmitted, BudgetLocal and BudgetDegraded
	// count the budget workload's decisions sent in the phase: all, those
	// admitted, those answered from a slice without a store call, those
	// the failure policy made (AnalyzeBudget).
	BudgetDecisions, BudgetAdmitted, BudgetLocal, BudgetDegraded int
	// BudgetOver is the certain over-admissions of the budgeted rule, the
	// largest excess blamed on the phase as Over is.
	BudgetOver int64
	// BudgetSteady is the admissions answered in the phase's steady
	// windows (away from every fault, SteadyEnds), summed,
	// BudgetSteadyCertain those certainly in them, and BudgetSteadyWins
	// their number.
	BudgetSteady, BudgetSteadyCertain int64
	BudgetSteadyWins                  int
	// BudgetSteadyLow is the fewest admissions answered in one of those
	// windows (-1: none).
	BudgetSteadyLow int64
	// BudgetLow is the fewest admissions answered in a window that ends
	// from the fault to a slice's life and a window after its end (-1:
	// no fault).
	BudgetLow int64
	// Others is the most CPU, in cores over one second, that the machine's
	// other processes used from a second before the fault's end to 3 s
	// after it, where the recovery is decided (0 when not measured).
	Others float64
}

// blameHorizon is how long after a fault an over-admission or a loss is
// blamed on it: a window, and 2 s for the service to recover.
const blameHorizon = Window + 2*time.Second

// Recovery settings: latencies are bucketed by 100 ms, and a normal
// second is ten buckets in a row.
const (
	bucket       = int64(100 * time.Millisecond)
	normalBucket = 10
)

// Analyze returns the result of each phase of one topology's run: recs are
// every worker's decisions, looks the auditor's peeks per window (indexed
// as mix.Wins), threshold the p99 latency a normal second stays within.
func Analyze(mix *Mix, phases []Phase, recs []Record, looks [][]Look, threshold time.Duration) []Result {
	res := make([]Result, len(phases))
	for i, p := range phases {
		res[i].Phase = p
	}
	phaseOf, blame := blamers(phases)

	lat := make([][]time.Duration, len(phases))
	adm := make([][]Interval, len(mix.Wins))
	for _, r := range recs {
		if r.Outcome == Allowed {
			for _, w := range mix.Targets[r.Target].Wins {
				adm[w] = append(adm[w], Interval{Sent: r.Sent, Replied: r.Replied})
			}
		}
		i := phaseOf(r.Sent)
		if i < 0 {
			continue
		}
		res[i].Decisions++
		lat[i] = append(lat[i], time.Duration(r.Replied-r.Sent))
		switch {
		case r.Outcome == Allowed:
			res[i].Allowed++
		case r.Outcome.Degraded():
			res[i].Degraded++
			switch r.Outcome {
			case NoScript:
				res[i].NoScript++
			case CircuitOpen:
				res[i].Circuit++
			}
		}
	}
	for i := range res {
		res[i].P99 = percentile(lat[i], 0.99)
	}

	// Over-admissions and losses, per window, the worst in each phase.
	for w, win := range mix.Wins {
		SortAdmissions(adm[w])
		over := make([]int64, len(phases))
		counter := make([]int64, len(phases))
		for _, b := range win.Bounds {
			var os []Overage
			switch b.Kind {
			case Sliding:
				os = SlidingOver(adm[w], b.Limit, b.Window)
			case Bucket:
				os = BucketOver(adm[w], b.Burst, b.Interval, 2*Window)
			case Counter:
				os = SlidingOver(adm[w], 2*b.Limit, b.Window)
			}
			for _, o := range os {
				if i := blame(o.At); i >= 0 {
					if b.Kind == Counter {
						counter[i] = max(counter[i], o.Excess)
					} else {
						over[i] = max(over[i], o.Excess)
					}
				}
			}
		}
		lost := make([]int64, len(phases))
		if win.Peek && w < len(looks) {
			for _, l := range looks[w] {
				if i := blame(l.Sent); i >= 0 {
					lost[i] = max(lost[i], Missing(adm[w], win.Bounds[0].Window, l))
				}
			}
		}
		for i := range res {
			res[i].Over += over[i]
			res[i].CounterOver += counter[i]
			res[i].Lost += lost[i]
			if over[i] > 0 {
				res[i].OverWins++
			}
			if lost[i] > 0 {
				res[i].LostWins++
			}
		}
	}

	for i, p := range phases {
		if p.FaultStart != 0 {
			res[i].Recovery, res[i].FirstDegraded, res[i].LastDegraded = recovery(recs, p, threshold)
		}
	}
	return res
}

// blamers returns phaseOf, the index of the phase a time falls in (-1:
// none), and blame, the phase a violation seen at a time is blamed on: an
// over-admission or a loss shows up to a window after the fault that
// caused it, and the window refills after the service recovers, so it is
// blamed on the latest fault that struck that long before it, or else on
// the phase it happened in.
func blamers(phases []Phase) (phaseOf, blame func(t int64) int) {
	phaseOf = func(t int64) int {
		i, found := slices.BinarySearchFunc(phases, t, func(p Phase, t int64) int {
			switch {
			case p.End <= t:
				return -1
			case p.Start > t:
				return 1
			}
			return 0
		})
		if !found {
			return -1
		}
		return i
	}
	horizon := int64(blameHorizon)
	blame = func(t int64) int {
		for i := len(phases) - 1; i >= 0; i-- {
			if p := phases[i]; p.FaultStart != 0 && p.FaultStart <= t {
				if t <= p.FaultEnd+horizon {
					return i
				}
				break
			}
		}
		return phaseOf(t)
	}
	return phaseOf, blame
}

// AnalyzeLeases adds the lease workload's figures to res (one per phase,
// as Analyze returns them): calls are every worker's lease calls, looks
// the peeks at each settle target (indexed as targets).
func AnalyzeLeases(res []Result, phases []Phase, targets []LeaseTarget, calls []LeaseCall, looks [][]Look) {
	phaseOf, blame := blamers(phases)
	// The latest instant a failed acquire may have run: its reply, or the
	// end of the fault it was sent during.
	late := func(sent, replied int64) int64 {
		if i := phaseOf(sent); i >= 0 && phases[i].FaultStart != 0 && sent <= phases[i].FaultEnd {
			return max(replied, phases[i].FaultEnd)
		}
		return replied
	}
	per := make([][]LeaseCall, len(targets))
	for _, c := range calls {
		if int(c.Target) < len(targets) {
			per[c.Target] = append(per[c.Target], c)
		}
		if c.Op != OpAcquire {
			continue
		}
		if i := phaseOf(c.Sent); i >= 0 {
			switch c.Answer {
			case Granted:
				res[i].Leases++
			case DeniedSlots:
				res[i].LeaseDenied++
			case CallFailed:
				res[i].LeaseFailed++
			}
		}
	}
	for ti, tg := range targets {
		leases := Leases(per[ti])
		for _, at := range OverSlots(leases, LeaseSlots, LeaseTime) {
			if i := blame(at); i >= 0 {
				res[i].OverSlots++
			}
		}
		for _, at := range HeldByNobody(leases, LeaseSlots, LeaseTime, late) {
			if i := phaseOf(at); i >= 0 {
				res[i].Nobody++
			}
		}
		if !tg.Settle || ti >= len(looks) {
			continue
		}
		lost := make([]int64, len(phases))
		for _, l := range looks[ti] {
			if i := blame(l.Sent); i >= 0 {
				lost[i] = max(lost[i], SettleMissing(leases, Window, l))
			}
		}
		for i := range res {
			res[i].SettleLost += lost[i]
		}
	}
}

// recovery returns, for a fault phase, the time from the fault's end to
// the start of the first normal second that starts there or later
// (negative when there is none), the first degraded decision sent after
// the fault struck (relative to FaultStart) and the last (relative to
// FaultEnd; negative when it was sent before the fault ended).
func recovery(recs []Record, p Phase, threshold time.Duration) (rec, first, last time.Duration) {
	n := int((p.End-p.FaultEnd)/bucket) + 1
	degraded := make([]int, n)
	lat := make([][]time.Duration, n)
	first, last = -1, math.MinInt64
	for _, r := range recs {
		if r.Sent < p.FaultStart || r.Sent >= p.End {
			continue
		}
		if r.Outcome.Degraded() {
			if at := time.Duration(r.Sent - p.FaultStart); first < 0 || at < first {
				first = at
			}
			last = max(last, time.Duration(r.Sent-p.FaultEnd))
		}
		if r.Sent < p.FaultEnd {
			continue
		}
		b := int((r.Sent - p.FaultEnd) / bucket)
		lat[b] = append(lat[b], time.Duration(r.Replied-r.Sent))
		if r.Outcome.Degraded() {
			degraded[b]++
		}
	}
	rec = -1
	for b := 0; b+normalBucket <= n-1; b++ { // the last bucket is partial
		ok := true
		var ds []time.Duration
		for k := b; k < b+normalBucket && ok; k++ {
			ok = degraded[k] == 0
			ds = append(ds, lat[k]...)
		}
		if ok && percentile(ds, 0.99) <= threshold {
			rec = time.Duration(int64(b) * bucket)
			break
		}
	}
	return rec, first, last
}

// Timeline writes, per 100 ms from from to to (ns), the decisions sent,
// the store errors, the open circuit's answers, the p99 latency and the CPU
// the machine's other processes used (cpu, sampled per 100 ms; none
// without samples).
func Timeline(w io.Writer, recs []Record, cpu []CPUSample, from, to, mark int64) {
	n := int((to-from)/bucket) + 1
	type row struct {
		n, failed, circuit int
		lat                []time.Duration
	}
	rows := make([]row, n)
	for _, r := range recs {
		if r.Sent < from || r.Sent >= to {
			continue
		}
		b := &rows[(r.Sent-from)/bucket]
		b.n++
		b.lat = append(b.lat, time.Duration(r.Replied-r.Sent))
		switch r.Outcome {
		case Failed, NoScript:
			b.failed++
		case CircuitOpen:
			b.circuit++
		}
	}
	others := make([]time.Duration, n)
	for _, c := range cpu {
		if c.At > from && c.At <= to { // c covers the 100 ms before c.At
			others[(c.At-1-from)/bucket] += c.Others()
		}
	}
	for i, b := range rows {
		at := time.Duration(from + int64(i)*bucket - mark)
		fmt.Fprintf(w, "%+7.1fs %6d decisions %5d errors %5d circuit p99 %-9v others %.1f cores\n",
			at.Seconds(), b.n, b.failed, b.circuit, percentile(b.lat, 0.99).Round(10*time.Microsecond),
			others[i].Seconds()/(time.Duration(bucket)).Seconds())
	}
}

// ErrorCounts returns the error messages of the decisions sent from from
// to to, most frequent first, each as "<count>x <first sent, relative to
// from> <message>"; msgs[i-1] is the message of Record.Err i.
func ErrorCounts(recs []Record, msgs []string, from, to int64) []string {
	type count struct {
		n     int
		first int64
	}
	counts := map[uint16]*count{}
	for _, r := range recs {
		if r.Err == 0 || r.Sent < from || r.Sent >= to {
			continue
		}
		c := counts[r.Err]
		if c == nil {
			c = &count{first: r.Sent}
			counts[r.Err] = c
		}
		c.n++
		c.first = min(c.first, r.Sent)
	}
	keys := slices.Collect(maps.Keys(counts))
	slices.SortFunc(keys, func(a, b uint16) int { return counts[b].n - counts[a].n })
	var out []string
	for _, k := range keys {
		msg := "(message table full)"
		if int(k) <= len(msgs) {
			msg = msgs[k-1]
		}
		out = append(out, fmt.Sprintf("%dx from %+.1fs %s", counts[k].n, time.Duration(counts[k].first-from).Seconds(), msg))
	}
	return out
}

// percentile returns the q-th quantile of ds (which it sorts).
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(q*float64(len(ds))))]
}
