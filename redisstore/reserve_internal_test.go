package redisstore

import (
	"testing"
	"time"

	"github.com/sluicerate/sluice/store"
)

func TestParseReservation(t *testing.T) {
	const now = 1_767_225_600_000_000
	good := []struct {
		reply []int64
		want  store.Reservation
	}{
		{[]int64{1, 0, now, now + 250_000, 2}, store.Reservation{OK: true, Delay: 250 * time.Millisecond, Slot: time.UnixMicro(now + 250_000), Queue: 2, ID: "id"}},
		{[]int64{0, 1, now, now + 1_250_000, 5}, store.Reservation{Delay: 1250 * time.Millisecond, Slot: time.UnixMicro(now + 1_250_000), Queue: 5, Reason: store.ReasonDelay}},
		{[]int64{0, 2, now, now, 0}, store.Reservation{Slot: time.UnixMicro(now), Reason: store.ReasonQueue}},
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
		q           store.Queue
		want, want1 string // Layout2, Layout1
	}{
		{store.Queue{Schedule: "carrier", Values: []string{"45"}}, "sluice:{carrier,45}2q", "sluice:{carrier,45}:carrier:@queue:45"},
		{store.Queue{Schedule: "all"}, "sluice:{all}2q", "sluice:{all}:all:@queue"},
		{store.Queue{Schedule: "a:b", Values: []string{"1,2", "}"}}, "sluice:{a%3Ab,1%2C2,%7D}2q", "sluice:{a%3Ab,1%2C2,%7D}:a%3Ab:@queue:1%2C2,%7D"},
		{store.Queue{Schedule: "@queue"}, "sluice:{%40queue}2q", "sluice:{%40queue}:%40queue:@queue"},
	}
	for _, tt := range tests {
		if got := (namer{prefix: "sluice", layout: Layout2}).queue(tt.q); got != tt.want {
			t.Errorf("queue(%+v) = %q, want %q", tt.q, got, tt.want)
		}
		if got := (namer{prefix: "sluice", layout: Layout1}).queue(tt.q); got != tt.want1 {
			t.Errorf("layout 1: queue(%+v) = %q, want %q", tt.q, got, tt.want1)
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

func TestReservationLength(t *testing.T) {
	tests := []struct {
		id   string
		want time.Duration
		ok   bool
	}{
		{"0123456789abcdef.250000", 250 * time.Millisecond, true},
		{"0123456789abcdef.1", time.Microsecond, true},
		{"0123456789abcdef", 0, false},
		{"0123456789abcdef.", 0, false},
		{"0123456789abcdef.x", 0, false},
	}
	for _, tt := range tests {
		got, ok := ReservationLength(tt.id)
		if got != tt.want || ok != tt.ok {
			t.Errorf("ReservationLength(%q) = %v, %v; want %v, %v", tt.id, got, ok, tt.want, tt.ok)
		}
	}
}
