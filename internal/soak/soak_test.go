//go:build soak

package soak

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/resolve"
	"github.com/sluicerate/sluice/redisstore"
)

// workerEnv carries a worker process's WorkerSpec, as JSON.
const workerEnv = "SLUICE_SOAK_WORKER"

// Each budget process's demand (budget.go): one decision per budgetPeriod
// per goroutine, about 667 a second, so that the three ask twice the
// limit, and two of them still a third more. Many goroutines, each at a
// period longer than the store's slow answers, keep the demand when the
// store is slow (a goroutine skips the instants its call took): at the
// limit most requests go to the store, to be denied.
const (
	budgetGoroutines = 256
	budgetPeriod     = 384 * time.Millisecond
)

// The shape of the load.
const (
	workers     = 8
	perWorker   = 32
	holders     = 3 // lease holders per worker
	prefix      = "soak"
	lead        = 3 * time.Second        // from a phase's start to its fault
	warmup      = 2 * time.Second        // not counted in the baseline's latency
	lookPeriod  = 250 * time.Millisecond // between two peeks at a target
	perTopology = 15 * time.Second       // starting servers and workers, about
	minPhase    = 12 * time.Second
	maxRecovery = 2 * time.Second
	// busyCores is the CPU the machine's other processes use, in cores
	// over a second around a fault's end, from which a recovery slower
	// than maxRecovery with no degraded decision after maxRecovery (the
	// latency alone) is the machine's and reported, not failed on.
	busyCores    = 1.0
	minDecisions = 1_000_000
	// minSteadyShare is the least the budgeted rule must admit per window
	// away from faults, as a share of its limit.
	minSteadyShare = 0.95
)

// budgetHead says what the budget workload is, for the results.
var budgetHead = fmt.Sprintf("%d processes x %d goroutines, one decision per %v each, of one rule of %d per %v with a budget of %v; a steady window is %v or more after the start and %v or more after a fault's end or a degraded decision's answer",
	BudgetWorkers, budgetGoroutines, budgetPeriod, BudgetLimit, BudgetWindow, BudgetTime, warmup, budgetAftermath)

