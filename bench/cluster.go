package main

// The cluster section: one application process deciding keys spread over
// every slot, against one Redis master and against a 3-master Redis
// Cluster, every master held to the same share of a core by a cgroup (the
// machine's two cores cannot give three masters a core each; the quota
// makes each master the bound, as its own core is on a production
// Cluster). A Cluster scales when its masters each take a third of the
// decisions at no more Redis CPU each than one master: with a batch per
// master, not per slot.

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/redistest"
	"github.com/sluicerate/sluice/redisstore"
)

// clusterShare is the share of a core each master may use in the cluster
// section: small enough that the masters, not the client on the cores
// left, are the bound with three of them.
const clusterShare = 0.15

// clusterTable runs the cluster section for rounds rounds, the two
// topologies taking turns.
func (b *bench) clusterTable(rounds int) {
	c, err := redistest.StartClusterMain()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: cluster:", err)
		return
	}
	defer c.Stop()
	p := &sluice.Policy{Name: "spread", Rules: []sluice.Rule{
		{Name: "per-key", Limit: 1 << 40, Window: time.Minute, By: []string{"key"}},
	}}
	type run struct {
		name    string
		addrs   []string
		mode    redisstore.Mode
		masters func() []int
		stats   []*redistest.Server
	}
	one := run{"one master", []string{b.addr}, redisstore.Standalone, func() []int { return []int{b.srvPid} }, nil}
	three := run{"3-master Cluster", c.Addrs(), redisstore.Cluster, func() []int {
		var pids []int
		for _, m := range c.Masters() {
			pids = append(pids, m.Pid())
		}
		return pids
	}, c.Masters()}
	type result struct {
		o              outcome
		calls, usPerOp float64 // script calls and Redis CPU µs per decision, over every master
	}
	runs := []run{one, three}
	all := make([][]result, len(runs))
	for r := range rounds {
		for i, x := range runs {
			s, err := redisstore.New(redisstore.Config{Mode: x.mode, Addrs: x.addrs, Prefix: fmt.Sprintf("cl%d-%d", i, r)})
			if err != nil {
				fmt.Fprintln(os.Stderr, "bench: cluster:", err)
				return
			}
			_ = s.Warm(context.Background())
			lim := sluice.NewLimiter(s, benchLimiterConfig)
			var caps []*cpuCap
			for j, pid := range x.masters() {
				cc, err := capCPU(cgroupName("cluster", fmt.Sprint(i), fmt.Sprint(j)), clusterShare, pid)
				if err != nil {
					fmt.Fprintln(os.Stderr, "bench: cluster: capping the masters' CPU:", err)
					s.Close()
					return
				}
				caps = append(caps, cc)
			}
			servers := x.stats // nil: the bench's own server
			calls0, cpu0 := b.scriptCalls(servers), b.serversCPU(servers)
			names := keyNames(b.w.keys)
			o := runOutcome(b.w, lim, p, names, "cluster: "+x.name)
			calls1, cpu1 := b.scriptCalls(servers), b.serversCPU(servers)
			for _, cc := range caps {
				cc.release()
			}
			s.Close()
			if o.errors > 0 {
				fmt.Fprintf(os.Stderr, "bench: cluster, %s: %d errors, first: %v\n", x.name, o.errors, o.firstErr)
			}
			n := float64(max(1, o.ops))
			all[i] = append(all[i], result{o: o, calls: (calls1 - calls0) / n, usPerOp: (cpu1 - cpu0) * 1e6 / n})
		}
	}
	fmt.Printf("### Keys over every slot: one master against a 3-master Cluster (%d goroutines in one process, %d keys, every decision admitted, every master held to %.0f%% of a core; median of %d rounds of %v)\n\n",
		b.w.goroutines, b.w.keys, clusterShare*100, rounds, b.w.duration)
	fmt.Println("| topology | decisions/s | ÷ one master | p50 | p99 | script calls/decision | Redis CPU µs/decision (all masters) |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|")
	var base float64
	for i, x := range runs {
		m := medianBy(all[i], func(r result) float64 { return r.o.perSecond() })
		if i == 0 {
			base = m.o.perSecond()
		}
		fmt.Printf("| %s | %.0f | %.2f× | %s | %s | %.3f | %.1f |\n", x.name, m.o.perSecond(), m.o.perSecond()/base,
			fmtDur(m.o.p50), fmtDur(m.o.p99), m.calls, m.usPerOp)
	}
	fmt.Println()
	for i, x := range runs {
		printRounds(x.name, all[i], func(r result) outcome { return r.o })
	}
	fmt.Println()
}

// runOutcome decides p over names from the workload's goroutines through
// lim for its duration, its progress drawn as label.
func runOutcome(w workload, lim *sluice.Limiter, p *sluice.Policy, names []string, label string) outcome {
	o := run(w, func() decideFunc {
		attrs := map[string]string{"key": ""}
		return func(ctx context.Context, i int) (bool, error) {
			attrs["key"] = names[i]
			d, err := lim.Allow(ctx, p, attrs)
			return d.Allowed, err
		}
	}, progress(label))
	doneProgress()
	return o
}

// scriptCalls returns the script and function calls the servers ran so
// far (INFO commandstats), or the bench's own server's when servers is
// nil.
func (b *bench) scriptCalls(servers []*redistest.Server) float64 {
	infos := b.infos(servers, "commandstats")
	n := 0.0
	for _, info := range infos {
		for _, line := range strings.Split(info, "\n") {
			line = strings.TrimSpace(line)
			if !strings.HasPrefix(line, "cmdstat_eval") && !strings.HasPrefix(line, "cmdstat_fcall") {
				continue
			}
			_, fields, _ := strings.Cut(line, ":")
			var v float64
			fmt.Sscanf(strings.TrimPrefix(strings.Split(fields, ",")[0], "calls="), "%g", &v)
			n += v
		}
	}
	return n
}

// serversCPU returns the servers' CPU time so far in seconds, or the bench's
// own server's when servers is nil.
func (b *bench) serversCPU(servers []*redistest.Server) float64 {
	if servers == nil {
		return b.adm.cpu()
	}
	total := 0.0
	for _, v := range mastersCPU(servers) {
		total += v
	}
	return total
}

// infos returns INFO section of each server, or of the bench's own.
func (b *bench) infos(servers []*redistest.Server, section string) []string {
	if servers == nil {
		s, err := b.adm.c.Do(bgCtx, b.adm.c.B().Info().Section(section).Build()).ToString()
		if err != nil {
			return nil
		}
		return []string{s}
	}
	var out []string
	for _, m := range servers {
		if s, err := m.Do("INFO", section); err == nil {
			out = append(out, s)
		}
	}
	return out
}
