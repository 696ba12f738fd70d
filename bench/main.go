// Command bench compares sluice with its peers in one run, on one
// redis-server it starts itself, with one workload: 64 goroutines over
// 10,000 keys at 100 decisions per key per minute. It prints Markdown tables
// (docs/benchmarks.md holds the current figures) and progress on stderr, and
// keeps each run's tables in a file of its own under results/ (-results).
//
//	go run . [-d 4s] [-rounds 3] [-sections redis,retry,memory,ceiling,rules,limits,algorithms,hotkey,cluster,keys,flood,service,http,leases,budgets,instructions]
//
// The Redis contenders run round-robin, -rounds times each, on a flushed
// server; the tables report the median round. On a machine shared with
// other work, compare the ratios within one run, not the absolute figures.
package main

import (
	"cmp"
	"flag"
	"fmt"
	"math"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"
)

func main() {
	var (
		duration   = flag.Duration("d", 4*time.Second, "how long each Redis contender runs per round")
		rounds     = flag.Int("rounds", 3, "rounds of the Redis comparison; the median is reported")
		goroutines = flag.Int("goroutines", 64, "goroutines deciding at once")
		keys       = flag.Int("keys", 10_000, "distinct keys")
		sections   = flag.String("sections", defaultSections, "sections to run, comma-separated")
		results    = flag.String("results", "results", "also write the tables to a new file in this folder, named by the date, time and sections (empty: stdout only)")
		serverBin  = flag.String("redis-server", "", "redis-server executable (default: from PATH)")
		maxKeys    = flag.Int("max-keys", 1_000_000, "largest key count of the keys table (its memory only beyond 10^5)")
		only       = flag.String("only", "", "run only the Redis and service contenders whose name contains this (or one of these, comma-separated)")
		cpuProfile = flag.String("cpuprofile", "", "write this process's CPU profile to this file")
		cmdStats   = flag.Bool("commandstats", false, "print, per Redis contender and round, the commands Redis ran per decision and their µs (INFO commandstats)")
		svcProfile = flag.String("service-profile", "", "after the service section, write sluice serve's CPU profile under each scenario's load to PREFIX-DOMAIN-PROTO.prof")
		irGs       = flag.String("ir-goroutines", "1,40", "instructions section: the goroutine counts, comma-separated")
		irN        = flag.Int("ir-decisions", 4000, "instructions section: decisions per row")
		irKeep     = flag.Bool("ir-keep", false, "instructions section: keep callgrind's dumps and name them")
		irServer   = flag.String("ir-redis-server", "", "instructions section: the redis-server executable to count (default: from PATH)")
	)
	flag.Parse()
	if *results != "" {
		path, done, err := keepResults(*results, *sections, time.Now())
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		defer func() {
			done()
			fmt.Fprintln(os.Stderr, "bench: the tables are in", path)
		}()
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		defer pprof.StopCPUProfile()
	}
	want := map[string]bool{}
	for _, s := range strings.Split(*sections, ",") {
		want[strings.TrimSpace(s)] = true
	}
	w := workload{goroutines: *goroutines, keys: *keys, duration: *duration}

	srv, err := startRedis(*serverBin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	defer srv.stop()
	adm, err := newAdmin(srv.addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	b := &bench{addr: srv.addr, srvPid: srv.cmd.Process.Pid, adm: adm, w: w, only: *only, cmdStats: *cmdStats}
	b.header()
	if want["redis"] {
		b.redisTable(*rounds)
	}
	if want["retry"] {
		b.retryTable()
	}
	if want["memory"] {
		// Its rounds are short (seconds), and the median of the ratios to
		// x/time/rate steadies with more of them.
		b.memoryTable(max(*rounds, minMemoryRounds))
	}
	if want["ceiling"] {
		b.ceiling()
	}
	if want["rules"] {
		b.rulesTable()
	}
	if want["limits"] {
		b.limitsTable()
	}
	if want["algorithms"] {
		b.algorithmsTable()
	}
	if want["hotkey"] {
		b.hotKeyTable(*rounds)
	}
	if want["cluster"] {
		b.clusterTable(*rounds)
	}
	if want["keys"] {
		b.keysTable(*maxKeys)
	}
	if want["flood"] {
		b.floodTable(*rounds)
	}
	if want["instructions"] {
		var gs []int
		for _, f := range strings.Split(*irGs, ",") {
			if g, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && g > 0 {
				gs = append(gs, g)
			}
		}
		b.instructionsTable(*irServer, gs, *irN, *irKeep)
	}
	if want["service"] {
		b.serviceTable(*rounds, *svcProfile)
	}
	if want["http"] {
		b.httpTable(*rounds, *duration)
	}
	if want["leases"] {
		b.leasesTable(*rounds)
	}
	if want["budgets"] {
		b.budgetsTable(*rounds)
	}
}

// defaultSections are the sections a run without -sections runs.
const defaultSections = "redis,retry,memory,ceiling,rules,limits,algorithms,hotkey,cluster,keys,flood,service,http,leases,budgets"

type bench struct {
	addr     string
	srvPid   int // the redis-server's process
	adm      *admin
	w        workload
	only     string
	cmdStats bool
}

func (b *bench) header() {
	fmt.Printf("Run at %s: Go %s, GOMAXPROCS %d, %d CPUs (%s), %s.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU(), cpuModel(), redisVersion(b))
	fmt.Printf("Workload: %d goroutines, %d keys, %d per key per %v; load average at start %s.\n\n",
		b.w.goroutines, b.w.keys, perKeyLimit, window, loadAverage())
}

func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	for _, line := range strings.Split(string(data), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}

func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func redisVersion(b *bench) string {
	s, err := b.adm.c.Do(bgCtx, b.adm.c.B().Info().Section("server").Build()).ToString()
	if err != nil {
		return "Redis (version unknown)"
	}
	for _, line := range strings.Split(s, "\r\n") {
		if v, ok := strings.CutPrefix(line, "redis_version:"); ok {
			return "Redis " + v
		}
	}
	return "Redis"
}

// progress draws a bar for what on stderr.
func progress(what string) func(float64) {
	return func(f float64) {
		const width = 30
		n := int(f * width)
		fmt.Fprintf(os.Stderr, "\r%-40.40s [%s%s] %3.0f%%", what, strings.Repeat("#", n), strings.Repeat(".", width-n), f*100)
	}
}

func doneProgress() { fmt.Fprint(os.Stderr, "\r\033[K") }

// picks reports whether the contender named name runs: -only is empty, or
// name contains one of its comma-separated parts.
func (b *bench) picks(name string) bool {
	if b.only == "" {
		return true
	}
	for _, part := range strings.Split(b.only, ",") {
		if part != "" && strings.Contains(name, part) {
			return true
		}
	}
	return false
}

// redisRow is one contender's measured round.
type redisRow struct {
	round            int // of the redis table's rounds
	o                outcome
	redisCPU         float64 // µs of Redis CPU per decision
	perKey, perEvent float64
}

// measure runs one contender once on a flushed server.
func (b *bench) measure(c contender, w workload) (redisRow, error) {
	b.adm.flush()
	names := keyNames(w.keys)
	inst, err := c.open(b.addr, names)
	if err != nil {
		return redisRow{}, err
	}
	defer inst.close()
	if b.cmdStats {
		b.adm.resetStats()
	}
	cpu0 := b.adm.cpu()
	var o outcome
	if inst.run != nil {
		progress(c.name)(0)
		if o, err = inst.run(w); err != nil {
			doneProgress()
			return redisRow{}, err
		}
	} else {
		o = run(w, inst.worker, progress(c.name))
	}
	cpu1 := b.adm.cpu()
	doneProgress()
	if b.cmdStats && o.ops > 0 {
		b.printCommandStats(c.name, o.ops)
	}
	row := redisRow{o: o}
	if o.ops > 0 {
		row.redisCPU = (cpu1 - cpu0) * 1e6 / float64(o.ops)
	}
	row.perKey, row.perEvent = b.adm.perKey(inst, w.keys, 500)
	return row, nil
}

// printCommandStats prints the commands Redis ran per decision of a round
// of ops decisions, and the µs each took per call and per decision.
func (b *bench) printCommandStats(name string, ops int64) {
	names, calls, usec := b.adm.commandStats()
	fmt.Printf("Commands per decision, %s (%d decisions):\n\n", name, ops)
	fmt.Println("| command | calls/decision | µs/call | µs/decision |")
	fmt.Println("|---|---:|---:|---:|")
	for i, n := range names {
		if n == "info" || n == "config|resetstat" || calls[i] < float64(ops)/1000 {
			continue // the benchmark's own, and setup
		}
		fmt.Printf("| %s | %.3f | %.2f | %.2f |\n", n, calls[i]/float64(ops), usec[i]/max(1, calls[i]), usec[i]/float64(ops))
	}
	fmt.Println()
}

// medianBy returns the row of median figure: the middle one of rows
// sorted by figure (which rows keeps its order).
func medianBy[T any](rows []T, figure func(T) float64) T {
	rows = slices.Clone(rows)
	slices.SortStableFunc(rows, func(a, b T) int { return cmp.Compare(figure(a), figure(b)) })
	return rows[len(rows)/2]
}

func (b *bench) redisTable(rounds int) {
	var cs []contender
	for _, c := range redisContenders() {
		if b.picks(c.name) {
			cs = append(cs, c)
		}
	}
	all := make([][]redisRow, len(cs))
	for r := range rounds {
		for i, c := range cs {
			row, err := b.measure(c, b.w)
			if err != nil {
				fmt.Fprintf(os.Stderr, "bench: %s: %v\n", c.name, err)
				continue
			}
			if row.o.errors > 0 {
				fmt.Fprintf(os.Stderr, "bench: %s, round %d: %d errors, first: %v\n", c.name, r+1, row.o.errors, row.o.firstErr)
			}
			row.round = r
			all[i] = append(all[i], row)
		}
	}
	fmt.Printf("### Redis: %d goroutines, %d keys, %d per key per minute (median of %d rounds of %v)\n\n",
		b.w.goroutines, b.w.keys, perKeyLimit, rounds, b.w.duration)
	fmt.Println("| contender | decisions/s | sluice ÷ this | p50 | p99 | allowed | allocs/op | client CPU µs/op | Redis CPU µs/op | Redis B/key | B/event |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	var base float64
	cpu := map[string][]float64{} // Redis CPU per decision, by contender and round
	for i, c := range cs {
		if len(all[i]) == 0 {
			continue
		}
		cpu[c.name] = slices.Repeat([]float64{math.NaN()}, rounds)
		for _, r := range all[i] {
			cpu[c.name][r.round] = r.redisCPU
		}
		m := medianBy(all[i], func(r redisRow) float64 { return r.o.perSecond() })
		rate := m.o.perSecond()
		if i == 0 {
			base = rate
		}
		entry := "–"
		if m.perEvent > 0 {
			entry = fmt.Sprintf("%.1f", m.perEvent)
		}
		allocs := "–" // another process's
		if m.o.allocsPerOp >= 0 {
			allocs = fmt.Sprintf("%.1f", m.o.allocsPerOp)
		}
		fmt.Printf("| %s | %.0f | %.2f× | %s | %s | %.0f%% | %s | %.1f | %.1f | %.0f | %s |\n",
			c.name, rate, base/rate, fmtDur(m.o.p50), fmtDur(m.o.p99), 100*float64(m.o.allowed)/float64(max(1, m.o.ops)),
			allocs, m.o.clientCPU, m.redisCPU, m.perKey, entry)
	}
	fmt.Println()
	printLine(quotaVerdict("Redis CPU µs", 1, cpu))
	fmt.Println("Every round of every contender:")
	fmt.Println()
	for i, c := range cs {
		printRounds(c.name, all[i], func(r redisRow) outcome { return r.o })
	}
	fmt.Println()
}

// printRounds prints the decisions/s of each of a contender's rounds, as
// one item of a list.
func printRounds[R any](name string, rounds []R, o func(R) outcome) {
	var s []string
	for _, r := range rounds {
		s = append(s, fmt.Sprintf("%.0f", o(r).perSecond()))
	}
	fmt.Printf("- %s: %s decisions/s\n", name, strings.Join(s, ", "))
}

func fmtDur(d time.Duration) string {
	switch {
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	case d >= time.Microsecond:
		return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
	}
	return fmt.Sprintf("%d ns", d.Nanoseconds())
}

// minMemoryRounds is the fewest rounds the memory section runs.
const minMemoryRounds = 7

// memoryTable measures the in-process contenders rounds times, round-robin
// (each round starting one contender later, so that none always follows the
// same one), each round on fresh state over the same prebuilt key strings,
// and reports each contender's median round. The ratios to x/time/rate are
// taken within each round, between measurements made seconds apart, and
// their median reported: on a shared machine they vary less than the
// figures themselves.
func (b *bench) memoryTable(rounds int) {
	const keys = 100_000
	cs := memContenders()
	names := keyNames(keys)
	all := make([][]memResult, len(cs))
	for r := range rounds {
		for k := range cs {
			i := (r + k) % len(cs)
			progress(fmt.Sprintf("%s, round %d", cs[i].name, r+1))(float64(k) / float64(len(cs)))
			all[i] = append(all[i], benchMem(cs[i], names))
		}
		doneProgress()
	}
	serial := func(m memResult) float64 { return m.serialNs }
	parallel := func(m memResult) float64 { return m.parallelNs }
	med := make([]memResult, len(cs))
	for i := range cs {
		med[i] = memResult{serialNs: medianBy(all[i], serial).serialNs, parallelNs: medianBy(all[i], parallel).parallelNs,
			heapPerKey: medianBy(all[i], func(m memResult) float64 { return m.heapPerKey }).heapPerKey}
		for _, m := range all[i] {
			med[i].allocs, med[i].bytes = max(med[i].allocs, m.allocs), max(med[i].bytes, m.bytes)
		}
	}
	fmt.Printf("### In memory: one rule, %d keys, every key warm (GOMAXPROCS %d; median of %d rounds of %d decisions a key)\n\n",
		keys, runtime.GOMAXPROCS(0), rounds, memDecisionsPerKey)
	fmt.Println("Serial: CPU time of the deciding thread per decision; parallel: wall time per decision from GOMAXPROCS goroutines.")
	fmt.Println()
	fmt.Println("Heap per key: live heap after each key's first decision, per key (the keys' strings are the bench's, not counted).")
	fmt.Println()
	fmt.Println("| contender | ns/op serial | this ÷ sluice | ns/op parallel | this ÷ sluice | allocs/op | B/op | heap B/key | model |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---|")
	for i, c := range cs {
		m := med[i]
		fmt.Printf("| %s | %.0f | %.2f× | %.0f | %.2f× | %.2f | %.0f | %.0f | %s |\n",
			c.name, m.serialNs, m.serialNs/med[0].serialNs, m.parallelNs, m.parallelNs/med[0].parallelNs, m.allocs, m.bytes, m.heapPerKey, c.note)
	}
	fmt.Println()
	// Each sluice contender against x/time/rate, round by round.
	peer := slices.IndexFunc(cs, func(c memContender) bool { return strings.HasPrefix(c.name, "x/time/rate") })
	var verdict string
	for i, c := range cs {
		if !strings.HasPrefix(c.name, "sluice") {
			continue
		}
		var ser, par []float64
		for r := range all[i] {
			ser = append(ser, all[i][r].serialNs/all[peer][r].serialNs)
			par = append(par, all[i][r].parallelNs/all[peer][r].parallelNs)
		}
		fmt.Printf("- %s ÷ %s, per round: serial %s, parallel %s\n", c.name, cs[peer].name, fmtRatios(ser), fmtRatios(par))
		if c.name == allowRow {
			verdict = allowVerdict(median(ser), med[i].allocs)
		}
	}
	fmt.Println()
	if verdict != "" {
		printLine(verdict)
	}
}

// allowRow is the memory section's Limiter.Allow contender, and
// maxAllowRatio the most its serial cost may be of x/time/rate's.
const (
	allowRow      = "sluice memstore (Limiter.Allow)"
	maxAllowRatio = 1.5
)

// allowVerdict says whether Limiter.Allow, serial, costs at most
// maxAllowRatio times x/time/rate's keyed map (ratio: the median of the
// per-round ratios) and allocates nothing per decision (allocs: its most
// per decision over the rounds, as the table shows it, to 0.01: a round
// counts every allocation of the process, the runtime's too, so one in a
// million decisions is not the contender's).
func allowVerdict(ratio, allocs float64) string {
	ok := func(b bool) string {
		if b {
			return "yes"
		}
		return "NO"
	}
	return fmt.Sprintf("Limiter.Allow in memory, serial, %.2f× x/time/rate (median of the rounds' ratios), %.2f allocs/op. At most %.1f×: %s; no allocation: %s.",
		ratio, allocs, maxAllowRatio, ok(ratio <= maxAllowRatio), ok(allocs < 0.005))
}

// fmtRatios formats ratios as their median and range.
func fmtRatios(rs []float64) string {
	slices.Sort(rs)
	return fmt.Sprintf("%.2f× (%.2f – %.2f)", rs[len(rs)/2], rs[0], rs[len(rs)-1])
}
