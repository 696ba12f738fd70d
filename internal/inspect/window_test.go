package inspect

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/wire"
	"github.com/sluicerate/sluice/store"
)

// t0 is the store's time every window below is read at.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

func bools(w Window) (entries, slices []string) {
	str := func(b *bool) string {
		switch {
		case b == nil:
			return "?"
		case *b:
			return "in"
		}
		return "out"
	}
	for _, e := range w.Entries {
		entries = append(entries, str(e.Counts))
	}
	for _, s := range w.Slices {
		slices = append(slices, str(s.Counts))
	}
	return entries, slices
}

// TestWindowLog: a log's entries inside the window count and say when
// they leave it; the newest, kept for the minimum gap, says how long the
// gap has left; the peek's figures are the rule's.
func TestWindowLog(t *testing.T) {
	c := &store.Check{Rule: "per-user", Algorithm: store.Log, Limit: 10, Window: time.Minute, MinGap: 20 * time.Second, Cost: 1}
	st := &sluice.LimitStatus{Rule: "per-user", Used: 6, Remaining: 4, ResetAfter: 50 * time.Second}
	sw := &StoredWindow{Rule: "per-user", Key: "k", TTL: 70 * time.Second, Entries: []StoredEntry{
		{Time: at(-90 * time.Second), Cost: 7}, {Time: at(-30 * time.Second), Cost: 2}, {Time: at(-10 * time.Second), Cost: 3},
	}}
	w := newWindow(rule{check: c, status: st, counted: true}, sw, nil, t0)
	entries, _ := bools(w)
	if got, want := entries, []string{"out", "in", "in"}; !slices.Equal(got, want) {
		t.Errorf("entries count %v, want %v", got, want)
	}
	var leaves []int64
	for _, e := range w.Entries {
		leaves = append(leaves, *e.LeavesInMS)
	}
	if got, want := leaves, []int64{0, 30000, 50000}; !slices.Equal(got, want) {
		t.Errorf("entries leave in %v ms, want %v", got, want)
	}
	if w.Counted == nil || *w.Counted != 5 {
		t.Errorf("counted %v, want 5: the costs inside the window", w.Counted)
	}
	if w.GapLeftMS != 10000 || w.TTLMS != 70000 || w.Key != "k" || w.Algorithm != "log" || w.Leases != nil || w.Slices != nil {
		t.Errorf("window %+v, want 10 s of gap left, a TTL of 70 s, no leases or slices", w)
	}
	if w.Used != 6 || w.Remaining != 4 || w.ResetAfterMS != 50000 || w.Limit != 10 || w.WindowMS != 60000 || w.MinGapMS != 20000 || w.Alive != nil {
		t.Errorf("figures %+v, want the peek's and the rule's", w)
	}
}

// TestWindowSlices: a budgeted log counts a slice until its entry leaves
// the window, beside the entries; a bucket's slice only until its hold
// ends; without the rule every slice the store holds is listed, unjudged.
func TestWindowSlices(t *testing.T) {
	list := []StoredSlice{{Units: 5, Ends: at(-2 * time.Minute)}, {Units: 7, Ends: at(-10 * time.Second)}, {Units: 9, Ends: at(5 * time.Second)}}
	tests := []struct {
		name          string
		check         *store.Check
		wantSlices    []string
		wantUnits     []int64
		sliced        int64
		counted       int64 // -1: none
		wantSlicesKey string
	}{
		{"log", &store.Check{Rule: "g", Algorithm: store.Log, Limit: 100, Window: time.Minute, Budget: time.Minute, Cost: 1},
			[]string{"in", "in"}, []int64{7, 9}, 16, 4 + 16, "s"},
		{"gcra", &store.Check{Rule: "g", Algorithm: store.GCRA, Limit: 100, Window: time.Minute, Budget: time.Minute, Cost: 1},
			[]string{"in"}, []int64{9}, 9, -1, "s"},
		{"no rule", nil, []string{"?", "?", "?"}, []int64{5, 7, 9}, -1, -1, "s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sw := &StoredWindow{Rule: "g", Key: "k", SlicesKey: "s", Entries: []StoredEntry{{Time: at(-time.Second), Cost: 4}}, Slices: list}
			if tt.check != nil && tt.check.Algorithm == store.GCRA {
				sw.Entries, sw.State = nil, []int64{at(time.Second).UnixMicro()}
			}
			w := newWindow(rule{check: tt.check}, sw, sw.Slices, t0)
			_, got := bools(w)
			var units []int64
			for _, s := range w.Slices {
				units = append(units, s.Units)
			}
			if !slices.Equal(got, tt.wantSlices) || !slices.Equal(units, tt.wantUnits) || w.SlicesKey != tt.wantSlicesKey {
				t.Errorf("slices %v of %v units (key %q), want %v of %v", got, units, w.SlicesKey, tt.wantSlices, tt.wantUnits)
			}
			if tt.sliced < 0 != (w.Sliced == nil) || w.Sliced != nil && *w.Sliced != tt.sliced {
				t.Errorf("sliced %v, want %d (-1: none)", w.Sliced, tt.sliced)
			}
			if tt.counted < 0 != (w.Counted == nil) || w.Counted != nil && *w.Counted != tt.counted {
				t.Errorf("counted %v, want %d (-1: none)", w.Counted, tt.counted)
			}
		})
	}
}

