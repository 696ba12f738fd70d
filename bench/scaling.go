package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/resolve"
	"github.com/sluicerate/sluice/redisstore"
)

var bgCtx = context.Background()

// ceiling runs redis-benchmark, pipelined, against the same server: the
// rate at which Redis alone runs one script call per decision, with no
// client work at all.
func (b *bench) ceiling() {
	bin, err := exec.LookPath("redis-benchmark")
	if err != nil {
		fmt.Printf("(redis-benchmark not installed: no ceiling measured)\n\n")
		return
	}
	sha, err := b.adm.c.Do(bgCtx, b.adm.c.B().ScriptLoad().Script(naiveScript).Build()).ToString()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench: SCRIPT LOAD:", err)
		return
	}
	host, port, _ := strings.Cut(b.addr, ":")
	now := strconv.FormatInt(time.Now().UnixMicro(), 10)
	fmt.Println("### The ceiling: redis-benchmark, 64 connections, pipeline 16, random keys of 10,000")
	fmt.Println()
	fmt.Println("| command | calls/s | Redis CPU µs/call |")
	fmt.Println("|---|---:|---:|")
	for _, c := range []struct {
		name string
		args []string
	}{
		{"EVALSHA naive sliding-log script", []string{"evalsha", sha, "1", "ceil:__rand_int__", now, "60000000", "100", now + "-__rand_int__"}},
		{"ZADD (one command, no script)", []string{"zadd", "zceil:__rand_int__", now, "__rand_int__"}},
	} {
		b.adm.flush()
		if c.args[0] == "evalsha" {
			b.adm.c.Do(bgCtx, b.adm.c.B().ScriptLoad().Script(naiveScript).Build())
		}
		const n = 400_000
		progress(c.name)(0)
		cpu0 := b.adm.cpu()
		args := append([]string{"-h", host, "-p", port, "-n", strconv.Itoa(n), "-c", "64", "-P", "16", "-r", "10000", "-q"}, c.args...)
		out, err := exec.Command(bin, args...).Output()
		cpu1 := b.adm.cpu()
		doneProgress()
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: redis-benchmark:", err)
			continue
		}
		fmt.Printf("| %s | %s | %.1f |\n", c.name, rps(string(out)), (cpu1-cpu0)*1e6/n)
	}
	fmt.Println()
}

// rps picks the requests per second out of redis-benchmark -q output.
func rps(out string) string {
	lines := strings.FieldsFunc(out, func(r rune) bool { return r == '\r' || r == '\n' })
	for i := len(lines) - 1; i >= 0; i-- {
		if _, after, ok := strings.Cut(lines[i], ": "); ok {
			if f := strings.Fields(after); len(f) > 0 {
				if _, err := strconv.ParseFloat(f[0], 64); err == nil {
					return f[0]
				}
			}
		}
	}
	return "?"
}

func (b *bench) rulesTable() {
	w := b.w
	w.duration = max(w.duration*3/4, time.Second)
	fmt.Printf("### Rules per policy (sluice, Redis, %d goroutines, %d keys, %v each)\n\n", w.goroutines, w.keys, w.duration)
	fmt.Println("| rules | decisions/s | ÷ 1 rule | p99 | Redis CPU µs/decision |")
	fmt.Println("|---:|---:|---:|---:|---:|")
	var base float64
	for _, n := range []int{1, 2, 4, 8} {
		row, err := b.measure(contender{name: fmt.Sprintf("%d rules", n), open: openSluice(rulesPolicy(n), benchLimiterConfig)}, w)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return
		}
		rate := row.o.perSecond()
		if n == 1 {
			base = rate
		}
		fmt.Printf("| %d | %.0f | %.2f | %s | %.1f |\n", n, rate, rate/base, fmtDur(row.o.p99), row.redisCPU)
	}
	fmt.Println()
}

// fill records events events in each of the first keys keys of policy p,
// from many goroutines.
func fill(lim *sluice.Limiter, p *sluice.Policy, names []string, events int, what string) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	const workers = 64
	total := len(names) * events
	var done int64
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			attrs := map[string]string{}
			for j := g; j < total; j += workers {
				attrs["key"] = names[j%len(names)]
				if _, err := lim.Record(bgCtx, p, attrs, 1); err != nil {
					mu.Lock()
					first = err
					mu.Unlock()
					return
				}
				if g == 0 && j%(workers*256) == 0 {
					mu.Lock()
					done = int64(j)
					mu.Unlock()
					progress(what)(float64(done) / float64(total))
				}
			}
		}()
	}
	wg.Wait()
	doneProgress()
	return first
}

