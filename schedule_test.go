package sluice

import (
	"errors"
	"testing"
	"time"
)

func TestRateInterval(t *testing.T) {
	t.Parallel()
	tests := []struct {
		rate Rate
		want time.Duration
	}{
		{Rate{4, time.Second}, 250 * time.Millisecond},
		{Rate{20, time.Second}, 50 * time.Millisecond},
		{Rate{3, time.Second}, 333334 * time.Microsecond}, // rounded up: never faster than the rate
		{Rate{1, 1500 * time.Nanosecond}, 2 * time.Microsecond},
		{Rate{1000000, time.Second}, time.Microsecond},
		{Rate{100, 30 * time.Minute}, 18 * time.Second},
		{Rate{0, time.Second}, 0},
		{Rate{1, 0}, 0},
	}
	for _, tt := range tests {
		if got := tt.rate.Interval(); got != tt.want {
			t.Errorf("%v.Interval() = %v, want %v", tt.rate, got, tt.want)
		}
	}
}

func TestParseRate(t *testing.T) {
	t.Parallel()
	good := []struct {
		in   string
		want Rate
	}{
		{"4/s", Rate{4, time.Second}},
		{" 20 / 1s ", Rate{20, time.Second}},
		{"100/30m", Rate{100, 30 * time.Minute}},
		{"3/500ms", Rate{3, 500 * time.Millisecond}},
		{"1/h", Rate{1, time.Hour}},
		{"1000000/s", Rate{1000000, time.Second}},
		{"10/1m", Rate{10, time.Minute}},
		{"1/d", Rate{1, 24 * time.Hour}},
		{"7/1d", Rate{7, 24 * time.Hour}},
		{"3/2d12h", Rate{3, 60 * time.Hour}},
		{"1/366d", Rate{1, 366 * 24 * time.Hour}},
	}
	for _, tt := range good {
		got, err := ParseRate(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
		back, err := ParseRate(got.String())
		if err != nil || back != got {
			t.Errorf("ParseRate(%q.String() = %q) = %v, %v", tt.in, got.String(), back, err)
		}
	}
	for _, in := range []string{"", "4", "4/", "/s", "0/s", "-1/s", "x/s", "4/x", "4/-1s", "4/0s", "2000001/s", "1.5/s",
		"4/30", "4/0", "4/1.5d", "4/0d", "4/1d-1h", "4/1d2d", "4/367d", "4/65535d", "4/99999999999d", "4/s/s"} {
		if r, err := ParseRate(in); err == nil {
			t.Errorf("ParseRate(%q) = %v, want an error", in, r)
		}
	}
}

func TestRateText(t *testing.T) {
	t.Parallel()
	var r Rate
	if err := r.UnmarshalText([]byte("4/s")); err != nil || r != (Rate{4, time.Second}) {
		t.Fatalf("UnmarshalText(4/s) = %v, %v", r, err)
	}
	if b, _ := r.MarshalText(); string(b) != "4/1s" {
		t.Errorf("MarshalText = %q, want 4/1s", b)
	}
	if err := r.UnmarshalText([]byte("nope")); err == nil {
		t.Error("UnmarshalText(nope): no error")
	}
}

func TestScheduleValidate(t *testing.T) {
	t.Parallel()
	ok := Schedule{Name: "s", By: []string{"a", "b"}, Rate: Rate{4, time.Second}, MaxDelay: time.Second, MaxQueue: 3}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid schedule: %v", err)
	}
	bad := map[string]func(s *Schedule){
		"no name":            func(s *Schedule) { s.Name = "" },
		"no rate":            func(s *Schedule) { s.Rate = Rate{} },
		"too fast":           func(s *Schedule) { s.Rate = Rate{2, time.Microsecond} },
		"negative max delay": func(s *Schedule) { s.MaxDelay = -time.Second },
		"negative max queue": func(s *Schedule) { s.MaxQueue = -1 },
		"empty attribute":    func(s *Schedule) { s.By = []string{"a", ""} },
		"repeated attribute": func(s *Schedule) { s.By = []string{"a", "a"} },
	}
	for name, f := range bad {
		s := ok
		s.By = append([]string(nil), ok.By...)
		f(&s)
		if err := s.Validate(); !errors.Is(err, ErrInvalidSchedule) {
			t.Errorf("%s: Validate() = %v, want ErrInvalidSchedule", name, err)
		}
	}
	var nilSchedule *Schedule
	if err := nilSchedule.Validate(); !errors.Is(err, ErrInvalidSchedule) {
		t.Errorf("nil: Validate() = %v, want ErrInvalidSchedule", err)
	}
}
