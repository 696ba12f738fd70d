package sluice_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
)

// windowsOnly is a store that keeps no schedules.
type windowsOnly struct{}

func (windowsOnly) Decide(context.Context, *sluice.Request) (sluice.Decision, error) {
	return sluice.Decision{}, nil
}
func (windowsOnly) Close() error { return nil }

func TestReserveNeedsAScheduler(t *testing.T) {
	lim := sluice.NewLimiter(windowsOnly{}, sluice.Config{OnError: sluice.Allow})
	s := &sluice.Schedule{Name: "s", Rate: sluice.Rate{Events: 1, Per: time.Second}}
	r, err := lim.Reserve(context.Background(), s, nil, 1)
	if err == nil || !strings.Contains(err.Error(), "keeps no schedules") || r.OK || r.Degraded {
		t.Errorf("Reserve on a store without schedules: %+v, %v; want an error and no degraded reservation", r, err)
	}
	if _, err := lim.Cancel(context.Background(), s, nil, "1"); err == nil {
		t.Error("Cancel on a store without schedules: no error")
	}
}
