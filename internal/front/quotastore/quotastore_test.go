package quotastore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/store"
)

// decideOnly is a store that keeps no balances or usage.
type decideOnly struct{ store.Store }

func TestCalls(t *testing.T) {
	ctx := context.Background()
	st := memstore.New(memstore.Config{Clock: func() time.Time { return time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC) }})
	t.Cleanup(func() { st.Close() })
	var ops []string
	c := Calls{Store: st, Observe: func(op string, _ time.Time, err error) {
		if err != nil {
			t.Errorf("%s observed with %v", op, err)
		}
		ops = append(ops, op)
	}}
	credit := store.CreditRequest{Policy: "api", Check: store.Check{Rule: "c", Algorithm: store.Credits, Limit: 5, Window: time.Microsecond},
		Op: store.CreditAdd, Amount: 3}
	if err := c.Credit(ctx, &credit); err != nil || credit.Balance != 8 || !credit.Applied {
		t.Fatalf("Credit: %v, balance %d applied %v; want 8, applied", err, credit.Balance, credit.Applied)
	}
	usage := store.UsageRequest{Policy: "api", Check: store.Check{Rule: "m", Algorithm: store.Periodic, Limit: 5,
		Window: store.MaxPeriodLength, Calendar: store.Calendar{Period: store.Month}, History: 2}}
	if err := c.Usage(ctx, &usage); err != nil || len(usage.Periods) != 3 {
		t.Fatalf("Usage: %v, %d periods; want 3", err, len(usage.Periods))
	}
	if len(ops) != 2 || ops[0] != "credit" || ops[1] != "usage" {
		t.Errorf("observed %q, want credit, usage", ops)
	}

	none := Calls{Store: decideOnly{st}, Observe: func(string, time.Time, error) { t.Error("a call not made was observed") }}
	if err := none.Credit(ctx, &credit); !errors.Is(err, ErrNoQuotas) {
		t.Errorf("Credit on a store without balances: %v, want ErrNoQuotas", err)
	}
	if err := none.Usage(ctx, &usage); !errors.Is(err, ErrNoQuotas) {
		t.Errorf("Usage on a store without usage: %v, want ErrNoQuotas", err)
	}
}