// fillNaive writes events seed-style entries into each naive key with
// pipelined ZADDs.
func (b *bench) fillNaive(names []string, events int) {
	now := time.Now().UnixMicro()
	c := b.adm.c
	for _, name := range names {
		cmds := make([]rueidis.Completed, 0, events+1)
		for e := range events {
			ts := now - int64(events-e)
			cmds = append(cmds, c.B().Zadd().Key("naive:"+name).ScoreMember().ScoreMember(float64(ts), strconv.FormatInt(ts, 10)+"-"+strconv.Itoa(100000000+e*7919%900000000)).Build())
		}
		cmds = append(cmds, c.B().Expire().Key("naive:"+name).Seconds(60).Build())
		c.DoMulti(bgCtx, cmds...)
	}
}

func (b *bench) limitsTable() {
	fmt.Println("### Limit per key: memory of a full window, and decisions/s against full windows (sluice, Redis)")
	fmt.Println()
	fmt.Println("| limit | keys | encoding | sluice B/key | sluice B/event | naive B/event | decisions/s (denials) | p99 |")
	fmt.Println("|---:|---:|---|---:|---:|---:|---:|---:|")
	for _, limit := range []int{10, 100, 1000, 10000} {
		b.adm.flush()
		keys := min(1000, 200_000/limit)
		names := keyNames(keys)
		p := &sluice.Policy{Name: "limit" + strconv.Itoa(limit), Rules: []sluice.Rule{
			{Name: "per-key", Limit: int64(limit), Window: time.Hour, By: []string{"key"}},
		}}
		s, err := redisstore.New(redisstore.Config{Addrs: []string{b.addr}, Prefix: "sluice"})
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return
		}
		lim := sluice.NewLimiter(s, benchLimiterConfig)
		if err := fill(lim, p, names, limit, fmt.Sprintf("filling %d keys to %d", keys, limit)); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			s.Close()
			return
		}
		inst := &instance{redisKey: func(i int) string {
			req, err := resolve.Request(p, map[string]string{"key": names[i]}, 1)
			if err != nil {
				return ""
			}
			return s.Keys(req)[0]
		}, zset: true}
		perKey, perEvent := b.adm.perKey(inst, keys, 100)
		enc := b.adm.encoding(inst.redisKey(0))
		b.fillNaive(names[:min(keys, 20)], limit)
		_, naiveEntry := b.adm.perKey(&instance{redisKey: func(i int) string { return "naive:" + names[i] }, zset: true}, min(keys, 20), 20)
		w := b.w
		w.keys = keys
		w.duration = max(b.w.duration/2, time.Second)
		o := runOutcome(w, lim, p, names, fmt.Sprintf("limit %d", limit))
		s.Close()
		fmt.Printf("| %d | %d | %s | %.0f | %.1f | %.1f | %.0f | %s |\n", limit, keys, enc, perKey, perEvent, naiveEntry, o.perSecond(), fmtDur(o.p99))
	}
	fmt.Println()
}

func (b *bench) keysTable(maxKeys int) {
	fmt.Printf("### Keys (sluice, Redis, one rule, %d goroutines)\n\n", b.w.goroutines)
	fmt.Println("| keys | decisions/s | p99 | Redis used_memory / key | events / key |")
	fmt.Println("|---:|---:|---:|---:|---:|")
	for keys := 1000; keys <= maxKeys; keys *= 10 {
		b.adm.flush()
		base := b.adm.usedMemory()
		names := keyNames(keys)
		if keys <= 100_000 {
			w := b.w
			w.keys = keys
			w.duration = max(b.w.duration*3/4, time.Second)
			row, err := b.measure(contender{name: fmt.Sprintf("%d keys", keys), open: openSluice(onePolicy(), benchLimiterConfig)}, w)
			if err != nil {
				fmt.Fprintln(os.Stderr, "bench:", err)
				return
			}
			// measure flushed before running: the memory is what the run left.
			n := max(1, b.adm.dbsize())
			fmt.Printf("| %d | %.0f | %s | %.0f B | %.1f |\n", keys, row.o.perSecond(), fmtDur(row.o.p99),
				(b.adm.usedMemory()-base)/float64(n), float64(row.o.allowed)/float64(n))
			continue
		}
		// Beyond 10^5 keys: memory only, one event in every key.
		s, err := redisstore.New(redisstore.Config{Addrs: []string{b.addr}, Prefix: "sluice"})
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return
		}
		lim := sluice.NewLimiter(s, benchLimiterConfig)
		err = fill(lim, onePolicy(), names, 1, fmt.Sprintf("one event in each of %d keys", keys))
		s.Close()
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return
		}
		n := max(1, b.adm.dbsize())
		fmt.Printf("| %d | (memory only) | – | %.0f B | 1.0 |\n", keys, (b.adm.usedMemory()-base)/float64(n))
	}
	fmt.Println()
}
