package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/redistest"
	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/store"
)

// Fault tests: real servers are flushed, restarted, failed over and frozen
// while goroutines decide, and each test prints its figures.

// outcome is one decision made under load.
type outcome struct {
	start   time.Time
	latency time.Duration
	user    string
	d       sluice.Decision
	err     error
}

// runLoad decides p for users u0..u(users-1) from goroutines goroutines,
// round robin, until stop is closed, and returns every outcome.
func runLoad(lim *sluice.Limiter, p *sluice.Policy, users, goroutines int, stop <-chan struct{}) []outcome {
	var (
		mu  sync.Mutex
		out []outcome
		wg  sync.WaitGroup
	)
	for g := range goroutines {
		wg.Go(func() {
			var mine []outcome
			for i := g; ; i += goroutines {
				select {
				case <-stop:
					mu.Lock()
					out = append(out, mine...)
					mu.Unlock()
					return
				default:
				}
				u := fmt.Sprintf("u%d", i%users)
				start := time.Now()
				d, err := lim.Allow(context.Background(), p, map[string]string{"user": u})
				mine = append(mine, outcome{start: start, latency: time.Since(start), user: u, d: d, err: err})
			}
		})
	}
	wg.Wait()
	slices.SortFunc(out, func(a, b outcome) int { return a.start.Compare(b.start) })
	return out
}

// loadFor runs runLoad while during runs, plus lead before and tail after.
func loadFor(lim *sluice.Limiter, p *sluice.Policy, users, goroutines int, lead, tail time.Duration, during func()) []outcome {
	stop := make(chan struct{})
	done := make(chan []outcome)
	go func() { done <- runLoad(lim, p, users, goroutines, stop) }()
	time.Sleep(lead)
	during()
	time.Sleep(tail)
	close(stop)
	return <-done
}

// tally counts outcomes: errors, NOSCRIPT errors, admissions per user.
type tally struct {
	total, errs, noscript int
	admitted              map[string]int
	firstErr, lastErr     time.Time // the start of the first failed call, the end of the last
	firstErrEnd           time.Time // the earliest end of a failed call
	sample                error
}

func count(out []outcome) tally {
	t := tally{admitted: map[string]int{}}
	for _, o := range out {
		t.total++
		if o.err != nil {
			t.errs++
			if errors.Is(o.err, redisstore.ErrNoScript) || strings.Contains(o.err.Error(), "NOSCRIPT") {
				t.noscript++
			}
			if t.firstErr.IsZero() {
				t.firstErr = o.start
				t.sample = o.err
			}
			if end := o.start.Add(o.latency); t.firstErrEnd.IsZero() || end.Before(t.firstErrEnd) {
				t.firstErrEnd = end
			}
			t.lastErr = o.start.Add(o.latency)
			continue
		}
		if o.d.Allowed {
			t.admitted[o.user]++
		}
	}
	return t
}

// checkStored fails t if a key under prefix on any of nodes has no TTL or
// holds more entries than limit (every test policy's rules have a window
// of an hour and cost 1).
func checkStored(t *testing.T, nodes []*redistest.Server, prefix string, limit int) (keys int) {
	t.Helper()
	for _, n := range nodes {
		if role, _ := n.Do("ROLE"); !strings.HasPrefix(role, "master") {
			continue
		}
		r, err := n.Do("KEYS", prefix+":*")
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range strings.Fields(r) {
			ttl, err := n.Do("PTTL", k)
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(ttl, "-") && ttl != "-2" {
				t.Errorf("%s: key %s has no TTL (PTTL %s)", n.Addr(), k, ttl)
			}
			card, err := n.Do("ZCARD", k)
			if err != nil {
				t.Fatal(err)
			}
			var c int
			fmt.Sscan(card, &c)
			if c > limit {
				t.Errorf("%s: key %s holds %d entries, limit %d", n.Addr(), k, c, limit)
			}
			keys++
		}
	}
	return keys
}

func perUserPolicy(limit int64) *sluice.Policy {
	return &sluice.Policy{Name: "fault", Rules: []sluice.Rule{
		{Name: "user", Limit: limit, Window: time.Hour, By: []string{"user"}},
	}}
}

