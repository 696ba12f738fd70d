package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
)

// The service section: `sluice serve --envoy-config DIR` against
// envoyproxy/ratelimit, each a process of its own built by the bench, on the
// bench's redis-server, given the same configuration directory and driven
// by the same clients: Envoy's rate-limit service over gRPC (a Go client,
// w.goroutines concurrent calls over serviceConns connections) and /json
// over HTTP (wrk, w.goroutines connections). The contenders alternate
// within each scenario (A B C A B C ...), each on a flushed Redis, and the
// table reports each one's median round.

// serviceConns is how many HTTP/2 connections the gRPC client spreads its
// calls over: one per Envoy worker thread on a 2-core machine.
const serviceConns = 2

// serviceContender is one rate-limit service in the comparison.
type serviceContender struct {
	name  string
	start func(s *serviceRun) (*serviceProc, error)
}

// serviceRun is what the section's contenders share: the executables, the
// configuration directory, the Redis server.
type serviceRun struct {
	dir          string // temporary directory: binaries, configuration
	runtimeRoot  string // RUNTIME_ROOT: the files are in ROOT/ratelimit/config
	configDir    string
	sluiceConfig string // sluice serve's --config: the store's timeout
	sluiceBin    string
	ratelimitBin string
	redisAddr    string
	grpcConns    int
}

// sluiceServiceConfig is sluice serve's --config beside --envoy-config: a
// store call may take as long as envoyproxy/ratelimit's Redis calls may
// (REDIS_TIMEOUT, 10s by default) instead of sluice's default 50 ms, which
// a Redis that shares two cores with both services and the clients
// overruns now and then.
const sluiceServiceConfig = `store:
  timeout: 10s
`

func serviceContenders() []serviceContender {
	envoyRL := func(name string, extra ...string) serviceContender {
		return serviceContender{name: name, start: func(s *serviceRun) (*serviceProc, error) {
			addrs, err := freeAddrs(3)
			if err != nil {
				return nil, err
			}
			hostPort := func(prefix, addr string) []string {
				host, port, _ := net.SplitHostPort(addr)
				return []string{prefix + "HOST=" + host, prefix + "PORT=" + port}
			}
			env := []string{
				"USE_STATSD=false",
				"LOG_LEVEL=warn",
				"REDIS_SOCKET_TYPE=tcp",
				"REDIS_URL=" + s.redisAddr,
				"RUNTIME_ROOT=" + s.runtimeRoot,
				"RUNTIME_SUBDIRECTORY=ratelimit",
				"RUNTIME_WATCH_ROOT=false",
			}
			env = append(env, hostPort("", addrs[0])...)
			env = append(env, hostPort("GRPC_", addrs[1])...)
			env = append(env, hostPort("DEBUG_", addrs[2])...)
			return startService(name, s.ratelimitBin, nil, append(env, extra...), addrs[0], addrs[1])
		}}
	}
	return []serviceContender{
		sluiceServe("sluice serve", ""),
		envoyRL("envoyproxy/ratelimit"),
		envoyRL("envoyproxy/ratelimit, pipeline window 150µs", "REDIS_PIPELINE_WINDOW=150us"),
		sluiceServe("sluice serve, algorithm: gcra", "algorithm: gcra"),
		sluiceServe("sluice serve, algorithm: sliding-counter", "algorithm: sliding-counter"),
		sluiceServe("sluice serve, budget: 15s", serviceBudget),
	}
}

// serviceBudget is the budgeted contender's key: the longest budget a
// limit of a minute takes (a quarter of the window), so that a slice of
// a user's window lives as long as it may.
const serviceBudget = "budget: 15s"