// TestSoak runs the chaos soak: SOAKTIME (default 10m) in all, SOAKRATE
// decisions a second (default 4000) from 8 worker processes of 32
// goroutines, each call with a deadline of SOAKTIMEOUT (default 1s), on the
// topologies SOAKTOPOLOGIES names (default standalone,cluster,sentinel-acks;
// also cluster-acks, sentinel and sentinel2). SOAKLOSSY=1 adds the faults
// that lose admissions or refuse service by design (a restart without
// persistence, a Cluster takeover or a Sentinel failover without
// WaitForReplicas, a Sentinel failover with min-replicas-to-write),
// to measure what they cost; without it every fault must lose nothing and
// recover within 2 s (a recovery that is late by its latency alone, with
// no degraded decision after 2 s, while the machine's other processes used
// a core or more around the fault's end, is reported, not failed on).
// SOAKCONTROL=1 adds two control phases to each topology, with nothing injected: "no fault" first, which must be normal
// at once, and last "every goroutine in step", which measures what the
// load's own bursts cost (reported, not failed on). SOAKOUT, when set, is a
// file the result tables are written to, with the verdict; SOAKTRACE one that gets, per
// 100 ms, the decisions, errors and p99 latency of the baseline and around
// each fault, and what each server did (probed every 100 ms).
//
// Every topology runs even when one fails; the failures are listed at the
// end.
func TestSoak(t *testing.T) {
	if spec := os.Getenv(workerEnv); spec != "" {
		var ws WorkerSpec
		if err := json.Unmarshal([]byte(spec), &ws); err != nil {
			t.Fatal(err)
		}
		if err := Work(ws, os.Stdin, os.Stdout); err != nil {
			t.Fatal(err)
		}
		return
	}
	total := envDuration(t, "SOAKTIME", 10*time.Minute)
	rate := envInt(t, "SOAKRATE", 4000)
	timeout := envDuration(t, "SOAKTIMEOUT", time.Second)
	names := strings.Split(envString("SOAKTOPOLOGIES", "standalone,cluster,sentinel-acks"), ",")
	lossy := os.Getenv("SOAKLOSSY") != ""
	control := os.Getenv("SOAKCONTROL") != ""
	starts := map[string]func(testing.TB) *Topology{"standalone": Standalone, "cluster": Cluster, "cluster-acks": ClusterAcks,
		"sentinel": Sentinel, "sentinel2": Sentinel2, "sentinel-acks": SentinelAcks}
	// How many faults each topology has beyond the common ones: those that
	// must lose nothing, and those that lose admissions or refuse service
	// by design (run with SOAKLOSSY).
	own := map[string]struct{ exact, lossy int }{"standalone": {0, 1}, "cluster": {1, 1}, "cluster-acks": {2, 0},
		"sentinel": {0, 2}, "sentinel2": {0, 1}, "sentinel-acks": {1, 0}}
	phases := 0
	for _, n := range names {
		if starts[n] == nil {
			t.Fatalf("SOAKTOPOLOGIES: unknown topology %q; use standalone, cluster, cluster-acks, sentinel-acks, sentinel or sentinel2", n)
		}
		phases += 1 + 1 + len(CommonFaults()) + own[n].exact // the baseline, the budget process killed
		if lossy {
			phases += own[n].lossy
		}
		if control {
			phases += 2
		}
	}
	phaseLen := max(minPhase, (total-time.Duration(len(names))*perTopology)/time.Duration(phases))
	period := time.Duration(float64(workers*perWorker) / float64(rate) * float64(time.Second))
	t.Logf("soak: %d topologies, %d phases of %v, %d decisions/s (one per %v per goroutine), %d processes x %d goroutines, deadline %v",
		len(names), phases, phaseLen, rate, period, workers, perWorker, timeout)

	var (
		all      []Result
		failures []string
	)
	for i, n := range names {
		ok := t.Run(n, func(t *testing.T) {
			run := soakRun{lossy: lossy, control: control, seed: i, phaseLen: phaseLen, period: period, timeout: timeout}
			all = append(all, runTopology(t, starts[n](t), run)...)
		})
		if !ok {
			failures = append(failures, n+": the run failed (its errors are above)")
		}
	}

	table := Table(all) + "\nThe budget workload (" + budgetHead + "):\n\n" + BudgetTable(all)
	head := fmt.Sprintf("soak %s, SOAKTIME=%v SOAKRATE=%d SOAKTOPOLOGIES=%s", time.Now().UTC().Format("2006-01-02 15:04 MST"), total, rate, strings.Join(names, ","))
	fmt.Printf("\n%s\n\n%s\n", head, table)

	decisions := 0
	var machine []string // slow recoveries with no late error on a busy machine
	for _, r := range all {
		decisions += r.Decisions
		p := r.Phase.Topology + ", " + r.Phase.Name
		if r.NoScript != 0 {
			failures = append(failures, fmt.Sprintf("%s: %d NOSCRIPT errors reached callers, want 0", p, r.NoScript))
		}
		if r.Over != 0 && !r.Phase.Lossy {
			failures = append(failures, fmt.Sprintf("%s: %d certain over-admissions, want 0", p, r.Over))
		}
		if r.Lost != 0 && !r.Phase.Lossy {
			failures = append(failures, fmt.Sprintf("%s: %d admissions certainly lost, want 0", p, r.Lost))
		}
		if r.OverSlots != 0 && !r.Phase.Lossy {
			failures = append(failures, fmt.Sprintf("%s: %d moments with more than %d leases certainly held, want 0", p, r.OverSlots, LeaseSlots))
		}
		if r.BudgetOver != 0 && !r.Phase.Lossy {
			failures = append(failures, fmt.Sprintf("%s: %d certain over-admissions of the budgeted rule, want 0", p, r.BudgetOver))
		}
		if r.SettleLost != 0 && !r.Phase.Lossy {
			failures = append(failures, fmt.Sprintf("%s: %d settled units certainly lost, want 0", p, r.SettleLost))
		}
		if r.Phase.FaultStart == 0 || r.Phase.Outage || r.Phase.Control {
			continue
		}
		slow := ""
		switch {
		case r.Recovery < 0:
			slow = fmt.Sprintf("%s: service not normal within the phase (%v after the fault), want within %v; other processes used up to %.2f cores in a second around the fault's end",
				p, secs(time.Duration(r.Phase.End-r.Phase.FaultEnd)), maxRecovery, r.Others)
		case r.Recovery > maxRecovery:
			slow = fmt.Sprintf("%s: service normal %v after the fault, want within %v; other processes used up to %.2f cores in a second around the fault's end",
				p, r.Recovery, maxRecovery, r.Others)
		}
		// Late errors are the store's; late latency alone, while the
		// machine's other processes took half of it or more, is the
		// machine's.
		if slow != "" && r.LastDegraded <= maxRecovery && r.Others >= busyCores {
			machine = append(machine, slow+"; its last degraded decision "+signed(r.LastDegraded))
			slow = ""
		}
		if slow != "" {
			failures = append(failures, slow)
		}
	}
	for _, n := range names {
		var rows []Result
		for _, r := range all {
			if r.Phase.Topology == n {
				rows = append(rows, r)
			}
		}
		if share, _, wins := SteadyShare(rows); wins == 0 || share < minSteadyShare {
			failures = append(failures, fmt.Sprintf("%s: the budgeted rule admitted %.1f%% of its limit per steady window (%d windows), want at least %.0f%%",
				n, 100*share, wins, 100*minSteadyShare))
		}
	}
	if total >= 10*time.Minute && decisions < minDecisions {
		failures = append(failures, fmt.Sprintf("%d decisions, want at least %d", decisions, minDecisions))
	}
	t.Logf("soak: %d decisions", decisions)
	verdict := fmt.Sprintf("TestSoak passed: %d decisions", decisions)
	if len(machine) > 0 {
		t.Logf("soak: %d recoveries slower than %v with no degraded decision after %v, while other processes used %.1f cores or more (reported, not failed):\n%s",
			len(machine), maxRecovery, maxRecovery, busyCores, strings.Join(machine, "\n"))
		verdict += fmt.Sprintf("; reported, not failed (latency alone, other processes using %.1f cores or more):\n\n- %s\n", busyCores, strings.Join(machine, "\n- "))
	}
	if len(failures) > 0 {
		verdict = fmt.Sprintf("TestSoak failed: %d decisions; %d failures:\n\n- %s", decisions, len(failures), strings.Join(failures, "\n- "))
		t.Errorf("soak: %d failures:\n%s", len(failures), strings.Join(failures, "\n"))
	}
	if out := os.Getenv("SOAKOUT"); out != "" {
		if err := os.WriteFile(out, []byte("# "+head+"\n\n"+table+"\n"+verdict+"\n"), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// soakRun is how the soak runs on each topology: with the faults that lose
// by design or not, the workers' seed, each phase's length, each
// goroutine's period between decisions and each call's deadline.
type soakRun struct {
	lossy, control            bool
	seed                      int
	phaseLen, period, timeout time.Duration
}

// noFault is the control phase: nothing is injected, and its recovery is
// measured from the instant a fault would strike. A run in which it is not
// normal at once measured the machine, not the faults.
func noFault() Fault {
	return Fault{Name: "no fault", Run: func(*Topology, string) (time.Time, time.Time, string, error) {
		at := time.Now()
		return at, at, "", nil
	}}
}

// aligned is the control phase of a load in step: align asks every worker
// to move every goroutine's next decision to one instant, which the phase
// takes for its fault; nothing is injected into Redis. It shows what the
// load generator's own bursts cost under the criterion of a normal second.
func aligned(align func(at time.Time)) Fault {
	return Fault{Name: "no fault, every goroutine in step", Control: true, Run: func(*Topology, string) (time.Time, time.Time, string, error) {
		at := time.Now().Add(200 * time.Millisecond) // every goroutine decides once meanwhile
		align(at)
		time.Sleep(time.Until(at))
		return at, at, "", nil
	}}
}

// runTopology runs the load and the faults on top and returns the results
// of its phases.
func runTopology(t *testing.T, top *Topology, run soakRun) []Result {
	mix := NewMix()
	cfg := top.Config
	cfg.Prefix = prefix
	st, err := redisstore.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	req, err := resolve.Request(mix.Targets[0].Policy, mix.Targets[0].Attrs, 1)
	if err != nil {
		t.Fatal(err)
	}
	hot := st.Keys(req)[0] // the notifier's global cap: the hottest key
	if req.Checks[0].Rule != "global" {
		t.Fatalf("first check %q, want global", req.Checks[0].Rule)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dir := t.TempDir()
	type proc struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		out   *bufio.Scanner
		file  string
		lease string
	}
	launch := func(spec WorkerSpec) (*proc, error) {
		js, err := json.Marshal(spec)
		if err != nil {
			return nil, err
		}
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestSoak$", "-test.count=1", "-test.timeout=0")
		cmd.Env = append(os.Environ(), workerEnv+"="+string(js))
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		file := spec.Out
		if spec.BudgetOut != "" {
			file = spec.BudgetOut
		}
		return &proc{cmd: cmd, stdin: stdin, out: bufio.NewScanner(stdout), file: file, lease: spec.LeaseOut}, nil
	}
	awaitReady := func(p *proc) error {
		var before []string
		for p.out.Scan() && p.out.Text() != "ready" {
			before = append(before, p.out.Text())
		}
		if p.out.Text() != "ready" {
			return fmt.Errorf("ended before it was ready (%v):\n%s", p.out.Err(), strings.Join(before, "\n"))
		}
		return nil
	}
	var procs []*proc
	for w := range workers {
		spec := WorkerSpec{Mode: cfg.Mode.String(), Addrs: cfg.Addrs, MasterName: cfg.MasterName, WaitForReplicas: cfg.WaitForReplicas, Prefix: prefix,
			Goroutines: perWorker, Period: run.period, Timeout: run.timeout, Seed: uint64(run.seed*100 + w), Out: filepath.Join(dir, fmt.Sprintf("worker%d", w)),
			Holders: holders, LeaseOut: filepath.Join(dir, fmt.Sprintf("worker%d.lease", w))}
		p, err := launch(spec)
		if err != nil {
			t.Fatal(err)
		}
		procs = append(procs, p)
	}
	// The budget workload's processes, with replica acknowledgements
	// wherever there are replicas: a failover then loses no slice.
	budgetSpec := func(w, life int) WorkerSpec {
		return WorkerSpec{Mode: cfg.Mode.String(), Addrs: cfg.Addrs, MasterName: cfg.MasterName,
			WaitForReplicas: cfg.WaitForReplicas || cfg.Mode != redisstore.Standalone, Prefix: prefix,
			Goroutines: budgetGoroutines, Period: budgetPeriod, Timeout: run.timeout, Seed: uint64(run.seed*100 + 50 + w + 10*life),
			BudgetOut: filepath.Join(dir, fmt.Sprintf("budget%d.%d", w, life))}
	}
	var (
		procMu      sync.Mutex // guards budgetProcs and killed, which the kill fault changes
		budgetProcs []*proc
		killed      []*proc
	)
	for w := range BudgetWorkers {
		p, err := launch(budgetSpec(w, 0))
		if err != nil {
			t.Fatal(err)
		}
		budgetProcs = append(budgetProcs, p)
	}
	for i, p := range append(slices.Clone(procs), budgetProcs...) {
		if err := awaitReady(p); err != nil {
			t.Fatalf("worker %d %v", i, err)
		}
	}
	// The budget processes' own fault: the first is killed with SIGKILL,
	// its slice left in the store until its end, and a successor started
	// (budgetProcs holds the live ones, killed the others).
	killBudget := Fault{Name: "SIGKILL a budget process, restarted", Run: func(*Topology, string) (time.Time, time.Time, string, error) {
		procMu.Lock()
		victim := budgetProcs[0]
		budgetProcs = budgetProcs[1:]
		killed = append(killed, victim)
		life := len(killed)
		procMu.Unlock()
		start := time.Now()
		if err := victim.cmd.Process.Kill(); err != nil {
			return start, time.Now(), "", err
		}
		victim.cmd.Wait() // "signal: killed"
		next, err := launch(budgetSpec(0, life))
		if err != nil {
			return start, time.Now(), "", err
		}
		procMu.Lock()
		budgetProcs = append(budgetProcs, next)
		procMu.Unlock()
		if err := awaitReady(next); err != nil {
			return start, time.Now(), "", fmt.Errorf("the successor %v", err)
		}
		if _, err := io.WriteString(next.stdin, "go\n"); err != nil {
			return start, time.Now(), "", err
		}
		end := time.Now()
		held := "no record of its slice"
		if b, err := os.ReadFile(victim.file + ".slices"); err == nil {
			if looks := DecodeSliceLooks(b); len(looks) > 0 {
				l := looks[len(looks)-1]
				ago := time.Duration(start.UnixNano() - l.At).Round(time.Millisecond)
				held = fmt.Sprintf("%v before, it held no slice", ago)
				if l.Granted > 0 {
					held = fmt.Sprintf("%v before, it held a slice of %d units, %d unused, for %v more", ago, l.Granted, l.Granted-l.Used, l.Left.Round(time.Millisecond))
				}
			}
		}
		return start, end, fmt.Sprintf("budget process %d killed (%s); its successor %d deciding %s after", victim.cmd.Process.Pid, held, next.cmd.Process.Pid, secs(end.Sub(start))), nil
	}}

	lim := sluice.NewLimiter(st, sluice.Config{Timeout: 200 * time.Millisecond, Breaker: sluice.Breaker{Failures: -1}})
	stopAudit := make(chan struct{})
	looksc := make(chan [][]Look)
	go func() { looksc <- Audit(lim, mix, lookPeriod, stopAudit) }()
	leaseTargets := LeaseTargets()
	leaseLooksc := make(chan [][]Look)
	go func() { leaseLooksc <- AuditLeases(lim, leaseTargets, lookPeriod, stopAudit) }()

	stopLoad := make(chan struct{})
	loadc := make(chan []float64)
	go func() { loadc <- sampleLoad(stopLoad) }()

	stopCPU := make(chan struct{})
	cpuc := make(chan []CPUSample, 1)
	go func() {
		cpuc <- SampleCPU(func() []int {
			pids := []int{os.Getpid()}
			for _, p := range procs {
				pids = append(pids, p.cmd.Process.Pid)
			}
			procMu.Lock()
			for _, p := range budgetProcs {
				pids = append(pids, p.cmd.Process.Pid)
			}
			procMu.Unlock()
			for _, s := range top.Servers() {
				pids = append(pids, s.Pid())
			}
			return pids
		}, time.Duration(bucket), stopCPU)
	}()

	// With a trace, the servers' side of each fault too.
	tracePath := os.Getenv("SOAKTRACE")
	stopProbe := make(chan struct{})
	probec := make(chan []ServerSample, 1)
	if tracePath != "" {
		go func() { probec <- Probe(top, time.Duration(bucket), stopProbe) }()
	} else {
		probec <- nil
	}

	start := time.Now()
	for _, p := range append(slices.Clone(procs), budgetProcs...) {
		if _, err := io.WriteString(p.stdin, "go\n"); err != nil {
			t.Fatal(err)
		}
	}
	phases := []Phase{{Topology: top.Name, Name: "baseline", Start: start.UnixNano()}}
	time.Sleep(run.phaseLen)
	faults := append(append([]Fault{killBudget}, CommonFaults()...), top.Faults...)
	if run.control {
		faults = append(append([]Fault{noFault()}, faults...), aligned(func(at time.Time) {
			for _, p := range procs {
				fmt.Fprintf(p.stdin, "align %d\n", at.UnixNano())
			}
		}))
	}
	for _, f := range faults {
		if (f.Lossy || f.Outage) && !run.lossy {
			continue
		}
		if err := top.Settle(); err != nil {
			t.Errorf("before %s: %v", f.Name, err)
			break
		}
		begin := time.Now()
		phases[len(phases)-1].End = begin.UnixNano()
		before, _, _ := top.Owner(hot)
		time.Sleep(lead)
		fs, fe, note, err := f.Run(top, hot)
		if err != nil {
			t.Errorf("%s: %v", f.Name, err)
			note = strings.TrimPrefix(note+"; ", "; ") + "failed: " + err.Error()
		}
		if fs.IsZero() { // not injected
			fs, fe = begin.Add(lead), begin.Add(lead)
		}
		if fe.IsZero() { // failed before it knew its end: over by now
			fe = time.Now()
		}
		ph := Phase{Topology: top.Name, Name: f.Name, Start: begin.UnixNano(), FaultStart: fs.UnixNano(), FaultEnd: fe.UnixNano(),
			Note: note, Lossy: f.Lossy, Outage: f.Outage, Control: f.Control}
		time.Sleep(time.Until(begin.Add(run.phaseLen)))
		if err := top.Settle(); err != nil {
			t.Errorf("after %s: %v", f.Name, err)
		}
		if after, _, _ := top.Owner(hot); before != after && before != nil && after != nil {
			ph.Note = strings.TrimPrefix(ph.Note+"; ", "; ") + fmt.Sprintf("the hot key's master moved from %s to %s", before.Addr(), after.Addr())
		}
		t.Logf("%s: %s in %v; roles now %s", top.Name, f.Name, fe.Sub(fs).Round(time.Millisecond), Roles(top))
		phases = append(phases, ph)
	}
	stop := time.Now()
	phases[len(phases)-1].End = stop.UnixNano()

	procMu.Lock()
	for _, p := range budgetProcs {
		p.stdin.Close()
	}
	procMu.Unlock()
	redisCPU := serverCPU(top)
	var (
		workerCPU time.Duration
		recs      []Record
		calls     []LeaseCall
		errs      []string // every worker's messages; a Record's Err indexes it, from 1
		index     = map[string]uint16{}
	)
	for i, p := range procs {
		p.stdin.Close()
		var done string
		local := []uint16{0}
		for p.out.Scan() {
			text := p.out.Text()
			if m, ok := strings.CutPrefix(text, "msg "); ok {
				if _, seen := index[m]; !seen {
					errs = append(errs, m)
					index[m] = uint16(len(errs))
				}
				local = append(local, index[m])
			}
			if strings.HasPrefix(text, "done ") {
				done = text
			}
		}
		if err := p.cmd.Wait(); err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
		workerCPU += p.cmd.ProcessState.UserTime() + p.cmd.ProcessState.SystemTime()
		if done == "" {
			t.Fatalf("worker %d ended without its records", i)
		}
		rs, err := ReadRecords(p.file)
		if err != nil {
			t.Fatal(err)
		}
		for k := range rs {
			if int(rs[k].Err) >= len(local) {
				t.Fatalf("worker %d: a record refers to error message %d of %d", i, rs[k].Err, len(local)-1)
			}
			rs[k].Err = local[rs[k].Err]
		}
		recs = append(recs, rs...)
		cs, err := ReadLeaseCalls(p.lease)
		if err != nil {
			t.Fatal(err)
		}
		for k := range cs {
			cs[k].Lease |= uint64(i) << 56 // unique over the workers
		}
		calls = append(calls, cs...)
	}
	var budgetCalls []BudgetCall
	for i, p := range budgetProcs {
		for p.out.Scan() {
			if text := p.out.Text(); strings.HasPrefix(text, "msg ") || strings.HasPrefix(text, "stats ") {
				t.Logf("%s: budget process %d: %s", top.Name, i, text)
			}
		}
		if err := p.cmd.Wait(); err != nil {
			t.Fatalf("budget process %d: %v", i, err)
		}
	}
	for _, p := range append(killed, budgetProcs...) {
		cs, err := ReadBudgetCalls(p.file)
		if err != nil {
			t.Fatal(err)
		}
		budgetCalls = append(budgetCalls, cs...)
	}
	close(stopAudit)
	looks := <-looksc
	leaseLooks := <-leaseLooksc
	close(stopLoad)
	loads := <-loadc
	close(stopProbe)
	samples := <-probec
	close(stopCPU)
	cpu := <-cpuc
	wall := stop.Sub(start)
	var mean, peak float64
	for _, l := range loads {
		mean += l / float64(len(loads))
		peak = max(peak, l)
	}
	othersMean, othersPeak := OthersUse(cpu, time.Duration(bucket), start.UnixNano(), stop.UnixNano())
	t.Logf("%s: the workers used %.2f cores, the Redis servers at least %.2f (INFO cpu; a restart resets a server's), other processes %.2f (%.2f at most over a second); load average %.1f on average, %.1f at most (2 cores)",
		top.Name, workerCPU.Seconds()/wall.Seconds(), redisCPU.Seconds()/wall.Seconds(), othersMean, othersPeak, mean, peak)

	// A normal second: no degraded decision, and a p99 within twice the
	// baseline's (at least the baseline's + 5 ms), measured after the
	// workers' first 2 s (every connection and goroutine starting at once).
	var base []time.Duration
	for _, r := range recs {
		if r.Sent >= phases[0].Start+int64(warmup) && r.Sent < phases[0].End {
			base = append(base, time.Duration(r.Replied-r.Sent))
		}
	}
	p99 := percentile(base, 0.99)
	threshold := max(2*p99, p99+5*time.Millisecond)
	t.Logf("%s: %d decisions in %v; baseline p50 %v, p99 %v, p99.9 %v, max %v; a normal second's p99 at most %v",
		top.Name, len(recs), stop.Sub(start).Round(time.Second), percentile(base, 0.5).Round(10*time.Microsecond),
		p99.Round(10*time.Microsecond), percentile(base, 0.999).Round(10*time.Microsecond), percentile(base, 1).Round(10*time.Microsecond),
		threshold.Round(10*time.Microsecond))
	for _, p := range phases {
		if es := ErrorCounts(recs, errs, p.FaultStart, p.End); p.FaultStart != 0 && len(es) > 0 {
			t.Logf("%s, %s: errors from the fault on, by message:\n%s", top.Name, p.Name, strings.Join(es[:min(len(es), 4)], "\n"))
		}
	}
	if tracePath != "" {
		f, err := os.OpenFile(tracePath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for _, p := range phases {
			fmt.Fprintf(f, "%s %s: errors\n", top.Name, p.Name)
			for _, e := range ErrorCounts(recs, errs, p.Start, p.End) {
				fmt.Fprintf(f, "    %s\n", e)
			}
		}
		fmt.Fprintf(f, "%s baseline\n", top.Name)
		Timeline(f, recs, cpu, phases[0].Start, phases[0].End, phases[0].Start)
		for _, p := range phases[1:] {
			fmt.Fprintf(f, "%s %s: fault from 0 to %v; times from its end\n", top.Name, p.Name, time.Duration(p.FaultEnd-p.FaultStart))
			Timeline(f, recs, cpu, p.FaultStart-int64(time.Second), min(p.End, p.FaultEnd+int64(6*time.Second)), p.FaultEnd)
			fmt.Fprintf(f, "%s %s: the servers, per 100 ms (changes of role, replicas online; script calls, CLUSTER SLOTS reads, error replies)\n", top.Name, p.Name)
			ServerTimeline(f, samples, p.FaultStart-int64(time.Second), min(p.End, p.FaultEnd+int64(6*time.Second)), p.FaultEnd)
		}
	}
	res := Analyze(mix, phases, recs, looks, threshold)
	AnalyzeLeases(res, phases, leaseTargets, calls, leaseLooks)
	var granted, peeks int
	for _, c := range calls {
		if c.Op == OpAcquire && c.Answer == Granted {
			granted++
		}
	}
	for _, l := range leaseLooks {
		peeks += len(l)
	}
	t.Logf("%s: %d lease calls, %d leases granted; %d peeks at the settle windows", top.Name, len(calls), granted, peeks)
	AnalyzeBudget(res, phases, budgetCalls, warmup)
	replied, certain, wins := SteadyShare(res)
	var local, remote []time.Duration
	for _, c := range budgetCalls {
		if c.Local {
			local = append(local, time.Duration(c.Replied-c.Sent))
		} else {
			remote = append(remote, time.Duration(c.Replied-c.Sent))
		}
	}
	t.Logf("%s: %d budget decisions by %d processes (%d killed), %d answered locally (p99 %v), %d by the store (p50 %v, p99 %v); admitted per steady window %.1f%% of %d answered in it, %.1f%% certainly in it (%d windows)",
		top.Name, len(budgetCalls), BudgetWorkers+len(killed), len(killed), len(local), percentile(local, 0.99).Round(time.Microsecond),
		len(remote), percentile(remote, 0.5).Round(10*time.Microsecond), percentile(remote, 0.99).Round(10*time.Microsecond),
		100*replied, BudgetLimit, 100*certain, wins)
	for i := range res {
		if p := res[i].Phase; p.FaultStart != 0 {
			_, res[i].Others = OthersUse(cpu, time.Duration(bucket), p.FaultEnd-int64(time.Second), p.FaultEnd+int64(3*time.Second))
		}
	}
	return res
}

// sampleLoad reads the 1-minute load average every second until stop is
// closed.
func sampleLoad(stop <-chan struct{}) []float64 {
	var out []float64
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return out
		case <-tick.C:
		}
		b, err := os.ReadFile("/proc/loadavg")
		if err != nil {
			return out
		}
		f := strings.Fields(string(b))
		if l, err := strconv.ParseFloat(f[0], 64); err == nil {
			out = append(out, l)
		}
	}
}

// serverCPU returns the CPU time the data servers of top report using
// (used_cpu_user + used_cpu_sys), since they started.
func serverCPU(top *Topology) time.Duration {
	var sum float64
	for _, s := range top.Data() {
		info, err := s.Do("INFO", "cpu")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(info, "\n") {
			k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
			if k == "used_cpu_user" || k == "used_cpu_sys" {
				f, _ := strconv.ParseFloat(v, 64)
				sum += f
			}
		}
	}
	return time.Duration(sum * float64(time.Second))
}

func envString(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envDuration(t *testing.T, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s=%q: want a duration such as 3m", name, v)
	}
	return d
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}
