package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/redisstore"
)

// The flood section: an abuse flood on Redis, 99% of the requests for keys
// already over their limit, decided with the deny cache off and on in the
// same run. Every admission's send and reply times go to a checker that
// knows only the limit and the window, not sluice, and counts the
// admissions that certainly exceeded the limit.

const (
	floodLimit   = 2               // per key and window: what a key over its limit gets
	floodWindow  = 2 * time.Second // short, so that windows slide during a round
	floodAbusive = 1_000           // keys over their limit, 99 requests in 100
	floodNormal  = 9_000           // keys with room, 1 request in 100
)

// admission is one admitted request: its key and when it was sent and
// answered, on the wall clock (Redis decides on its own wall clock, TIME).
type admission struct {
	key         int32
	send, reply time.Time
}

// floodRow is one round of one setting.
type floodRow struct {
	o          outcome
	redisCPU   float64 // µs of Redis CPU per decision
	storeCalls float64 // per decision
	admissions int
	abusive    int           // of them, admissions of the keys over their limit
	over       int           // admissions that certainly exceeded the limit
	margin     time.Duration // see overAdmissions
}

func (b *bench) floodTable(rounds int) {
	names := make([]string, floodAbusive+floodNormal)
	for i := range names {
		names[i] = "k" + strconv.Itoa(i) // 0 to floodAbusive-1 are the abusive keys
	}
	settings := []struct {
		name  string
		cache bool
	}{{"off", false}, {"on", true}}
	all := make([][]floodRow, len(settings))
	for r := range rounds {
		for i, s := range settings {
			row, err := b.flood(names, s.cache, fmt.Sprintf("flood, deny cache %s, round %d", s.name, r+1))
			if err != nil {
				fmt.Fprintf(os.Stderr, "bench: flood, deny cache %s: %v\n", s.name, err)
				continue
			}
			if row.o.errors > 0 {
				fmt.Fprintf(os.Stderr, "bench: flood, deny cache %s, round %d: %d errors, first: %v\n", s.name, r+1, row.o.errors, row.o.firstErr)
			}
			all[i] = append(all[i], row)
		}
	}
	fmt.Printf("### Flood: 99%% of requests for keys over their limit (Redis, %d goroutines, median of %d rounds of %v)\n\n", b.w.goroutines, rounds, b.w.duration)
	fmt.Printf("One rule, %d per %v per key. %d keys were filled to their limit before each round and take 99 requests\n", floodLimit, floodWindow, floodAbusive)
	fmt.Printf("in 100; %d keys with room take the rest. The same policy with CacheDenials off and on (Config.DenyCache\n", floodNormal)
	fmt.Println("10,000). Store calls are Limiter decisions that reached Redis. Over-admissions: admissions of one key")
	fmt.Printf("that a checker of their send and reply times (not sluice's code) finds certainly more than %d within\n", floodLimit)
	fmt.Println("one window, over every admission of the round and the fill before it; margin: the least time by which")
	fmt.Printf("%d admissions of a key certainly spanned more than the window. Full keys admitted: admissions of the\n", floodLimit+1)
	fmt.Println("keys over their limit, the fill's included (a cache that denied past the store's room would admit fewer).")
	fmt.Println()
	fmt.Println("| deny cache | decisions/s | p50 | p99 | client CPU µs/decision | Redis CPU µs/decision | store calls/decision | admitted | full keys admitted | over-admissions | margin |")
	fmt.Println("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	var med [2]floodRow
	for i, s := range settings {
		if len(all[i]) == 0 {
			continue
		}
		slices.SortFunc(all[i], func(x, y floodRow) int {
			switch a, b := x.o.perSecond(), y.o.perSecond(); {
			case a < b:
				return -1
			case a > b:
				return 1
			}
			return 0
		})
		m := all[i][len(all[i])/2]
		med[i] = m
		fmt.Printf("| %s | %.0f | %s | %s | %.2f | %.3f | %.4f | %d | %d | %d | %s |\n", s.name, m.o.perSecond(), fmtDur(m.o.p50), fmtDur(m.o.p99),
			m.o.clientCPU, m.redisCPU, m.storeCalls, m.admissions, m.abusive, m.over, m.margin.Round(time.Microsecond))
	}
	if med[0].o.ops > 0 && med[1].o.ops > 0 && med[1].redisCPU > 0 {
		fmt.Printf("\nDeny cache on ÷ off: %.1f× the decisions/s, %.1f× less Redis CPU per decision.\n",
			med[1].o.perSecond()/med[0].o.perSecond(), med[0].redisCPU/med[1].redisCPU)
	}
	fmt.Println()
}

// flood runs one round on a flushed server: it fills the abusive keys,
// then floods, and checks every admission.
func (b *bench) flood(names []string, cache bool, what string) (floodRow, error) {
	b.adm.flush()
	s, err := redisstore.New(redisstore.Config{Addrs: []string{b.addr}, Prefix: "f"})
	if err != nil {
		return floodRow{}, err
	}
	defer s.Close()
	lim := sluice.NewLimiter(s, benchLimiterConfig)
	p := &sluice.Policy{Name: "flood", CacheDenials: cache, Rules: []sluice.Rule{
		{Name: "per-key", Limit: floodLimit, Window: floodWindow, By: []string{"key"}},
	}}
	var (
		mu   sync.Mutex
		logs []*[]admission // each goroutine's admissions
	)
	newLog := func() *[]admission {
		log := new([]admission)
		mu.Lock()
		logs = append(logs, log)
		mu.Unlock()
		return log
	}
	admit := func(log *[]admission, ctx context.Context, attrs map[string]string, key int) (bool, error) {
		attrs["key"] = names[key]
		send := time.Now().Round(0)
		d, err := lim.Allow(ctx, p, attrs)
		if err == nil && d.Allowed {
			*log = append(*log, admission{key: int32(key), send: send, reply: time.Now().Round(0)})
		}
		return d.Allowed, err
	}
	// The abusive keys over their limit: filled to it, then denied once.
	var fillErr error
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			log := newLog()
			attrs := map[string]string{}
			for k := g; k < floodAbusive; k += 16 {
				for range floodLimit + 1 {
					if _, err := admit(log, bgCtx, attrs, k); err != nil {
						mu.Lock()
						fillErr = err
						mu.Unlock()
					}
				}
			}
		})
	}
	wg.Wait()
	if fillErr != nil {
		return floodRow{}, fillErr
	}
	before := lim.DenyCacheStats()
	w := b.w
	cpu0 := b.adm.cpu()
	worker := 0
	o := run(w, func() decideFunc {
		log, attrs := newLog(), map[string]string{}
		worker++
		n := worker * 7919
		return func(ctx context.Context, _ int) (bool, error) {
			n++
			key := floodAbusive + n/100%floodNormal // one in 100: a key with room
			if n%100 != 0 {
				key = n * 31 % floodAbusive
			}
			return admit(log, ctx, attrs, key)
		}
	}, progress(what))
	cpu1 := b.adm.cpu()
	doneProgress()
	row := floodRow{o: o}
	if o.ops > 0 {
		row.redisCPU = (cpu1 - cpu0) * 1e6 / float64(o.ops)
		row.storeCalls = 1
		if cache {
			after := lim.DenyCacheStats()
			row.storeCalls = float64(after.Misses-before.Misses) / float64(o.ops)
		}
	}
	var adm []admission
	for _, l := range logs {
		adm = append(adm, *l...)
	}
	row.admissions = len(adm)
	for _, a := range adm {
		if a.key < floodAbusive {
			row.abusive++
		}
	}
	row.over, row.margin = overAdmissions(adm, floodLimit, floodWindow)
	return row, nil
}