// TestFaultScriptFlush flushes the script cache five times under load: the
// store reloads the script on NOSCRIPT, so no caller sees it.
func TestFaultScriptFlush(t *testing.T) {
	prefix := newPrefix()
	srv, s := openOwn(t, redisstore.Config{Prefix: prefix})
	lim := sluice.NewLimiter(s, sluice.Config{Timeout: 5 * time.Second})
	p := perUserPolicy(1000)
	out := loadFor(lim, p, 50, 16, 200*time.Millisecond, 300*time.Millisecond, func() {
		for range 5 {
			if _, err := srv.Do("SCRIPT", "FLUSH"); err != nil {
				t.Error(err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	tl := count(out)
	if tl.noscript != 0 || tl.errs != 0 {
		t.Errorf("%d errors (%d NOSCRIPT) of %d decisions, want 0; first: %v", tl.errs, tl.noscript, tl.total, tl.sample)
	}
	keys := checkStored(t, []*redistest.Server{srv}, prefix, 1000)
	t.Logf("SCRIPT FLUSH x5 under load: %d decisions, %d errors, %d NOSCRIPT errors reached callers; %d keys, all with TTL, none over its limit",
		tl.total, tl.errs, tl.noscript, keys)
}

// TestFaultRestart restarts Redis (empty, scripts gone) under load: calls
// fail while it is down, none with NOSCRIPT, and service resumes.
func TestFaultRestart(t *testing.T) {
	prefix := newPrefix()
	srv, s := openOwn(t, redisstore.Config{Prefix: prefix})
	lim := sluice.NewLimiter(s, sluice.Config{Timeout: time.Second, Breaker: sluice.Breaker{Failures: -1}})
	p := perUserPolicy(1000)
	var down, up time.Time
	out := loadFor(lim, p, 50, 16, 300*time.Millisecond, time.Second, func() {
		down = time.Now()
		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
		up = time.Now()
	})
	tl := count(out)
	if tl.noscript != 0 {
		t.Errorf("%d NOSCRIPT errors reached callers, want 0", tl.noscript)
	}
	var afterUp, okAfterUp int
	for _, o := range out {
		if o.start.After(up.Add(500 * time.Millisecond)) {
			afterUp++
			if o.err == nil {
				okAfterUp++
			}
		}
	}
	if afterUp == 0 || okAfterUp != afterUp {
		t.Errorf("%d of %d decisions made from 500ms after the restart succeeded, want all", okAfterUp, afterUp)
	}
	if tl.errs > 0 && (tl.firstErr.Before(down.Add(-50*time.Millisecond)) || tl.lastErr.After(up.Add(500*time.Millisecond))) {
		t.Errorf("errors from %v to %v, outside the restart (%v to %v)", tl.firstErr, tl.lastErr, down, up)
	}
	keys := checkStored(t, []*redistest.Server{srv}, prefix, 1000)
	t.Logf("restart under load: down for %v; %d decisions, %d errors while down, %d NOSCRIPT errors reached callers; %d of %d decisions after it succeeded; %d keys, all with TTL",
		up.Sub(down).Round(time.Millisecond), tl.total, tl.errs, tl.noscript, okAfterUp, afterUp, keys)
}

// failover is one failover under load: what it is, when it started, and
// when the new master first answered as master.
type failover struct {
	what             string
	start, newMaster time.Time
}

// failoverFigures checks and prints the figures of a failover under load:
// errors only from the start of the failover to 2 s after the new master
// answered, and the entries lost by asynchronous replication
// (admitted but not held by the new master: each one is an admission the
// limit will allow again, an excess admission once the limit is reached),
// which it returns: summed per user, so that entries of failed calls do not
// hide them.
func failoverFigures(t *testing.T, f failover, out []outcome, stored func(user string) int) (lost int) {
	t.Helper()
	start, newMaster, what := f.start, f.newMaster, f.what
	tl := count(out)
	if tl.noscript != 0 {
		t.Errorf("%d NOSCRIPT errors reached callers, want 0", tl.noscript)
	}
	back := time.Duration(0)
	if tl.errs > 0 {
		if tl.firstErrEnd.Before(start) { // a call in flight when it started may fail
			t.Errorf("a call failed at %v, before the failover started at %v: %v", tl.firstErrEnd, start, tl.sample)
		}
		back = max(0, tl.lastErr.Sub(newMaster))
		if back > 2*time.Second {
			t.Errorf("last error %v after the new master answered, want within 2s", back)
		}
	}
	admitted, held := 0, 0
	for u, a := range tl.admitted {
		admitted += a
		h := stored(u)
		held += h
		lost += max(0, a-h)
	}
	t.Logf("%s: %d decisions, %d admitted; %d errors (first %v after the failover started; service back %v after the new master answered); the new master holds %d entries: %d admissions lost to asynchronous replication (excess admissions they allow: %d)",
		what, tl.total, admitted, tl.errs, max(0, tl.firstErr.Sub(start)).Round(time.Millisecond), back.Round(time.Millisecond),
		held, admitted-held, max(0, admitted-held))
	return lost
}

// failoverLimit is high enough that nothing is denied during a failover
// test, so that every admission must be held by the new master.
const failoverLimit = 1_000_000

// TestFaultClusterFailover promotes a replica with CLUSTER FAILOVER while
// goroutines decide a per-user policy spread over every master.
func TestFaultClusterFailover(t *testing.T) {
	clusterFailover(t, false, false)
}

// TestFaultClusterTakeover promotes a replica with CLUSTER FAILOVER
// TAKEOVER, which does not wait for its master, while goroutines decide:
// the old master answers writes until it learns of the promotion, and what
// it answered is lost: reported, not failed on.
func TestFaultClusterTakeover(t *testing.T) {
	clusterFailover(t, true, false)
}

// TestFaultClusterTakeoverWaitForReplicas is the takeover with
// WaitForReplicas: no admission a caller saw is lost.
func TestFaultClusterTakeoverWaitForReplicas(t *testing.T) {
	clusterFailover(t, true, true)
}

// clusterFailover promotes the replica of the master of user u0's window,
// with TAKEOVER or not, while 16 goroutines decide for 30 users, on a store
// with WaitForReplicas or not, and reports what it cost.
func clusterFailover(t *testing.T, takeover, wait bool) {
	c := sharedCluster(t)
	prefix := newPrefix()
	s, err := redisstore.New(redisstore.Config{Mode: redisstore.Cluster, Addrs: c.Addrs(), Prefix: prefix, WaitForReplicas: wait})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	lim := sluice.NewLimiter(s, sluice.Config{Timeout: time.Second, Breaker: sluice.Breaker{Failures: -1}})
	p := perUserPolicy(failoverLimit)
	ks := s.Keys(request(t, p, map[string]string{"user": "u0"}, 1))
	_, replica, err := c.MasterOf(ks[0])
	if err != nil {
		t.Fatal(err)
	}
	what, option := "CLUSTER FAILOVER under load", []string(nil)
	if takeover {
		what, option = "CLUSTER FAILOVER TAKEOVER under load", []string{"TAKEOVER"}
	}
	if wait {
		what += ", WaitForReplicas"
	}
	var start, newMaster time.Time
	out := loadFor(lim, p, 30, 16, 500*time.Millisecond, 2500*time.Millisecond, func() {
		start = time.Now()
		if newMaster, err = c.Failover(replica, option...); err != nil {
			t.Error(err)
		}
	})
	rc := clusterClient(t, c)
	lost := failoverFigures(t, failover{what: what, start: start, newMaster: newMaster}, out, func(u string) int {
		ks := s.Keys(request(t, p, map[string]string{"user": u}, 1))
		return units(entries(t, rc, ks[0]))
	})
	if wait && lost > 0 {
		t.Errorf("WaitForReplicas: %d admissions the callers saw are not on the new masters, want 0", lost)
	}
	checkStored(t, c.Nodes(), prefix, failoverLimit)
}

// TestClusterFailoverLearnsFromFirstMoved: after a CLUSTER FAILOVER, the
// store's first call to a slot of the new master gets MOVED from the old
// one, and no other call does: that reply makes the store read the slot map
// again, from the node that redirected, and send the command, which did not
// run, to the new master. (The Cluster client alone follows each MOVED to a
// master it already knew as a replica without taking it as the slot's
// master, and reads the slots again only after a random delay of up to a
// second: every call until then cost a MOVED round trip first.)
func TestClusterFailoverLearnsFromFirstMoved(t *testing.T) {
	c := sharedCluster(t)
	s, err := redisstore.New(redisstore.Config{Mode: redisstore.Cluster, Addrs: c.Addrs(), Prefix: newPrefix()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	lim := sluice.NewLimiter(s, sluice.Config{Timeout: time.Second, Breaker: sluice.Breaker{Failures: -1}})
	p := perUserPolicy(failoverLimit)
	attrs := map[string]string{"user": "u0"}
	master, replica, err := c.MasterOf(s.Keys(request(t, p, attrs, 1))[0])
	if err != nil {
		t.Fatal(err)
	}
	allow := func(n int) {
		t.Helper()
		for range n {
			if d, err := lim.Allow(context.Background(), p, attrs); err != nil || !d.Allowed {
				t.Fatalf("decision on %s's key: %+v, %v; want admitted", master.Addr(), d, err)
			}
		}
	}
	allow(1)
	before := errorCount(t, master, "MOVED")
	at := time.Now()
	if _, err := c.Failover(replica); err != nil {
		t.Fatal(err)
	}
	const calls = 50
	allow(calls)
	moved := errorCount(t, master, "MOVED") - before
	t.Logf("CLUSTER FAILOVER of %s (%v): %d decisions after it, %d MOVED from the old master", master.Addr(), time.Since(at).Round(time.Millisecond), calls, moved)
	// None when the store's own poll of the slots (every second) read the
	// new map before the first call.
	if moved > 1 {
		t.Errorf("%d MOVED replies from the old master to %d calls, want at most 1", moved, calls)
	}
}

// TestClusterBatchAfterFailover sends a batch of several slots of one
// master, by a slot map read before a CLUSTER FAILOVER of that master: the
// old master, now a replica, refuses the whole call (READONLY: decide.lua's
// function may write, so it is refused before it runs, where a call that
// declares its keys gets MOVED), once; the store reads the map again from
// it and sends the batch to the new master, and every decision counts
// once.
func TestClusterBatchAfterFailover(t *testing.T) {
	c := sharedCluster(t)
	rc := clusterClient(t, c)
	s := openCluster(t, redisstore.Config{Prefix: newPrefix()}) // for its key names
	p := &sluice.Policy{Name: "batchover", Rules: []sluice.Rule{{Name: "user", Limit: 5, Window: time.Hour, By: []string{"user"}}}}
	var master, replica *redistest.Server
	var keys [][]string
	var reqs []*store.Request
	slots := map[uint16]bool{}
	for u := 0; len(reqs) < 8; u++ {
		req := request(t, p, map[string]string{"user": fmt.Sprintf("u%d", u)}, 1)
		k := s.Keys(req)
		m, r, err := c.MasterOf(k[0])
		if err != nil {
			t.Fatal(err)
		}
		if master == nil {
			master, replica = m, r
		}
		if m.Addr() == master.Addr() {
			keys, reqs = append(keys, k), append(reqs, req)
			slots[redisstore.KeySlot(k[0])] = true
		}
	}
	if len(slots) < 2 {
		t.Fatalf("8 users in %d slot(s), want several", len(slots))
	}
	decide, stop := redisstore.FrozenSlotsBatch(rc)
	defer stop()
	round := func(n int64) {
		t.Helper()
		for i, err := range decide(keys, reqs, time.Now().UnixMicro()) {
			if err != nil {
				t.Fatalf("round %d, user %d: %v", n, i, err)
			}
			if r := reqs[i].Results[0]; !r.Fits || r.Used != n {
				t.Fatalf("round %d, user %d: %+v, want fits with used %d", n, i, r, n)
			}
		}
	}
	round(1)
	before := errorCount(t, master, "READONLY")
	if _, err := c.Failover(replica); err != nil {
		t.Fatal(err)
	}
	round(2)
	round(3)
	if refused := errorCount(t, master, "READONLY") - before; refused != 1 {
		t.Errorf("the old master refused %d batches (READONLY), want 1: the first, after which the map is read again", refused)
	}
}

// errorCount returns how many error replies of kind (their first word)
// server s has sent since it started (INFO errorstats).
func errorCount(t *testing.T, s *redistest.Server, kind string) int64 {
	t.Helper()
	info, err := s.Do("INFO", "errorstats")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(info) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "errorstat_"+kind+":count="); ok {
			n, err := strconv.ParseInt(rest, 10, 64)
			if err != nil {
				t.Fatalf("INFO errorstats: %q", line)
			}
			return n
		}
	}
	return 0
}

// TestClusterWaitForReplicas freezes the replica of one master of a
// Cluster under a store with WaitForReplicas: the keys of that master are
// refused (ErrNotReplicated) and the others' admitted, each call waiting
// for its own master's replica; once the replica answers again, every key
// is admitted.
func TestClusterWaitForReplicas(t *testing.T) {
	c := sharedCluster(t)
	s, err := redisstore.New(redisstore.Config{Mode: redisstore.Cluster, Addrs: c.Addrs(), Prefix: newPrefix(), WaitForReplicas: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	lim := sluice.NewLimiter(s, sluice.Config{Timeout: time.Second, Breaker: sluice.Breaker{Failures: -1}}) // WAIT gets half
	p := perUserPolicy(1_000_000)
	masterOf := map[string]string{}
	var frozen *redistest.Server
	for i := range 30 {
		u := fmt.Sprintf("u%d", i)
		m, r, err := c.MasterOf(s.Keys(request(t, p, map[string]string{"user": u}, 1))[0])
		if err != nil {
			t.Fatal(err)
		}
		if masterOf[u] = m.Addr(); frozen == nil {
			frozen = r
		}
	}
	allow := func(u string) (sluice.Decision, error) {
		return lim.Allow(context.Background(), p, map[string]string{"user": u})
	}
	for u := range masterOf {
		if d, err := allow(u); err != nil || !d.Allowed {
			t.Fatalf("%s with every replica up: %+v, %v; want admitted", u, d, err)
		}
	}
	if err := frozen.Pause(); err != nil {
		t.Fatal(err)
	}
	refused, admitted := 0, 0
	for u, m := range masterOf {
		d, err := allow(u)
		switch onFrozen := m == masterOf["u0"]; {
		case onFrozen && errors.Is(err, redisstore.ErrNotReplicated):
			refused++
		case !onFrozen && err == nil && d.Allowed:
			admitted++
		default:
			t.Errorf("%s (on the frozen replica's master: %v): %+v, %v", u, onFrozen, d, err)
		}
	}
	if err := frozen.Resume(); err != nil {
		t.Fatal(err)
	}
	t.Logf("the replica of %s frozen: %d calls refused, %d of the other masters' admitted", masterOf["u0"], refused, admitted)
	for deadline := time.Now().Add(5 * time.Second); ; {
		d, err := allow("u0")
		if err == nil && d.Allowed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("5 s after the replica answered again: %+v, %v; want admitted", d, err)
		}
	}
}

// TestFaultSentinelFailover fails the master over with SENTINEL FAILOVER
// while goroutines decide. The old master answers writes until the clients
// learn of the promotion, and what it answered is lost: reported, not
// failed on.
func TestFaultSentinelFailover(t *testing.T) {
	sentinelFailover(t, false)
}

// TestFaultSentinelFailoverWaitForReplicas is the failover with
// WaitForReplicas: no admission a caller saw is lost, and the new master
// serves within 2 s of answering.
func TestFaultSentinelFailoverWaitForReplicas(t *testing.T) {
	sentinelFailover(t, true)
}

// TestFaultSentinelFailoverWaitForReplicas2 is the same with two replicas:
// the old master keeps the one not promoted and waits for both, so it
// refuses until the client learns the new master from the sentinels (which
// publish +switch-master only once they have moved that replica, but name
// the new master when asked before); no admission a caller saw is lost.
func TestFaultSentinelFailoverWaitForReplicas2(t *testing.T) {
	sentinelFailover(t, true, redistest.SentinelOptions{Replicas: 2})
}

// sentinelFailover runs a SENTINEL FAILOVER under load on a Sentinel setup
// of opts (one replica when none), with or without WaitForReplicas.
func sentinelFailover(t *testing.T, wait bool, opts ...redistest.SentinelOptions) {
	var o redistest.SentinelOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	st := redistest.StartSentinelWith(t, o)
	prefix := newPrefix()
	s, err := redisstore.New(redisstore.Config{Mode: redisstore.Sentinel, Addrs: st.Addrs(),
		MasterName: redistest.SentinelMaster, Prefix: prefix, WaitForReplicas: wait})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	lim := sluice.NewLimiter(s, sluice.Config{Timeout: time.Second, Breaker: sluice.Breaker{Failures: -1}})
	p := perUserPolicy(failoverLimit)
	var (
		start, newMaster time.Time
		next             *redistest.Server
	)
	out := loadFor(lim, p, 30, 16, 500*time.Millisecond, 2500*time.Millisecond, func() {
		start = time.Now()
		if next, newMaster, err = st.Failover(); err != nil {
			t.Error(err)
		}
	})
	if next == nil {
		t.Fatal("no new master")
	}
	what := "SENTINEL FAILOVER under load"
	if wait {
		what += ", WaitForReplicas"
	}
	rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{next.Addr()}, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	lost := failoverFigures(t, failover{what: what, start: start, newMaster: newMaster}, out, func(u string) int {
		// An entry holds the units recorded at one instant: the requests
		// of one batch share it.
		ks := s.Keys(request(t, p, map[string]string{"user": u}, 1))
		return units(entries(t, rc, ks[0]))
	})
	if wait && lost > 0 {
		t.Errorf("WaitForReplicas: %d admissions the callers saw are not on the new master, want 0", lost)
	}
	checkStored(t, []*redistest.Server{next}, prefix, failoverLimit)
}

// percentile returns the q-th quantile of ds.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(q*float64(len(ds))))]
}

// TestFaultFrozen freezes Redis with SIGSTOP under load: every decision
// returns within the deadline (50 ms) + 5 ms, denied under Deny and allowed
// under Allow, the number of goroutines stays bounded, the circuit breaker
// then answers without waiting, and after SIGCONT service resumes.
func TestFaultFrozen(t *testing.T) {
	prefix := newPrefix()
	srv, s := openOwn(t, redisstore.Config{Prefix: prefix})
	p := perUserPolicy(1_000_000)
	const goroutines = 8
	// Warm up the connection and the script.
	if _, err := sluice.NewLimiter(s, sluice.Config{Timeout: 5 * time.Second}).Allow(context.Background(), p, map[string]string{"user": "u0"}); err != nil {
		t.Fatal(err)
	}
	base := runtime.NumGoroutine()

	thaw := freeze(t, srv)
	// With the default circuit breaker first (the number of goroutines is
	// bounded: after 5 failures no call reaches the client), then without
	// it, so that every call waits for its deadline.
	for _, tc := range []struct {
		name    string
		onError sluice.OnError
		breaker sluice.Breaker
	}{
		{"deny", sluice.Deny, sluice.Breaker{}},
		{"allow", sluice.Allow, sluice.Breaker{}},
		{"deny, no breaker", sluice.Deny, sluice.Breaker{Failures: -1}},
		{"allow, no breaker", sluice.Allow, sluice.Breaker{Failures: -1}},
	} {
		lim := sluice.NewLimiter(s, sluice.Config{OnError: tc.onError, Breaker: tc.breaker})
		stop := make(chan struct{})
		done := make(chan []outcome)
		before := runtime.NumGoroutine()
		go func() { done <- runLoad(lim, p, 50, goroutines, stop) }()
		// The control: how late a bare 50 ms timer fires on this machine
		// meanwhile, so that a loaded machine's scheduling delays are not
		// counted against the store.
		maxG := 0
		var control []time.Duration
		for range 12 {
			start := time.Now()
			time.Sleep(sluice.DefaultTimeout)
			control = append(control, time.Since(start))
			maxG = max(maxG, runtime.NumGoroutine())
		}
		close(stop)
		out := <-done
		slack := max(0, percentile(control, 0.99)-sluice.DefaultTimeout)
		var lat []time.Duration
		wrong, open := 0, 0
		for _, o := range out {
			lat = append(lat, o.latency)
			if o.err == nil || !o.d.Degraded || o.d.Allowed != (tc.onError == sluice.Allow) {
				wrong++
			}
			if errors.Is(o.err, sluice.ErrCircuitOpen) {
				open++
			}
		}
		p99, worst := percentile(lat, 0.99), percentile(lat, 1)
		// 50 ms of margin: the control is 12 sleeps, and under the race
		// detector on a loaded machine calls were 1.4 ms past a 5 ms and
		// 8 ms past a 10 ms margin; a call that waited on the frozen
		// server would be seconds.
		if want := sluice.DefaultTimeout + 50*time.Millisecond + slack; p99 > want {
			t.Errorf("%s: p99 latency %v, want at most %v (50ms + 50ms + %v by which a bare timer was late)", tc.name, p99, want, slack)
		}
		if wrong != 0 {
			t.Errorf("%s: %d of %d decisions were not degraded %s decisions with an error", tc.name, wrong, len(out), tc.name)
		}
		// Each call that timed out leaves the client a goroutine waiting
		// for its reply; with the breaker, only the calls in flight when it
		// opens (and the probes) do.
		if bound := before + 2*goroutines + 8; tc.breaker.Failures == 0 && maxG > bound {
			t.Errorf("%s: goroutines peaked at %d (%d before), want at most %d", tc.name, maxG, before, bound)
		}
		t.Logf("SIGSTOP, on error %s: %d decisions (%d by the open circuit), p50 %v, p99 %v, max %v (deadline 50ms; a bare 50ms timer's p99 lateness %v); all degraded and %s; goroutines peaked at %d (%d before, %d deciders)",
			tc.name, len(out), open, percentile(lat, 0.5).Round(100*time.Microsecond), p99.Round(100*time.Microsecond), worst.Round(100*time.Microsecond), slack.Round(100*time.Microsecond),
			map[bool]string{true: "allowed", false: "denied"}[tc.onError == sluice.Allow], maxG, before, goroutines)
	}

	// With the breaker: after 5 failures the answer comes without waiting.
	lim := sluice.NewLimiter(s, sluice.Config{Breaker: sluice.Breaker{CoolDown: 200 * time.Millisecond}})
	for range 5 {
		lim.Allow(context.Background(), p, map[string]string{"user": "u1"})
	}
	var fast []time.Duration
	for range 1000 {
		start := time.Now()
		_, err := lim.Allow(context.Background(), p, map[string]string{"user": "u1"})
		fast = append(fast, time.Since(start))
		if !errors.Is(err, sluice.ErrCircuitOpen) {
			break
		}
	}
	if p99 := percentile(fast, 0.99); p99 > time.Millisecond {
		t.Errorf("open circuit: p99 latency %v, want under 1ms", p99)
	}

	thaw()
	resumed := time.Now()
	var back time.Duration
	for {
		d, err := lim.Allow(context.Background(), p, map[string]string{"user": "u2"})
		if err == nil && d.Allowed && !d.Degraded {
			back = time.Since(resumed)
			break
		}
		if time.Since(resumed) > 5*time.Second {
			t.Fatalf("no decision from Redis 5s after SIGCONT: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	keys := checkStored(t, []*redistest.Server{srv}, prefix, 1_000_000)
	t.Logf("SIGSTOP: goroutines %d before freezing; open circuit answered %d calls with p99 %v; after SIGCONT Redis decided again after %v; %d keys, all with TTL",
		base, len(fast), percentile(fast, 0.99), back.Round(time.Millisecond), keys)
}

// TestWaitForReplicasReplicaDown freezes the replica of a Sentinel master:
// with WaitForReplicas a decision fails with ErrNotReplicated, denied by the
// failure policy, and admits again once the replica answers.
func TestWaitForReplicasReplicaDown(t *testing.T) {
	st := redistest.StartSentinel(t)
	s, err := redisstore.New(redisstore.Config{Mode: redisstore.Sentinel, Addrs: st.Addrs(),
		MasterName: redistest.SentinelMaster, Prefix: newPrefix(), WaitForReplicas: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	lim := sluice.NewLimiter(s, sluice.Config{Timeout: 200 * time.Millisecond, Breaker: sluice.Breaker{Failures: -1}})
	p := perUserPolicy(10)
	attrs := map[string]string{"user": "u"}
	allow := func() (sluice.Decision, error) { return lim.Allow(context.Background(), p, attrs) }
	if d, err := allow(); err != nil || !d.Allowed {
		t.Fatalf("with the replica up: %+v, %v; want admitted", d, err)
	}
	replica := st.Replica()
	if err := replica.Pause(); err != nil {
		t.Fatal(err)
	}
	d, err := allow()
	if rerr := replica.Resume(); rerr != nil {
		t.Fatal(rerr)
	}
	if !errors.Is(err, redisstore.ErrNotReplicated) || d.Allowed || !d.Degraded {
		t.Fatalf("with the replica frozen: %+v, %v; want denied by the failure policy with ErrNotReplicated", d, err)
	}
	t.Logf("with the replica frozen: %v", err)
	if d, err := allow(); err != nil || !d.Allowed {
		t.Fatalf("with the replica back: %+v, %v; want admitted", d, err)
	}
}

// TestClusterBreakerPerMaster freezes one master of a 3-master Cluster for
// a second while 16 goroutines decide for 300 users with the default circuit
// breaker: the circuit opens for the decisions that need the frozen master,
// and the others are decided as before, none by an open circuit. With one
// breaker for the whole store (before store.Sharded), three runs of this
// test: once the frozen master's calls timed out five in a row and the one
// circuit opened, degrading 99.7% of the other masters' decisions; twice
// the answers of the others kept resetting the count, the circuit never
// opened, and the 16 goroutines, all soon waiting out the frozen master's
// timeouts, made 95 decisions in the second.
//
// The notifier's caps, global and per category, lie on different masters
// (a Cluster's store gives each rule its hash tag): a category's request
// has a circuit for the masters it needs. The frozen master keeps some
// categories' windows and not the global cap's, which every request needs;
// with a breaker for the first check's master (the global cap's), the
// frozen master's failures opened the circuit of every category.
//
// Calls may take 500 ms, so that an answering master on a loaded machine
// does not time out five times in a row and open its own circuit, as a
// master that slow should. The freeze, with the calls in flight at its end,
// is shorter than the Cluster's node timeout (2 s): past it, the other
// masters answer CLUSTERDOWN until a replica is promoted, a failure of the
// whole store.
func TestClusterBreakerPerMaster(t *testing.T) {
	c := redistest.StartCluster(t)
	t.Run("one rule", func(t *testing.T) {
		breakerPerMaster(t, c, perUserPolicy(1<<30))
	})
	t.Run("global and per-category caps", func(t *testing.T) {
		breakerPerMaster(t, c, &sluice.Policy{Name: "notify", Rules: []sluice.Rule{
			{Name: "global", Limit: 1 << 30, Window: time.Hour},
			{Name: "category", Limit: 1 << 30, Window: time.Hour, By: []string{"user"}},
		}})
	})
}

// breakerPerMaster runs TestClusterBreakerPerMaster's load for p on c. It
// freezes the first master that does not keep the first key of user u0,
// which for the notifier's caps is the global cap's.
func breakerPerMaster(t *testing.T, c *redistest.Cluster, p *sluice.Policy) {
	s, err := redisstore.New(redisstore.Config{Mode: redisstore.Cluster, Addrs: c.Addrs(), Prefix: newPrefix()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	lim := sluice.NewLimiter(s, sluice.Config{Timeout: 500 * time.Millisecond})
	masterOf := func(key string) *redistest.Server {
		m, _, err := c.MasterOf(key)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	first := masterOf(s.Keys(request(t, p, map[string]string{"user": "u0"}, 1))[0])
	frozen := c.Masters()[slices.IndexFunc(c.Masters(), func(m *redistest.Server) bool { return m.Addr() != first.Addr() })]
	onFrozen := map[string]bool{}
	shards := map[string]bool{}
	for i := range 300 {
		u := fmt.Sprintf("u%d", i)
		req := request(t, p, map[string]string{"user": u}, 1)
		for _, k := range s.Keys(req) {
			onFrozen[u] = onFrozen[u] || masterOf(k).Addr() == frozen.Addr()
		}
		shards[s.Shard(req)] = true
	}
	if len(shards) != 3 || shards[""] {
		t.Fatalf("the users' windows are on shards %v; want 3, by the masters' IDs", slices.Collect(maps.Keys(shards)))
	}
	if err := frozen.Pause(); err != nil {
		t.Fatal(err)
	}
	out := loadFor(lim, p, 300, 16, 0, time.Second, func() {})
	if err := frozen.Resume(); err != nil {
		t.Fatal(err)
	}
	var others, othersDegraded, othersOpen, mine, mineOpen int
	for _, o := range out {
		if onFrozen[o.user] {
			mine++
			if errors.Is(o.err, sluice.ErrCircuitOpen) {
				mineOpen++
			}
			continue
		}
		others++
		if o.d.Degraded {
			othersDegraded++
		}
		if errors.Is(o.err, sluice.ErrCircuitOpen) {
			othersOpen++
		}
	}
	t.Logf("decisions that need the frozen master: %d, %d by its open circuit; the others: %d, %d degraded", mine, mineOpen, others, othersDegraded)
	if othersOpen > 0 {
		t.Errorf("%d decisions that need only answering masters were degraded by an open circuit; want none", othersOpen)
	}
	if mineOpen == 0 {
		t.Error("the frozen master's circuit never opened")
	}
	// A degraded decision of another master's key is one whose call timed
	// out on this loaded machine: a handful, not the 99.6% of one breaker.
	if othersDegraded*100 > others {
		t.Errorf("%d of %d decisions that need only answering masters degraded; want under 1%%", othersDegraded, others)
	}
}

// TestWaitForReplicasGrace stops the master's one replica for good with
// ReplicaGrace 600 ms: calls are refused while the grace runs, then
// admitted again, waiting for no replica.
func TestWaitForReplicasGrace(t *testing.T) {
	const grace = 600 * time.Millisecond
	st := redistest.StartSentinel(t)
	s, err := redisstore.New(redisstore.Config{Mode: redisstore.Sentinel, Addrs: st.Addrs(),
		MasterName: redistest.SentinelMaster, Prefix: newPrefix(), WaitForReplicas: true, ReplicaGrace: grace})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// A call may take a second: WAIT gets half of it, and under make test's
	// parallel packages 200 ms left the script call after a 100 ms WAIT
	// too little time once (context deadline exceeded, neither a refusal
	// nor an admission).
	lim := sluice.NewLimiter(s, sluice.Config{Timeout: time.Second, Breaker: sluice.Breaker{Failures: -1}})
	p := perUserPolicy(1_000_000)
	attrs := map[string]string{"user": "u"}
	if d, err := lim.Allow(context.Background(), p, attrs); err != nil || !d.Allowed {
		t.Fatalf("with the replica up: %+v, %v; want admitted", d, err)
	}
	if err := st.Replica().Stop(); err != nil {
		t.Fatal(err)
	}
	var firstRefusal time.Time
	refusals := 0
	for deadline := time.Now().Add(5 * time.Second); ; {
		start := time.Now()
		d, err := lim.Allow(context.Background(), p, attrs)
		switch {
		case errors.Is(err, redisstore.ErrNotReplicated):
			// From the call's start: a call that waited out its WAIT
			// started before the poll that found the replica missing.
			if refusals++; firstRefusal.IsZero() {
				firstRefusal = start
			}
		case err != nil || !d.Allowed:
			t.Fatalf("with the replica gone: %+v, %v; want a refusal or an admission", d, err)
		case refusals > 0:
			waited := start.Sub(firstRefusal)
			t.Logf("%d calls refused over %v, then admitted without the replica", refusals, waited)
			// The grace runs from the poll that found the replica missing;
			// the first refused call starts at the latest just after it.
			if waited < grace-200*time.Millisecond {
				t.Errorf("admitted %v after the first refusal; the grace is %v", waited, grace)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d refusals and no admission 5 s after the replica left; want admissions after the grace of %v", refusals, grace)
		}
	}
}
