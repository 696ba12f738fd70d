package soak

import (
	"os"
	"slices"
	"testing"
	"time"
)

// tinyMix is one target with one log window of 2 per second.
func tinyMix() *Mix {
	return &Mix{
		Targets: []Target{{Wins: []int{0}, Peek: true}},
		Weights: []float64{1},
		Wins:    []Win{{Name: "w", Rule: "r", Peek: true, Bounds: []Bound{{Kind: Sliding, Limit: 2, Window: time.Second}}}},
	}
}

const sec = int64(time.Second)

// steady returns one decision every 10 ms from from to to (ns), each
// taking 1 ms, with outcome o.
func steady(from, to int64, o Outcome) []Record {
	var out []Record
	for t := from; t < to; t += 10 * ms {
		out = append(out, Record{Outcome: o, Sent: t, Replied: t + ms})
	}
	return out
}

func TestAnalyzeRecovery(t *testing.T) {
	phases := []Phase{
		{Name: "baseline", Start: 0, End: 10 * sec},
		{Name: "fault", Start: 10 * sec, FaultStart: 11 * sec, FaultEnd: 12 * sec, End: 20 * sec},
	}
	var recs []Record
	recs = append(recs, steady(0, 11*sec, Denied)...)
	// Degraded from the fault's start until 0.5 s after its end.
	recs = append(recs, steady(11*sec, 12*sec+sec/2, Failed)...)
	recs = append(recs, steady(12*sec+sec/2, 20*sec, Denied)...)
	res := Analyze(tinyMix(), phases, recs, nil, 5*time.Millisecond)
	if got, want := res[0].Decisions, 1000; got != want {
		t.Errorf("baseline: %d decisions, want %d", got, want)
	}
	r := res[1]
	if got, want := r.Degraded, 150; got != want {
		t.Errorf("%d degraded, want %d", got, want)
	}
	if got, want := r.Recovery, 500*time.Millisecond; got != want {
		t.Errorf("recovery %v, want %v", got, want)
	}
	if r.FirstDegraded != 0 || r.LastDegraded != 490*time.Millisecond {
		t.Errorf("degraded from +%v to %v after the end, want +0s and 490ms", r.FirstDegraded, r.LastDegraded)
	}

	// Slow answers keep the service abnormal: every answer after the
	// fault takes 20 ms, over the 5 ms threshold.
	for i := range recs {
		if recs[i].Sent >= 12*sec {
			recs[i].Outcome, recs[i].Replied = Denied, recs[i].Sent+20*ms
		}
	}
	if got := Analyze(tinyMix(), phases, recs, nil, 5*time.Millisecond)[1].Recovery; got >= 0 {
		t.Errorf("recovery %v with every answer slow, want none (negative)", got)
	}
}

func TestAnalyzeOverAndLost(t *testing.T) {
	phases := []Phase{
		{Name: "baseline", Start: 0, End: 10 * sec},
		{Name: "fault", Start: 10 * sec, FaultStart: 11 * sec, FaultEnd: 11 * sec, End: 20 * sec},
	}
	recs := []Record{
		// Two a second: at the limit.
		{Outcome: Allowed, Sent: 1 * sec, Replied: 1*sec + ms},
		{Outcome: Allowed, Sent: 1*sec + sec/2, Replied: 1*sec + sec/2 + ms},
		{Outcome: Denied, Sent: 1*sec + 600*ms, Replied: 1*sec + 601*ms},
		// After the fault, three within 100 ms: one over.
		{Outcome: Allowed, Sent: 12 * sec, Replied: 12*sec + ms},
		{Outcome: Allowed, Sent: 12*sec + 50*ms, Replied: 12*sec + 51*ms},
		{Outcome: Allowed, Sent: 12*sec + 100*ms, Replied: 12*sec + 101*ms},
	}
	looks := [][]Look{{
		{Sent: 2 * sec, Replied: 2*sec + ms, Held: 2},            // baseline: all held
		{Sent: 12*sec + 50*ms, Replied: 12*sec + 51*ms, Held: 0}, // the first of the fault's was lost
	}}
	res := Analyze(tinyMix(), phases, recs, looks, time.Second)
	if res[0].Over != 0 || res[0].Lost != 0 {
		t.Errorf("baseline: %d over, %d lost, want 0 and 0", res[0].Over, res[0].Lost)
	}
	if res[1].Over != 1 || res[1].OverWins != 1 {
		t.Errorf("fault: %d over in %d windows, want 1 in 1", res[1].Over, res[1].OverWins)
	}
	if res[1].Lost != 1 || res[1].LostWins != 1 {
		t.Errorf("fault: %d lost in %d windows, want 1 in 1", res[1].Lost, res[1].LostWins)
	}
	if res[1].Allowed != 3 || res[0].Allowed != 2 {
		t.Errorf("admitted %d and %d, want 2 and 3", res[0].Allowed, res[1].Allowed)
	}
}

func TestRecordsRoundTrip(t *testing.T) {
	path := t.TempDir() + "/records"
	want := []Record{
		{Target: 3, Outcome: Allowed, Sent: 1_700_000_000_123_456_789, Replied: 1_700_000_000_124_000_000},
		{Target: 65535, Outcome: CircuitOpen, Sent: -1, Replied: 0, Err: 7},
	}
	if err := WriteRecords(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadRecords(path)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("read %+v, want %+v", got, want)
	}
	if err := os.WriteFile(path, make([]byte, recordSize+1), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadRecords(path); err == nil {
		t.Error("a file with a partial record: no error")
	}
}

func TestAnalyzeBlamesTheFault(t *testing.T) {
	// The fault at 11 s ends at 11 s; the next phase starts at 15 s and
	// has no fault. Three admissions within 100 ms at 16 s (one over) are
	// blamed on the fault; three more at 40 s, on the phase they happen in.
	phases := []Phase{
		{Name: "fault", Start: 10 * sec, FaultStart: 11 * sec, FaultEnd: 11 * sec, End: 15 * sec},
		{Name: "after", Start: 15 * sec, End: 50 * sec},
	}
	var recs []Record
	for _, at := range []int64{16 * sec, 40 * sec} {
		for k := range int64(3) {
			recs = append(recs, Record{Outcome: Allowed, Sent: at + k*50*ms, Replied: at + k*50*ms + ms})
		}
	}
	res := Analyze(tinyMix(), phases, recs, nil, time.Second)
	if res[0].Over != 1 || res[1].Over != 1 {
		t.Errorf("over-admissions %d and %d, want 1 and 1", res[0].Over, res[1].Over)
	}
	if res[0].Decisions != 0 || res[1].Decisions != 6 {
		t.Errorf("decisions %d and %d, want 0 and 6: counted where they were sent", res[0].Decisions, res[1].Decisions)
	}
}
