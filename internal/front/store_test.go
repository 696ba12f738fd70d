package front

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/store"
)

// TestStoreFinishOps: an abandon (the Limiter's own, for an acquire that
// failed) is timed as op "abandon", the holders' releases, settles and
// extensions as "finish".
func TestStoreFinishOps(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := memstore.New(memstore.Config{})
	t.Cleanup(func() { _ = m.Close() })
	f := New(m, Options{Registry: reg})
	req := store.FinishRequest{Policy: "llm", Checks: []store.Check{{Rule: "in-flight", Algorithm: store.Concurrency}}, ID: "x"}
	for _, op := range []store.LeaseOp{store.LeaseRelease, store.LeaseSettle, store.LeaseAbandon} {
		req.Op = op
		if _, err := f.Store.Finish(context.Background(), &req); err != nil {
			t.Fatal(err)
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]uint64{}
	for _, mf := range mfs {
		if mf.GetName() != "sluice_store_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "op" {
					got[l.GetValue()] = m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	if got["finish"] != 2 || got["abandon"] != 1 {
		t.Errorf("store calls timed by op: %v, want finish 2 and abandon 1", got)
	}
}