// sluiceServe is sluice serve on the section's configuration files with
// key (sluice's own key of a rate_limit, "algorithm: gcra" say) added to
// every limit, in a directory of its own; "" serves them as they are.
func sluiceServe(name, key string) serviceContender {
	return serviceContender{name: name, start: func(s *serviceRun) (*serviceProc, error) {
		dir := s.configDir
		if key != "" {
			dir = filepath.Join(s.dir, "envoy-"+strings.NewReplacer(": ", "-", " ", "").Replace(key))
			if err := writeServiceDomains(dir, key); err != nil {
				return nil, err
			}
		}
		addrs, err := freeAddrs(3)
		if err != nil {
			return nil, err
		}
		p, err := startService(name, s.sluiceBin, []string{
			"serve", "--config", s.sluiceConfig, "--envoy-config", dir, "--redis", "redis://" + s.redisAddr + "/0",
			"--http", addrs[0], "--grpc", addrs[1], "--admin", addrs[2], "--log-level", "warn",
		}, nil, addrs[0], addrs[1])
		if p != nil {
			p.admin = addrs[2]
		}
		return p, err
	}}
}

// writeServiceDomains writes the section's configuration files into dir,
// with key added to every rate_limit ("" for none).
func writeServiceDomains(dir, key string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, d := range serviceDomains() {
		if err := os.WriteFile(filepath.Join(dir, d.name+".yaml"), []byte(d.withKey(key)), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// onlyServices returns the contenders whose name contains -only's string
// (every one when it is empty).
func (b *bench) onlyServices(cs []serviceContender) []serviceContender {
	return slices.DeleteFunc(cs, func(c serviceContender) bool { return !b.picks(c.name) })
}

// freeAddrs returns n distinct loopback addresses that were free a moment
// ago.
func freeAddrs(n int) ([]string, error) {
	var addrs []string
	for len(addrs) < n {
		a, err := freeAddr()
		if err != nil {
			return nil, err
		}
		if !slices.Contains(addrs, a) {
			addrs = append(addrs, a)
		}
	}
	return addrs, nil
}

// serviceRow is one contender's measured round of one scenario.
type serviceRow struct {
	l         serviceLoad
	redisCPU  float64 // µs of Redis CPU per decision
	serverCPU float64 // µs of the service's CPU per decision
	clientCPU float64 // µs of the load generator's CPU per decision
}

// serviceScenario is one domain over one protocol.
type serviceScenario struct {
	dom   serviceDomain
	proto string // "gRPC" or "HTTP /json"
}

// serviceTable runs the service section: rounds rounds of every scenario.
func (b *bench) serviceTable(rounds int, profile string) {
	s, procs, err := b.startServices()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: service:", err)
		return
	}
	defer func() {
		for _, p := range procs {
			p.stop()
		}
		os.RemoveAll(s.dir)
	}()
	cs := b.onlyServices(serviceContenders())
	var scenarios []serviceScenario
	for _, d := range serviceDomains() {
		scenarios = append(scenarios, serviceScenario{d, "gRPC"}, serviceScenario{d, "HTTP /json"})
	}
	results := make([][][]serviceRow, len(scenarios))
	for si, sc := range scenarios {
		results[si] = make([][]serviceRow, len(cs))
		reqs := make([]*rlsv3.RateLimitRequest, b.w.keys)
		for i := range reqs {
			reqs[i] = sc.dom.request(i)
		}
		for r := range rounds {
			for ci, c := range cs {
				label := fmt.Sprintf("%s %s, %s %d/%d", c.name, sc.proto, sc.dom.name, r+1, rounds)
				row, err := b.measureService(s, procs[ci], sc, reqs, progress(label))
				doneProgress()
				if err != nil {
					fmt.Fprintf(os.Stderr, "bench: %s: %v\n", label, err)
					continue
				}
				if row.l.failed > 0 {
					fmt.Fprintf(os.Stderr, "bench: %s: %d failed, first: %s\n", label, row.l.failed, row.l.firstErr)
				}
				results[si][ci] = append(results[si][ci], row)
			}
		}
	}
	if profile != "" {
		for _, sc := range scenarios {
			proto := "grpc"
			if sc.proto != "gRPC" {
				proto = "json"
			}
			b.profileService(s, procs[0], sc, fmt.Sprintf("%s-%s-%s.prof", profile, sc.dom.name, proto))
		}
	}
	b.printServiceTable(cs, scenarios, results, rounds)
}

// startServices builds both services, writes the configuration directory
// and starts every contender on the bench's Redis.
func (b *bench) startServices() (*serviceRun, []*serviceProc, error) {
	dir, err := os.MkdirTemp("", "sluice-bench-service-")
	if err != nil {
		return nil, nil, err
	}
	s := &serviceRun{dir: dir, runtimeRoot: filepath.Join(dir, "runtime"), redisAddr: b.addr, grpcConns: serviceConns}
	s.configDir = filepath.Join(s.runtimeRoot, "ratelimit", "config")
	fail := func(err error) (*serviceRun, []*serviceProc, error) {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	if err := writeServiceDomains(s.configDir, ""); err != nil {
		return fail(err)
	}
	s.sluiceConfig = filepath.Join(dir, "sluice.yaml")
	if err := os.WriteFile(s.sluiceConfig, []byte(sluiceServiceConfig), 0o644); err != nil {
		return fail(err)
	}
	progress("building sluice")(0)
	if s.sluiceBin, err = buildSluiceCommand(dir); err != nil {
		return fail(err)
	}
	progress("building envoyproxy/ratelimit")(0)
	if s.ratelimitBin, err = buildEnvoyRatelimit(dir); err != nil {
		return fail(err)
	}
	doneProgress()
	var procs []*serviceProc
	for _, c := range b.onlyServices(serviceContenders()) {
		p, err := c.start(s)
		if err != nil {
			for _, p := range procs {
				p.stop()
			}
			return fail(err)
		}
		procs = append(procs, p)
	}
	return s, procs, nil
}

// measureService runs one round of one scenario against p on a flushed
// Redis.
func (b *bench) measureService(s *serviceRun, p *serviceProc, sc serviceScenario, reqs []*rlsv3.RateLimitRequest, prog func(float64)) (serviceRow, error) {
	b.adm.flush()
	var client *grpcClient
	if sc.proto == "gRPC" {
		var err error
		if client, err = dialGRPC(p.grpc, s.grpcConns); err != nil {
			return serviceRow{}, err
		}
		defer client.close()
	}
	if b.cmdStats {
		b.adm.resetStats()
	}
	redis0, cpu0 := b.adm.cpu(), p.cpu()
	var l serviceLoad
	if client != nil {
		l = client.run(b.w, reqs, prog)
	} else {
		prog(0)
		var err error
		if l, err = runJSON(sc.dom, p.http, b.w.goroutines, b.w.keys, b.w.duration); err != nil {
			return serviceRow{}, err
		}
	}
	redis1, cpu1 := b.adm.cpu(), p.cpu()
	row := serviceRow{l: l}
	if n := l.allowed + l.denied; b.cmdStats && n > 0 {
		b.printCommandStats(fmt.Sprintf("%s, domain %s, %s", p.name, sc.dom.name, sc.proto), n)
	}
	if n := l.allowed + l.denied; n > 0 {
		row.redisCPU = (redis1 - redis0) * 1e6 / float64(n)
		row.serverCPU = float64(cpu1-cpu0) / float64(time.Microsecond) / float64(n)
		row.clientCPU = float64(l.clientCPU) / float64(time.Microsecond) / float64(n)
	}
	return row, nil
}

// profileService takes a CPU profile of sluice serve through its admin
// listener's pprof while sc's client (the gRPC client or wrk) drives it
// for the workload's duration, and writes it to path.
func (b *bench) profileService(s *serviceRun, p *serviceProc, sc serviceScenario, path string) {
	reqs := make([]*rlsv3.RateLimitRequest, b.w.keys)
	for i := range reqs {
		reqs[i] = sc.dom.request(i)
	}
	b.adm.flush()
	secs := max(1, int(b.w.duration/time.Second))
	got := make(chan error, 1)
	go func() { got <- fetchProfile(p.admin, secs, path) }()
	w := b.w
	w.duration += time.Second // the profile ends within the load
	label := fmt.Sprintf("profiling sluice serve, %s, %s", sc.proto, sc.dom.name)
	var err error
	if sc.proto == "gRPC" {
		var client *grpcClient
		if client, err = dialGRPC(p.grpc, s.grpcConns); err == nil {
			client.run(w, reqs, progress(label))
			client.close()
		}
	} else {
		progress(label)(0)
		_, err = runJSON(sc.dom, p.http, w.goroutines, w.keys, w.duration)
	}
	doneProgress()
	if perr := <-got; err == nil {
		err = perr
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: profile:", err)
		return
	}
	fmt.Fprintf(os.Stderr, "bench: sluice serve's CPU profile under %s load (%s) is in %s: go tool pprof -top %s\n", sc.proto, sc.dom.name, path, path)
}

func (b *bench) printServiceTable(cs []serviceContender, scenarios []serviceScenario, results [][][]serviceRow, rounds int) {
	fmt.Printf("### Service: sluice serve --envoy-config against envoyproxy/ratelimit %s (median of %d rounds of %v)\n\n",
		envoyRatelimitVersion, rounds, b.w.duration)
	fmt.Printf("Both serve the same envoyproxy/ratelimit configuration files on the same Redis. sluice counts exact sliding windows "+
		"(all or nothing over a request's descriptors); envoyproxy/ratelimit counts fixed windows (per calendar minute; every "+
		"descriptor's hits counted, over its limit or not). The sluice serve rows below them serve the same files with one of "+
		"sluice's own keys added to every rate_limit: algorithm: gcra (a token bucket of requests_per_unit), algorithm: "+
		"sliding-counter (two fixed windows weighted), or %s (each user's window leased to the process in slices, "+
		"docs/budgets.md). Clients: gRPC (Envoy's RLS, %d concurrent calls over %d connections) "+
		"and HTTP POST /json (wrk, 2 threads, %d connections). Keys: 9,000 users under their limits and %d heavy users with "+
		"10%% of the requests, who pass theirs. sluice serve's store calls may take 10 s, as envoyproxy/ratelimit's "+
		"(REDIS_TIMEOUT), instead of its 50 ms default. Decisions are OK and OVER_LIMIT answers; failed calls are counted apart. "+
		"CPU per decision: the service process's (/proc), Redis's (INFO cpu) and the load generator's (this process, or wrk).\n\n",
		serviceBudget, b.w.goroutines, serviceConns, b.w.goroutines, serviceHeavyUsers)
	fmt.Println("| domain | protocol | contender | decisions/s | sluice ÷ this | p50 | p99 | allowed | denied | failed | service CPU µs/decision | Redis CPU µs/decision | client CPU µs/decision |")
	fmt.Println("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for si, sc := range scenarios {
		var base float64
		for ci, c := range cs {
			rows := results[si][ci]
			if len(rows) == 0 {
				continue
			}
			m := medianBy(rows, func(r serviceRow) float64 { return r.l.perSecond() })
			rate := m.l.perSecond()
			if ci == 0 {
				base = rate
			}
			ratio := "–"
			if base > 0 {
				ratio = fmt.Sprintf("%.2f×", base/rate)
			}
			fmt.Printf("| %s | %s | %s | %.0f | %s | %s | %s | %d | %d | %d | %.1f | %.1f | %.1f |\n",
				sc.dom.name, sc.proto, c.name, rate, ratio, fmtDur(m.l.p50), fmtDur(m.l.p99),
				m.l.allowed, m.l.denied, m.l.failed, m.serverCPU, m.redisCPU, m.clientCPU)
		}
	}
	fmt.Println()
	for _, d := range serviceDomains() {
		fmt.Printf("Domain %s (%s):\n\n```yaml\n%s```\n\n", d.name, d.title, d.yaml)
	}
	fmt.Println("Every round (decisions/s):")
	fmt.Println()
	for si, sc := range scenarios {
		var parts []string
		for ci, c := range cs {
			var s []string
			for _, r := range results[si][ci] {
				s = append(s, fmt.Sprintf("%.0f", r.l.perSecond()))
			}
			parts = append(parts, c.name+": "+strings.Join(s, ", "))
		}
		fmt.Printf("- %s, %s: %s\n", sc.dom.name, sc.proto, strings.Join(parts, "; "))
	}
	fmt.Println()
}
