package front

import (
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicerate/sluice/store"
)

func TestLeaseBook(t *testing.T) {
	b := newLeaseBook()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	b.now = func() time.Time { return now }
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(b)
	req := &store.Request{Policy: "llm", Checks: []store.Check{{Rule: "tokens"}, {Rule: "in-flight", Algorithm: store.Concurrency}}}
	for _, id := range []string{"a", "b", "c"} {
		b.granted(req, &store.LeaseGrant{ID: id, TTL: 30 * time.Second})
	}
	b.granted(&store.Request{Policy: "llm", Checks: req.Checks[:1]}, &store.LeaseGrant{ID: "rate-only", TTL: time.Minute})
	b.finished(&store.FinishRequest{ID: "a", Op: store.LeaseRelease}, store.LeaseState{Held: true})
	b.finished(&store.FinishRequest{ID: "a", Op: store.LeaseRelease}, store.LeaseState{Held: false})
	now = now.Add(10 * time.Second)
	b.finished(&store.FinishRequest{ID: "b", Op: store.LeaseExtend, TTL: 30 * time.Second}, store.LeaseState{Held: true})
	check := func(what string, flight, expired float64) {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]float64{}
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				labels := ""
				for _, l := range m.GetLabel() {
					labels += l.GetName() + "=" + l.GetValue() + ","
				}
				got[mf.GetName()+"{"+labels+"}"] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
		if g := got["sluice_leases_in_flight{policy=llm,rule=in-flight,}"]; g != flight {
			t.Errorf("%s: in flight %v, want %v (%v)", what, g, flight, got)
		}
		if g := got["sluice_leases_expired_total{policy=llm,rule=in-flight,}"]; g != expired {
			t.Errorf("%s: expired %v, want %v (%v)", what, g, expired, got)
		}
		// The admin view's snapshot has the same figures.
		want := []LeaseFigures{{Policy: "llm", Rule: "in-flight", InFlight: int64(flight), Expired: int64(expired)}}
		if snap := b.snapshot(); !slices.Equal(snap, want) {
			t.Errorf("%s: snapshot %+v, want %+v", what, snap, want)
		}
	}
	check("b and c held", 2, 0)
	// At 30s c expires unreleased; b, extended at 10s, is held to 40s.
	now = now.Add(20 * time.Second)
	check("c expired", 1, 1)
	b.finished(&store.FinishRequest{ID: "b", Op: store.LeaseSettle}, store.LeaseState{Held: true})
	check("b settled", 0, 1)
}