// TestWindowConcurrency: a concurrency rule's window lists its leases;
// alive is the peek's count without its own lease, counted the leases the
// store shows; its window is its lease time.
func TestWindowConcurrency(t *testing.T) {
	c := &store.Check{Rule: "in-flight", Algorithm: store.Concurrency, Limit: 3, Window: 30 * time.Second, Cost: 1}
	st := &sluice.LimitStatus{Rule: "in-flight", Used: 3, Remaining: 0}
	sw := &StoredWindow{Rule: "in-flight", Key: "k", TTL: -1, Leases: []StoredLease{
		{Token: "a", Expires: at(1500 * time.Microsecond)}, {Token: "b", Expires: at(20 * time.Second)},
	}}
	w := newWindow(rule{check: c, status: st, counted: true}, sw, nil, t0)
	if w.Alive == nil || *w.Alive != 2 || w.Counted == nil || *w.Counted != 2 || w.Used != 3 {
		t.Errorf("alive %v, counted %v, used %d; want 2, 2 and the peek's 3", w.Alive, w.Counted, w.Used)
	}
	if w.LeaseMS != 30000 || w.WindowMS != 30000 || w.TTLMS != -1 || w.Algorithm != "concurrency" {
		t.Errorf("window %+v, want a lease and window of 30 s, no expiry", w)
	}
	if len(w.Leases) != 2 || w.Leases[0].Token != "a" || w.Leases[0].ExpiresInMS != 2 || w.Leases[1].ExpiresInMS != 20000 {
		t.Errorf("leases %+v, want a in 2 ms (rounded up), b in 20 s", w.Leases)
	}
	// The store shows no window (the memory store): the figures alone.
	w = newWindow(rule{check: c, status: st}, nil, nil, t0)
	if w.Leases != nil || w.Counted != nil || w.Alive == nil || *w.Alive != 3 || w.Key != "" {
		t.Errorf("figures only: %+v, want 3 alive by the peek (it would not admit), no leases listed", w)
	}
}

// TestStored: windows found without their rules keep their order and the
// algorithm their key gives, with nothing judged against a rule.
func TestStored(t *testing.T) {
	r := Stored("notify", "redis", []StoredWindow{
		{Rule: "category", Key: "p:{notify,e}2g:category", Algorithm: store.GCRA, TTL: time.Second, State: []int64{42}},
		{Rule: "global", Key: "p:{notify}2l:global", Algorithm: store.Log, TTL: time.Minute, Entries: []StoredEntry{{Time: at(-2 * time.Minute), Cost: 1}}},
	}, t0)
	if len(r.Windows) != 2 || r.Windows[0].Rule != "category" || r.Windows[0].Algorithm != "gcra" || r.Windows[1].Rule != "global" {
		t.Fatalf("windows %+v, want category's bucket then global's log", r.Windows)
	}
	if e := r.Windows[1].Entries[0]; e.Counts != nil || e.LeavesInMS != nil || e.AgeMS != 120000 || r.Windows[1].Counted != nil {
		t.Errorf("global's entry %+v (counted %v), want its age and no judgement without the rule", e, r.Windows[1].Counted)
	}
	if !r.EntriesShown || r.Next != nil || r.Policy != "notify" || !r.Now.Equal(t0) {
		t.Errorf("report %+v, want the store's entries at t0 and no next decision", r)
	}
}

