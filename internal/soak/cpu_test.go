package soak

import (
	"math"
	"os"
	"runtime"
	"testing"
	"time"
)

// TestOthersUse: the other processes' CPU, on average and at most over a
// second, from samples of 100 ms.
func TestOthersUse(t *testing.T) {
	const period = 100 * time.Millisecond
	var samples []CPUSample
	for i := range 30 { // 3 s; the other processes busy on one core in the second second
		s := CPUSample{At: int64(i+1) * int64(period), Busy: 80 * time.Millisecond, Own: 60 * time.Millisecond}
		if i >= 10 && i < 20 {
			s.Busy += 100 * time.Millisecond
		}
		samples = append(samples, s)
	}
	samples[0].Own = 90 * time.Millisecond // more than Busy (ticks counted apart): 0, not negative
	mean, peak := OthersUse(samples, period, 0, 30*int64(period))
	// 29 samples of 0.2 core, 10 of 1 more, one of 0: (29*0.2 + 10) / 30.
	if want := (29*0.2 + 10) / 30; math.Abs(mean-want) > 1e-9 {
		t.Errorf("mean %.4f cores, want %.4f", mean, want)
	}
	if math.Abs(peak-1.2) > 1e-9 {
		t.Errorf("peak %.4f cores, want 1.2", peak)
	}
	if m, p := OthersUse(samples, period, 40*int64(period), 50*int64(period)); m != 0 || p != 0 {
		t.Errorf("no samples in the span: %v, %v; want 0, 0", m, p)
	}
}

// TestProcessCPU reads this process's CPU time and the machine's from
// /proc.
func TestProcessCPU(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	if _, ok := machineBusy(); !ok {
		t.Fatal("machineBusy: /proc/stat not read")
	}
	before, ok := processCPU(os.Getpid())
	if !ok {
		t.Fatal("processCPU: /proc/self/stat not read")
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		now, _ := processCPU(os.Getpid())
		if now > before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("5 s of a busy loop, and the process's CPU time stayed %v", now)
		}
		for i := 0; i < 1e6; i++ { // spin
			_ = math.Sqrt(float64(i))
		}
	}
	if _, ok := processCPU(-1); ok {
		t.Error("processCPU(-1): ok, want not")
	}
}
