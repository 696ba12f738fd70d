package front

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/resolve"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/store"
)

// TestBudgetTraced: with a tracer, each Budget call a Limiter makes gets a
// span, as Decide's calls do, that says what it did with slices (a lease,
// a renewal that gives a slice back and asks for another, a return), of
// which policy and rule, and the units asked, granted and returned.
func TestBudgetTraced(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	m := memstore.New(memstore.Config{})
	t.Cleanup(func() { _ = m.Close() })
	f := New(m, Options{Registry: prometheus.NewPedanticRegistry(), Tracer: tp.Tracer("test")})
	b, ok := f.Store.ForLimiter().(store.Budgeter)
	if !ok {
		t.Fatal("ForLimiter over memstore is not a store.Budgeter")
	}
	p := &sluice.Policy{Name: "notify", Rules: []sluice.Rule{{Name: "global", Limit: 100, Window: time.Minute, Budget: time.Second}}}
	req, err := resolve.Request(p, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lease := &store.BudgetRequest{Asks: []store.SliceAsk{{Check: 0, Want: 10, ID: "a"}}}
	if err := b.Budget(ctx, req, lease); err != nil {
		t.Fatal(err)
	}
	g := lease.Grants[0]
	renew := &store.BudgetRequest{
		Returns: []store.SliceReturn{{Check: req.Checks[0], ID: "a", Start: g.Start, End: g.End, Granted: g.Granted, Used: 4}},
		Asks:    []store.SliceAsk{{Check: 0, Want: 20, ID: "b"}}}
	if err := b.Budget(ctx, req, renew); err != nil {
		t.Fatal(err)
	}
	g = renew.Grants[0]
	back := &store.BudgetRequest{Returns: []store.SliceReturn{{Check: req.Checks[0], ID: "b", Start: g.Start, End: g.End, Granted: g.Granted, Used: 5}}}
	if err := b.Budget(ctx, &store.Request{Policy: p.Name}, back); err != nil {
		t.Fatal(err)
	}
	bad := &store.BudgetRequest{Asks: []store.SliceAsk{{Check: 0, Want: 0, ID: "c"}}}
	if err := b.Budget(ctx, req, bad); err == nil {
		t.Fatal("Budget of an ask of 0 units: no error")
	}

	spans := exp.GetSpans()
	if len(spans) != 4 {
		t.Fatalf("%d spans, want 4 (lease, renew, return, refused)", len(spans))
	}
	for i, want := range []struct {
		op                        string
		asked, granted, returned  int64
		fits, hasFits, hasGranted bool
		status                    codes.Code
	}{
		{"lease", 10, 10, 0, true, true, true, codes.Unset},
		{"renew", 20, 20, 6, true, true, true, codes.Unset},
		{"return", 0, 0, 15, false, false, true, codes.Unset},
		{"lease", 0, 0, 0, false, false, false, codes.Error},
	} {
		s := spans[i]
		got := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes {
			got[kv.Key] = kv.Value
		}
		if s.Name != "sluice.store/Budget" {
			t.Errorf("span %d: name %q, want sluice.store/Budget", i, s.Name)
		}
		if s.Status.Code != want.status {
			t.Errorf("span %d: status %v, want %v", i, s.Status.Code, want.status)
		}
		if op := got["sluice.budget.op"].AsString(); op != want.op {
			t.Errorf("span %d: sluice.budget.op %q, want %q", i, op, want.op)
		}
		if pol := got["sluice.policy"].AsString(); pol != "notify" {
			t.Errorf("span %d: sluice.policy %q, want notify", i, pol)
		}
		if r := got["sluice.rules"].AsStringSlice(); !slices.Equal(r, []string{"global"}) {
			t.Errorf("span %d: sluice.rules %q, want [global]", i, r)
		}
		if v := got["sluice.budget.units_asked"].AsInt64(); v != want.asked {
			t.Errorf("span %d: units_asked %d, want %d", i, v, want.asked)
		}
		if v := got["sluice.budget.units_returned"].AsInt64(); v != want.returned {
			t.Errorf("span %d: units_returned %d, want %d", i, v, want.returned)
		}
		v, has := got["sluice.budget.units_granted"]
		if has != want.hasGranted || v.AsInt64() != want.granted {
			t.Errorf("span %d: units_granted %d (set %v), want %d (set %v)", i, v.AsInt64(), has, want.granted, want.hasGranted)
		}
		fv, has := got["sluice.fits"]
		if has != want.hasFits || fv.AsBool() != want.fits {
			t.Errorf("span %d: sluice.fits %v (set %v), want %v (set %v)", i, fv.AsBool(), has, want.fits, want.hasFits)
		}
	}
}
