package soak

import (
	"math"
	"slices"
	"testing"
	"time"
)

func TestDecodeBudgetCalls(t *testing.T) {
	calls := []BudgetCall{
		{Outcome: Allowed, Local: true, Sent: 1, Replied: 2},
		{Outcome: Denied, Sent: 3, Replied: 40},
		{Outcome: Failed, Sent: 1 << 60, Replied: 1<<60 + 5},
	}
	var b []byte
	for _, c := range calls {
		b = appendBudgetCall(b, c)
	}
	if got := DecodeBudgetCalls(b); !slices.Equal(got, calls) {
		t.Errorf("decoded %v, want %v", got, calls)
	}
	// A process killed in the middle of a write leaves part of a call.
	if got := DecodeBudgetCalls(b[:len(b)-3]); !slices.Equal(got, calls[:2]) {
		t.Errorf("with a partial call at the end: decoded %v, want %v", got, calls[:2])
	}
}

func TestDecodeSliceLooks(t *testing.T) {
	looks := []SliceLook{
		{At: 1 << 60, Granted: 40, Used: 12, Left: 321 * time.Millisecond},
		{At: 1<<60 + 50, Granted: 0, Used: 0, Left: 0},
	}
	var b []byte
	for _, l := range looks {
		b = appendSliceLook(b, l)
	}
	if got := DecodeSliceLooks(b); !slices.Equal(got, looks) {
		t.Errorf("decoded %v, want %v", got, looks)
	}
	if got := DecodeSliceLooks(b[:len(b)-1]); !slices.Equal(got, looks[:1]) {
		t.Errorf("with a partial look at the end: decoded %v, want %v", got, looks[:1])
	}
}

func TestBudgetAdmissions(t *testing.T) {
	calls := []BudgetCall{
		{Outcome: Allowed, Sent: 5 * ms, Replied: 9 * ms},
		{Outcome: Denied, Sent: 1 * ms, Replied: 2 * ms},
		{Outcome: Allowed, Local: true, Sent: 6 * ms, Replied: 7 * ms},
		{Outcome: Failed, Sent: 0, Replied: 1 * ms},
	}
	want := []Interval{at(6, 1), at(5, 4)}
	if got := BudgetAdmissions(calls); !slices.Equal(got, want) {
		t.Errorf("admissions %v, want %v (the admitted, by reply)", got, want)
	}
}

func TestWindowCounts(t *testing.T) {
	// Windows of 1 s ending at 1000, 1500 and 2000 ms.
	ends := []int64{1000 * ms, 1500 * ms, 2000 * ms}
	for _, tc := range []struct {
		name string
		adm  []Interval
		want []int64
	}{
		{"none", nil, []int64{0, 0, 0}},
		{"each in its windows", []Interval{at(100, 1), at(600, 1), at(1200, 1)}, []int64{2, 2, 1}},
		// Sent at 0: the window (0, 1000] may not hold it.
		{"sent at the window's start", []Interval{at(0, 1)}, []int64{0, 0, 0}},
		// Answered at 1001: it may have been recorded after 1000.
		{"answered after the window's end", []Interval{at(999, 2)}, []int64{0, 1, 0}},
		// Recorded somewhere in [400, 1600]: in no one window for certain.
		{"spans two windows", []Interval{at(400, 1200)}, []int64{0, 0, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			SortAdmissions(tc.adm)
			if got := WindowCounts(tc.adm, time.Second, ends); !slices.Equal(got, tc.want) {
				t.Errorf("counts %v, want %v", got, tc.want)
			}
		})
	}
}

// WindowCounts agrees with SlidingOver: a window it counts more than the
// limit in is a certain over-admission.
func TestWindowCountsAgreesWithSlidingOver(t *testing.T) {
	adm := []Interval{at(0, 1), at(300, 2), at(600, 1), at(900, 3), at(1100, 1)}
	SortAdmissions(adm)
	var ends []int64
	for _, a := range adm {
		ends = append(ends, a.Replied)
	}
	counts := WindowCounts(adm, time.Second, ends)
	if got, want := slices.Max(counts), int64(4); got != want {
		t.Fatalf("most in a window %d, want %d", got, want)
	}
	if got := total(SlidingOver(adm, 3, time.Second)); got != 1 {
		t.Errorf("SlidingOver with limit 3: excess %d, want 1", got)
	}
	if got := total(SlidingOver(adm, 4, time.Second)); got != 0 {
		t.Errorf("SlidingOver with limit 4: excess %d, want 0", got)
	}
}

