package redisstore

import (
	"testing"
	"time"

	"github.com/sluicerate/sluice"
)

func TestParseReservation(t *testing.T) {
	const now = 1_767_225_600_000_000
	good := []struct {
		reply []int64
		want  sluice.Reservation
	}{
		{[]int64{1, 0, now, now + 250_000, 2}, sluice.Reservation{OK: true, Delay: 250 * time.Millisecond, Slot: time.UnixMicro(now + 250_000), Queue: 2, ID: "id"}},
		{[]int64{0, 1, now, now + 1_250_000, 5}, sluice.Reservation{Delay: 1250 * time.Millisecond, Slot: time.UnixMicro(now + 1_250_000), Queue: 5, Reason: sluice.ReasonDelay}},
		{[]int64{0, 2, now, now, 0}, sluice.Reservation{Slot: time.UnixMicro(now), Reason: sluice.ReasonQueue}},
	}
	for _, tt := range good {
		got, err := parseReservation(tt.reply, "id")
		if err != nil || got != tt.want {
			t.Errorf("parseReservation(%v) = %+v, %v; want %+v", tt.reply, got, err, tt.want)
		}
	}
	for _, reply := range [][]int64{
		nil,
		{1, 0, now, now},
		{1, 0, now, now, 1, 0},
		{2, 0, now, now, 1},
		{1, 1, now, now, 1},
		{0, 0, now, now, 1},
		{0, 3, now, now, 1},
		{1, 0, now, now - 1, 1},
		{1, 0, now, now, 0},
		{0, 1, now, now, -1},
	} {
		if r, err := parseReservation(reply, "id"); err == nil {
			t.Errorf("parseReservation(%v) = %+v, want an error", reply, r)
		}
	}
}

func TestQueueKey(t *testing.T) {
	tests := []struct {
		sched *sluice.Schedule
		attrs map[string]string
		want  string
	}{
		{&sluice.Schedule{Name: "carrier", By: []string{"carrier"}}, map[string]string{"carrier": "45"}, "sluice:{carrier,45}:carrier:@queue:45"},
		{&sluice.Schedule{Name: "all"}, map[string]string{"carrier": "45"}, "sluice:{all}:all:@queue"},
		{&sluice.Schedule{Name: "a:b", By: []string{"x", "y"}}, map[string]string{"x": "1,2", "y": "}"}, "sluice:{a%3Ab,1%2C2,%7D}:a%3Ab:@queue:1%2C2,%7D"},
		{&sluice.Schedule{Name: "@queue"}, nil, "sluice:{%40queue}:%40queue:@queue"},
	}
	for _, tt := range tests {
		if got := queueKey("sluice", tt.sched, tt.attrs); got != tt.want {
			t.Errorf("queueKey(%q, %v) = %q, want %q", tt.sched.Name, tt.attrs, got, tt.want)
		}
	}
}

func FuzzValidID(f *testing.F) {
	f.Add("0123456789abcdef.250000")
	f.Add("0123456789abcdef.0")
	f.Add("x")
	f.Fuzz(func(t *testing.T, id string) {
		if validID(id) && (len(id) < 18 || id[16] != '.') {
			t.Errorf("validID(%q) = true for an ID of the wrong form", id)
		}
	})
}