// TestWriteTextQuotas: a calendar quota's stored window says its period
// and count, a credits balance its balance and the period of its last
// refill.
func TestWriteTextQuotas(t *testing.T) {
	r := Stored("api", "redis", []StoredWindow{
		{Rule: "month", Key: "p:{api,ann}2p:month", Algorithm: store.Periodic, TTL: time.Hour, State: []int64{24314, 7}},
		{Rule: "credits", Key: "p:{api,ann}2b:credits", Algorithm: store.Credits, TTL: -1, State: []int64{-3, 24313}},
	}, t0)
	var b strings.Builder
	if err := WriteText(&b, &r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"calendar: period 24314 counts 7", "credits: balance -3, refilled last in period 24313"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
}

// TestPeekCounted: a peek's figures count the request when every rule
// that is not shadow fits.
func TestPeekCounted(t *testing.T) {
	req := &store.Request{Checks: []store.Check{{Rule: "a"}, {Rule: "b", Shadow: true}}}
	tests := []struct {
		name   string
		limits []sluice.LimitStatus
		want   bool
	}{
		{"all fit", []sluice.LimitStatus{{Rule: "a"}, {Rule: "b"}}, true},
		{"a shadow rule denies", []sluice.LimitStatus{{Rule: "a"}, {Rule: "b", Cause: sluice.CauseLimit}}, true},
		{"a rule denies", []sluice.LimitStatus{{Rule: "a", Cause: sluice.CauseGap}, {Rule: "b"}}, false},
		{"no figures (a failure)", nil, false},
	}
	for _, tt := range tests {
		var d sluice.Decision
		d.SetLimits(tt.limits)
		if got := peekCounted(req, &d); got != tt.want {
			t.Errorf("%s: peekCounted = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestQueue: the pending reservations are those whose slot has not
// passed, and the next one waits until the last one's length has run.
func TestQueue(t *testing.T) {
	sc := &sluice.Schedule{Name: "carrier", Rate: sluice.Rate{Events: 4, Per: time.Second}, MaxDelay: 2 * time.Second, MaxQueue: 8}
	q := newQueue(sc, []StoredSlot{
		{Slot: at(-100 * time.Millisecond), Length: 250 * time.Millisecond, ID: "x"},
		{Slot: at(150 * time.Millisecond), Length: 500 * time.Millisecond, ID: "y"},
	}, t0)
	if q.Pending != 1 || q.NextDelayMS != 650 || q.IntervalMS != 250 || q.MaxDelayMS != 2000 || q.MaxQueue != 8 {
		t.Errorf("queue %+v, want 1 pending, the next in 650 ms", q)
	}
	if len(q.Slots) != 2 || q.Slots[0].InMS != -100 || q.Slots[1].LengthMS != 500 || q.Slots[1].ID != "y" {
		t.Errorf("slots %+v", q.Slots)
	}
}

// TestWriteText: the text shows the next request's answer, each window's
// figures, and what is kept outside the window.
func TestWriteText(t *testing.T) {
	c := &store.Check{Rule: "per-user", Algorithm: store.Log, Limit: 10, Window: time.Minute, MinGap: 5 * time.Minute, Cost: 1}
	sw := &StoredWindow{Rule: "per-user", Key: "p:{push,ann}2l:per-user", TTL: time.Minute, Entries: []StoredEntry{{Time: at(-2 * time.Minute), Cost: 1}}}
	r := Report{Policy: "push", Store: "redis", Now: t0, Windows: []Window{newWindow(rule{check: c}, sw, nil, t0)},
		Next: &wire.DecisionJSON{DeniedBy: "per-user", Cause: string(sluice.CauseGap), RetryAfterMS: 180000}}
	var b strings.Builder
	if err := WriteText(&b, &r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`policy "push" on redis, server time 2026-03-01T12:00:00Z`,
		"denied by rule per-user, too soon after the last event; retry in 3m0s",
		"rule per-user: 0/10 used per 1m0s; 1 entries; expires in 1m0s\n  key p:{push,ann}2l:per-user",
		"#1    age 2m0s         cost 1  (outside the window; kept for the min gap)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, b.String())
		}
	}
}