func TestSteadyEnds(t *testing.T) {
	s := int64(time.Second)
	for _, tc := range []struct {
		name string
		busy []Span
		want []int64
	}{
		{"no fault", nil, []int64{2 * s, 3 * s, 4 * s, 5 * s, 6 * s}},
		// A fault from 3.5 s to 4 s: every window that holds any of it
		// is out, (2, 4] and (3, 5]; (4, 6] starts at its end.
		{"a fault", []Span{{3*s + s/2, 4 * s}}, []int64{2 * s, 3 * s, 6 * s}},
		{"a fault to the end", []Span{{4 * s, 9 * s}}, []int64{2 * s, 3 * s}},
		{"two faults", []Span{{1 * s, 2 * s}, {5 * s, 5 * s}}, []int64{4 * s}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Windows of 2 s ending each second, in [0, 6 s].
			if got := SteadyEnds(0, 6*s, time.Second, 2*time.Second, tc.busy); !slices.Equal(got, tc.want) {
				t.Errorf("steady ends %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAnalyzeBudget(t *testing.T) {
	s := int64(time.Second)
	w := int64(BudgetWindow)
	// A run of 20 s: a baseline to 10 s, then a phase whose fault strikes
	// at 12 s and ends at 13 s.
	phases := []Phase{
		{Topology: "x", Name: "baseline", Start: 0, End: 10 * s},
		{Topology: "x", Name: "fault", Start: 10 * s, FaultStart: 12 * s, FaultEnd: 13 * s, End: 20 * s},
	}
	// The limit admitted evenly, BudgetLimit per window, one admission
	// every BudgetWindow / BudgetLimit (rounded up), answered at once; nothing from the
	// fault's start until 14 s; a denial each second, and failures during
	// the fault.
	every := w/BudgetLimit + 1 // no more than BudgetLimit in any window
	var calls []BudgetCall
	for at := every / 2; at < 20*s; at += every {
		if at >= 12*s && at < 14*s {
			continue
		}
		calls = append(calls, BudgetCall{Outcome: Allowed, Local: at%(2*every) < every, Sent: at, Replied: at})
	}
	for at := int64(0); at < 20*s; at += s {
		calls = append(calls, BudgetCall{Outcome: Denied, Sent: at, Replied: at + 1})
	}
	for at := 12 * s; at < 13*s; at += s / 10 { // the store failed during the fault
		calls = append(calls, BudgetCall{Outcome: Failed, Sent: at, Replied: at + 1})
	}
	res := make([]Result, len(phases))
	for i, p := range phases {
		res[i].Phase = p
	}
	AnalyzeBudget(res, phases, calls, 0)

	if got, want := res[0].BudgetDecisions, 10*BudgetLimit/2+10; got != want {
		t.Errorf("baseline decisions %d, want %d", got, want)
	}
	if got, want := res[0].BudgetAdmitted, 10*BudgetLimit/2; got != want {
		t.Errorf("baseline admitted %d, want %d", got, want)
	}
	if got, want := res[0].BudgetLocal, 10*BudgetLimit/4; got != want {
		t.Errorf("baseline answered locally %d, want %d", got, want)
	}
	if got, want := res[0].BudgetDegraded, 0; got != want {
		t.Errorf("baseline degraded %d, want %d", got, want)
	}
	if got, want := res[1].BudgetDegraded, 10; got != want {
		t.Errorf("fault phase degraded %d, want %d", got, want)
	}
	for i, r := range res {
		if r.BudgetOver != 0 {
			t.Errorf("phase %d: over-admissions %d, want 0", i, r.BudgetOver)
		}
	}
	// Baseline: windows ending at 2 s, 2.1 s, ... 10 s less 100 ms (the
	// end at 10 s is the next phase's), each with the limit but for
	// rounding at its edges.
	if got, want := res[0].BudgetSteadyWins, 80; got != want {
		t.Errorf("baseline steady windows %d, want %d", got, want)
	}
	if replied, certain, _ := SteadyShare(res[:1]); math.Abs(replied-1) > 0.001 || math.Abs(certain-1) > 0.001 {
		t.Errorf("baseline steady share %.4f answered, %.4f certainly in; want 1 and 1", replied, certain)
	}
	// The fault phase: windows ending from 10 s to before 12 s are steady,
	// then none until a window after the aftermath (13 s + 4.5 s): those
	// ending from 19.5 s to the run's end (20 s, which is no phase's).
	if got, want := res[1].BudgetSteadyWins, 20+5; got != want {
		t.Errorf("fault phase steady windows %d, want %d", got, want)
	}
	// The fewest from the fault to D + W after its end: the window ending
	// at 14 s lost the 2 s from 12 s, the whole window.
	if got := res[1].BudgetLow; got != 0 {
		t.Errorf("fault phase fewest in a window %d, want 0", got)
	}
	if got := res[0].BudgetSteadyLow; got < BudgetLimit-1 || got > BudgetLimit {
		t.Errorf("baseline fewest in a steady window %d, want %d or %d", got, BudgetLimit-1, BudgetLimit)
	}
	if got := res[0].BudgetLow; got != -1 {
		t.Errorf("baseline fewest in a window %d, want -1 (no fault)", got)
	}

	// A store failure in the baseline, at 5 s, is a fault too: no window
	// that meets [5 s, 5 s + the aftermath] is steady, those ending from
	// 5 s to 11.5 s; the baseline keeps those ending from 2 s to 4.9 s.
	failed := append(slices.Clone(calls), BudgetCall{Outcome: Failed, Sent: 5 * s, Replied: 5 * s})
	res3 := make([]Result, len(phases))
	for i, p := range phases {
		res3[i].Phase = p
	}
	AnalyzeBudget(res3, phases, failed, 0)
	if got, want := res3[0].BudgetSteadyWins, 30; got != want {
		t.Errorf("with a failure at 5 s: baseline steady windows %d, want %d", got, want)
	}
	if got, want := res3[1].BudgetSteadyWins, 5+5; got != want {
		t.Errorf("with a failure at 5 s: fault phase steady windows %d, want %d (from 11.5 s, and from 19.5 s)", got, want)
	}

	// Admissions beyond the limit in full windows: 5 in the baseline, 2
	// after the fault, which the excess is blamed on.
	for range 5 {
		calls = append(calls, BudgetCall{Outcome: Allowed, Sent: 6*s + 7, Replied: 6*s + 8})
	}
	for range 2 {
		calls = append(calls, BudgetCall{Outcome: Allowed, Sent: 19*s + 7, Replied: 19*s + 8})
	}
	res2 := make([]Result, len(phases))
	for i, p := range phases {
		res2[i].Phase = p
	}
	AnalyzeBudget(res2, phases, calls, 0)
	if got := res2[0].BudgetOver; got != 5 {
		t.Errorf("baseline with 5 admissions more: over-admissions %d, want 5", got)
	}
	if got := res2[1].BudgetOver; got != 2 {
		t.Errorf("fault phase with 2 admissions more: over-admissions %d, want 2", got)
	}
}

func TestMergeSpans(t *testing.T) {
	got := MergeSpans([]Span{{5, 6}, {1, 3}, {2, 4}, {4, 4}, {8, 9}, {7, 8}})
	if want := []Span{{1, 4}, {5, 6}, {7, 9}}; !slices.Equal(got, want) {
		t.Errorf("merged %v, want %v", got, want)
	}
}

func TestSteadyShare(t *testing.T) {
	if replied, certain, wins := SteadyShare([]Result{{}}); !math.IsNaN(replied) || !math.IsNaN(certain) || wins != 0 {
		t.Errorf("no windows: %v, %v, %d; want NaN, NaN, 0", replied, certain, wins)
	}
	res := []Result{
		{BudgetSteady: 2 * BudgetLimit, BudgetSteadyCertain: BudgetLimit, BudgetSteadyWins: 2},
		{BudgetSteady: BudgetLimit / 2, BudgetSteadyCertain: BudgetLimit / 2, BudgetSteadyWins: 1},
	}
	if replied, certain, wins := SteadyShare(res); math.Abs(replied-2.5/3) > 1e-9 || math.Abs(certain-1.5/3) > 1e-9 || wins != 3 {
		t.Errorf("shares %v and %v over %d windows, want %v and %v over 3", replied, certain, wins, 2.5/3, 1.5/3)
	}
}

func TestReplyCounts(t *testing.T) {
	// Windows of 1 s ending at 1000, 1500 and 2000 ms.
	ends := []int64{1000 * ms, 1500 * ms, 2000 * ms}
	adm := []Interval{at(0, 1), at(400, 1200), at(999, 1), at(999, 2), at(1400, 1)}
	SortAdmissions(adm)
	// By reply: 1, 1000, 1001, 1401, 1600 ms; (0, 1000] holds the first
	// two, (500, 1500] the second to the fourth, (1000, 2000] the last
	// three.
	if got, want := ReplyCounts(adm, time.Second, ends), []int64{2, 3, 3}; !slices.Equal(got, want) {
		t.Errorf("counts %v, want %v", got, want)
	}
	// Certainly in: the call spanning 400 to 1600 ms is in none, nor are
	// those sent at 999 ms in (1000, 2000].
	if got, want := WindowCounts(adm, time.Second, ends), []int64{1, 3, 1}; !slices.Equal(got, want) {
		t.Errorf("certain counts %v, want %v", got, want)
	}
}