// overAdmissions checks admissions against a sliding window of limit per
// window, knowing only when each was sent and answered: the decision that
// admitted it came in between. Limit+1 admissions of one key whose
// earliest send and latest reply lie less than window apart were certainly
// decided within one window: one over-admission each time. margin is the
// least of that span minus window over every limit+1 admissions in a row
// (by send time) of a key, how close they came to the limit (negative:
// over it), or -1 when no key had limit+1 admissions.
func overAdmissions(adm []admission, limit int, window time.Duration) (over int, margin time.Duration) {
	slices.SortFunc(adm, func(a, b admission) int {
		if a.key != b.key {
			return int(a.key - b.key)
		}
		return a.send.Compare(b.send)
	})
	margin = time.Duration(math.MaxInt64)
	for start := 0; start < len(adm); {
		end := start
		for end < len(adm) && adm[end].key == adm[start].key {
			end++
		}
		run := adm[start:end]
		for i := 0; i+limit < len(run); i++ {
			latest := run[i].reply
			for _, a := range run[i+1 : i+limit+1] {
				if a.reply.After(latest) {
					latest = a.reply
				}
			}
			span := latest.Sub(run[i].send)
			if span < window {
				over++
			}
			margin = min(margin, span-window)
		}
		start = end
	}
	if margin == time.Duration(math.MaxInt64) {
		margin = -1
	}
	return over, margin
}
