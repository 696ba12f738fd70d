package edge

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
)

// TestSetSchedules: a Set reserves on its schedules, by name; what cannot
// be reserved as sent is BadInput with an error Classify knows, and
// nothing is reserved.
func TestSetSchedules(t *testing.T) {
	lim := newLimiter(t)
	carrier := &sluice.Schedule{Name: "carrier", By: []string{"carrier"}, Rate: sluice.Rate{Events: 4, Per: time.Second}, MaxDelay: time.Second}
	s, err := NewSet(Config[request]{Limiter: lim, Schedules: []*sluice.Schedule{carrier}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	attrs := map[string]string{"carrier": "45"}
	for _, tt := range []struct {
		name  string
		sched string
		attrs map[string]string
		cost  int64
		code  string
		want  string
	}{
		{"unknown schedule", "nope", attrs, 1, "unknown_schedule", `sluice: unknown schedule: "nope"; the configured schedules are ["carrier"]`},
		{"cost", "carrier", attrs, 0, "invalid_cost", "cost is 0"},
		{"not UTF-8", "carrier", map[string]string{"carrier": "\xff"}, 1, "invalid_attribute", `"carrier" is not valid UTF-8`},
		{"missing attribute", "carrier", nil, 1, "missing_attribute", `schedule "carrier" needs attribute "carrier"`},
	} {
		r := s.Reserve(ctx, tt.sched, tt.attrs, tt.cost, Call{})
		c, ok := Classify(r.Err)
		if r.Kind != BadInput || !ok || c.Code != tt.code || !strings.Contains(r.Err.Error(), tt.want) {
			t.Errorf("%s: %+v (%s), want BadInput %s: %q", tt.name, r, c.Code, tt.code, tt.want)
		}
	}
	var ids []string
	for i, want := range []time.Duration{0, 250 * time.Millisecond} {
		r := s.Reserve(ctx, "carrier", attrs, 1, Call{})
		if r.Kind != Allowed || !r.Reservation.OK || r.Reservation.Delay != want || r.Schedule != carrier {
			t.Fatalf("reservation %d: %+v, want the slot at %v", i+1, r, want)
		}
		ids = append(ids, r.Reservation.ID)
	}
	if r := s.Cancel(ctx, "carrier", attrs, ids[1], Call{}); r.Kind != Allowed || !r.Cancelled {
		t.Errorf("cancel: %+v, want cancelled", r)
	}
	if r := s.Reserve(ctx, "carrier", attrs, 1, Call{}); r.Reservation.Delay != 250*time.Millisecond {
		t.Errorf("after the cancel: %+v, want the cancelled slot", r)
	}
	if r := s.Cancel(ctx, "nope", attrs, ids[0], Call{}); r.Kind != BadInput || !errors.Is(r.Err, ErrUnknownSchedule) {
		t.Errorf("cancel on an unknown schedule: %+v", r)
	}
	if _, err := NewSet(Config[request]{Limiter: lim, Schedules: []*sluice.Schedule{carrier, carrier}}); err == nil {
		t.Error("a schedule listed twice is accepted")
	}
}
