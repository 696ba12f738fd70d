package soak

import (
	"os"
	"strconv"
	"strings"
	"time"
)

// The machine's other load. The soak shares its 2 cores with whatever else
// runs; a stall of the machine looks, under the criterion of a normal
// second, like a slow recovery. Every 100 ms the soak reads how much CPU
// the machine used (/proc/stat) and how much its own processes did (the
// test, the workers, every server and sentinel: /proc/<pid>/stat); the
// difference is the other processes', reported per topology, in the trace,
// and next to a recovery that failed.

// CPUSample is, for the 100 ms before At, the CPU time the machine used
// and the part the soak's own processes used.
type CPUSample struct {
	At        int64 // ns, CLOCK_REALTIME
	Busy, Own time.Duration
}

// Others is the CPU time the other processes used.
func (s CPUSample) Others() time.Duration { return max(0, s.Busy-s.Own) }

// clockTick is USER_HZ, the unit of /proc's CPU times, on Linux.
const clockTick = 10 * time.Millisecond

// SampleCPU reads the machine's and pids' CPU times every period until
// stop is closed and returns what each period used. pids is called for
// each sample (a restarted server has a new one). On a system without
// /proc it returns nothing.
func SampleCPU(pids func() []int, period time.Duration, stop <-chan struct{}) []CPUSample {
	busy, ok := machineBusy()
	if !ok {
		return nil
	}
	own := map[int]time.Duration{}
	for _, p := range pids() {
		own[p], _ = processCPU(p)
	}
	var out []CPUSample
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return out
		case <-tick.C:
		}
		b, ok := machineBusy()
		if !ok {
			return out
		}
		s := CPUSample{At: time.Now().UnixNano(), Busy: b - busy}
		busy = b
		next := map[int]time.Duration{}
		for _, p := range pids() {
			t, ok := processCPU(p)
			if !ok {
				continue
			}
			next[p] = t
			s.Own += t - own[p] // a new process: all it used since it started
		}
		own = next
		out = append(out, s)
	}
}

// machineBusy returns the CPU time every core has spent not idle since
// boot (the cpu line of /proc/stat: user, nice, system, irq, softirq,
// steal).
func machineBusy() (time.Duration, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, false
	}
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		n, _ := strconv.ParseInt(f[i], 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * clockTick, true
}

// processCPU returns the user and system CPU time of process pid (all its
// threads).
func processCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name, in parentheses, may hold spaces: fields count from
	// after its closing one (state is field 3, utime 14, stime 15).
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, false
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+st) * clockTick, true
}

// OthersUse returns the CPU the other processes used in the samples taken
// after from and up to to (ns), each of one period, in cores: on average,
// and at most over one second.
func OthersUse(samples []CPUSample, period time.Duration, from, to int64) (mean, peak float64) {
	var in []time.Duration
	for _, s := range samples {
		if s.At > from && s.At <= to {
			in = append(in, s.Others())
		}
	}
	if len(in) == 0 {
		return 0, 0
	}
	cores := func(os []time.Duration) float64 {
		var sum time.Duration
		for _, o := range os {
			sum += o
		}
		return sum.Seconds() / (time.Duration(len(os)) * period).Seconds()
	}
	n := min(len(in), int(time.Second/period))
	for i := 0; i+n <= len(in); i++ {
		peak = max(peak, cores(in[i:i+n]))
	}
	return cores(in), peak
}
