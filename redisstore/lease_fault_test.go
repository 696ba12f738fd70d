package redisstore_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/redistest"
	"github.com/sluicerate/sluice/redisstore"
)

// Fault tests of leases: the script cache and the function library are
// flushed, the server restarted, frozen and failed over while leases are
// held, and each test checks what a lease's holder may rely on.

// leaseFaultN is the concurrency of leaseFaultPolicy.
const leaseFaultN = 4

// leaseFaultPolicy admits leaseFaultN leases of a user at once, for a
// minute (no lease expires during a test), and records each acquire's
// estimate in a rate rule that Settle rewrites.
func leaseFaultPolicy() *sluice.Policy {
	return &sluice.Policy{Name: "lfault", Rules: []sluice.Rule{
		{Name: "tokens", By: []string{"user"}, Limit: 1 << 40, Window: time.Hour},
		{Name: "in-flight", By: []string{"user"}, Concurrency: leaseFaultN, Lease: time.Minute},
	}}
}

// tokenOf returns the token the store keeps lease x under (docs/leases.md).
func tokenOf(x *sluice.Lease) string {
	sum := sha256.Sum256([]byte(x.ID()))
	return hex.EncodeToString(sum[:16])
}

// aliveTokens returns the tokens of user's leases alive in p's concurrency
// rule, as the store inspects them.
func aliveTokens(t *testing.T, s *redisstore.Store, p *sluice.Policy, user string) []string {
	t.Helper()
	ws, _, err := s.Inspect(context.Background(), request(t, p, map[string]string{"user": user}, 1))
	if err != nil {
		t.Fatalf("inspecting %s's leases: %v", user, err)
	}
	var out []string
	for _, w := range ws {
		if w.Rule == "in-flight" {
			for _, l := range w.Leases {
				out = append(out, l.Token)
			}
		}
	}
	slices.Sort(out)
	return out
}

// tokens returns the sorted tokens of xs.
func tokens(xs []*sluice.Lease) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = tokenOf(x)
	}
	slices.Sort(out)
	return out
}

// leaseWorker drives one user's leases from one goroutine, so that it knows
// exactly how many are alive (none expires within a test): an acquire must
// be granted while fewer than leaseFaultN are held, and denied by the
// concurrency rule once they all are.
type leaseWorker struct {
	user string
	held []*sluice.Lease
	ops  int
	errs []error
}

// step makes the worker's i-th move: acquire when it holds fewer than all,
// else release, settle or extend one of its leases, then release or settle
// it. It records what went against the model.
func (w *leaseWorker) step(ctx context.Context, lim *sluice.Limiter, p *sluice.Policy, i int) {
	w.ops++
	fail := func(format string, args ...any) {
		w.errs = append(w.errs, fmt.Errorf("%s, op %d (%d held): %s", w.user, i, len(w.held), fmt.Sprintf(format, args...)))
	}
	if i%3 != 2 || len(w.held) == 0 {
		x, d, err := lim.Acquire(ctx, p, map[string]string{"user": w.user}, 10)
		switch {
		case err != nil:
			fail("acquire: %v", err)
		case len(w.held) < leaseFaultN && (!d.Allowed || x.ID() == ""):
			fail("acquire denied (%+v), want granted", d)
		case len(w.held) == leaseFaultN && (d.Allowed || d.Cause != sluice.CauseConcurrency):
			fail("acquire %+v, want denied by the concurrency rule", d)
		case d.Allowed:
			w.held = append(w.held, x)
		}
		return
	}
	x := w.held[0]
	var (
		held bool
		err  error
		what string
	)
	switch i % 9 {
	case 2:
		what = "extend"
		if held, err = x.Extend(ctx); err == nil && held {
			return // still held
		}
	case 5:
		what = "settle"
		held, err = x.Settle(ctx, 3)
	default:
		what = "release"
		held, err = x.Release(ctx)
	}
	if err != nil || !held {
		fail("%s: held %v, %v; want held", what, held, err)
	}
	w.held = w.held[1:]
}

// TestFaultLeaseFlush flushes the script cache and the function library,
// five times each, while 6 goroutines acquire, extend, settle and release
// leases of 6 users with 4 slots each: the store reloads what was flushed,
// so that no call fails, every acquire is granted exactly while fewer than
// 4 leases of its user are held, every held lease is found held by its
// release, settle or extend, and afterwards the store holds exactly the
// leases the goroutines hold. With functions (FCALL, Redis 7) and with
// scripts (EVALSHA).
func TestFaultLeaseFlush(t *testing.T) {
	for _, scripts := range []bool{false, true} {
		t.Run(map[bool]string{false: "functions", true: "scripts"}[scripts], func(t *testing.T) {
			srv, s := openOwn(t, redisstore.Config{Prefix: newPrefix()})
			if scripts {
				redisstore.UseScripts(s)
			}
			lim := sluice.NewLimiter(s, sluice.Config{Timeout: 5 * time.Second, Breaker: sluice.Breaker{Failures: -1}})
			p := leaseFaultPolicy()
			const users = 6
			workers := make([]*leaseWorker, users)
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for g := range users {
				w := &leaseWorker{user: fmt.Sprintf("u%d", g)}
				workers[g] = w
				wg.Go(func() {
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						w.step(context.Background(), lim, p, i)
					}
				})
			}
			time.Sleep(100 * time.Millisecond)
			for i := range 10 {
				cmd := []string{"SCRIPT", "FLUSH"}
				if i%2 == 1 {
					cmd = []string{"FUNCTION", "FLUSH"}
				}
				if _, err := srv.Do(cmd...); err != nil {
					t.Fatal(err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			time.Sleep(100 * time.Millisecond)
			close(stop)
			wg.Wait()
			ops, held := 0, 0
			for _, w := range workers {
				ops += w.ops
				held += len(w.held)
				for _, e := range w.errs[:min(3, len(w.errs))] {
					t.Error(e)
				}
				if len(w.errs) > 3 {
					t.Errorf("%s: %d more", w.user, len(w.errs)-3)
				}
				if got, want := aliveTokens(t, s, p, w.user), tokens(w.held); !slices.Equal(got, want) {
					t.Errorf("%s: the store holds leases %v, the holder %v", w.user, got, want)
				}
			}
			// The flushes were met: the server refused calls of what it
			// no longer had, which the store loaded again.
			kind := map[bool]string{false: "ERR", true: "NOSCRIPT"}[scripts] // ERR Function not found
			refused := errorCount(t, srv, kind)
			if refused == 0 {
				t.Errorf("the server refused no call with %s: the flushes met no lease call", kind)
			}
			if ops < 100 {
				t.Errorf("%d lease calls in all, want enough to meet the flushes (100 or more)", ops)
			}
			t.Logf("SCRIPT FLUSH and FUNCTION FLUSH x5 each: %d lease calls of %d users (%d refused by the server with %s and sent again), none failed, each granted or denied as its user's held leases say; the store holds exactly the %d leases held",
				ops, users, refused, kind, held)
		})
	}
}

// acquireUntil acquires a lease of user until a call returns without error
// (the server is back), for at most 5 s, and returns that call's answer.
func acquireUntil(t *testing.T, lim *sluice.Limiter, p *sluice.Policy, user string) (*sluice.Lease, sluice.Decision, time.Duration) {
	t.Helper()
	start := time.Now()
	for {
		x, d, err := lim.Acquire(context.Background(), p, map[string]string{"user": user}, 10)
		if err == nil {
			return x, d, time.Since(start)
		}
		if time.Since(start) > 5*time.Second {
			t.Fatalf("acquire of %s still failing 5 s after the server came back: %v", user, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// acquireN acquires n leases of user and fails the test unless each is
// granted.
func acquireN(t *testing.T, lim *sluice.Limiter, p *sluice.Policy, user string, n int) []*sluice.Lease {
	t.Helper()
	var xs []*sluice.Lease
	for i := range n {
		x, d, err := lim.Acquire(context.Background(), p, map[string]string{"user": user}, 10)
		if err != nil || !d.Allowed || x.ID() == "" {
			t.Fatalf("acquire %d of %s: %+v, %v; want granted", i, user, d, err)
		}
		xs = append(xs, x)
	}
	return xs
}

// wantDenied acquires a lease of user and fails the test unless the
// concurrency rule denies it.
func wantDenied(t *testing.T, lim *sluice.Limiter, p *sluice.Policy, user, when string) {
	t.Helper()
	x, d, err := lim.Acquire(context.Background(), p, map[string]string{"user": user}, 10)
	if err != nil || d.Allowed || d.Cause != sluice.CauseConcurrency || x != nil {
		t.Fatalf("%s: acquire of %s: %+v, lease %v, %v; want denied by the concurrency rule", when, user, d, x, err)
	}
}

// TestFaultLeaseRestart restarts a Redis without persistence while 4
// leases of user ann fill her rule, and a goroutine acquires and releases
// leases of another user. While the server is down, an acquire fails with
// an error and, under OnError Deny, a degraded denial and no lease; under
// Allow, a degraded admission with a lease that holds nothing. Then the
// server, empty, grants ann 4 new leases (the restart forgot the first 4:
// by design, up to 8 of hers run at once until the first 4 end) and denies
// a fifth; the first 4 report themselves not held on release, settle and
// extend, without error, and free none of the new 4's slots.
func TestFaultLeaseRestart(t *testing.T) {
	srv, s := openOwn(t, redisstore.Config{Prefix: newPrefix()})
	lim := sluice.NewLimiter(s, sluice.Config{Timeout: time.Second, OnError: sluice.Deny, Breaker: sluice.Breaker{Failures: -1}})
	allow := sluice.NewLimiter(s, sluice.Config{Timeout: time.Second, OnError: sluice.Allow, Breaker: sluice.Breaker{Failures: -1}})
	p := leaseFaultPolicy()
	ctx := context.Background()
	old := acquireN(t, lim, p, "ann", leaseFaultN)
	wantDenied(t, lim, p, "ann", "before the restart")

	// While the server restarts, a goroutine acquires (alternately under
	// Deny and under Allow) and releases what it is granted.
	var (
		mu                       sync.Mutex
		calls, failed, wrongFail int
		sample                   string
	)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			l, onAllow := lim, i%2 == 1
			if onAllow {
				l = allow
			}
			x, d, err := l.Acquire(ctx, p, map[string]string{"user": "probe"}, 1)
			mu.Lock()
			calls++
			if err != nil {
				failed++
				// Deny: a degraded denial and no lease. Allow: a degraded
				// admission whose lease holds nothing.
				ok := d.Degraded && d.Allowed == onAllow && (onAllow && x != nil && x.ID() == "" || !onAllow && x == nil)
				if !ok {
					wrongFail++
					sample = fmt.Sprintf("on error allow %v: %+v, lease %v, %v", onAllow, d, x, err)
				}
			}
			mu.Unlock()
			if err == nil && d.Allowed {
				x.Release(ctx) // may fail while the server is down: it then expires
			}
		}
	}()
	time.Sleep(50 * time.Millisecond)
	down := time.Now()
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	up := time.Now()
	time.Sleep(50 * time.Millisecond)
	close(stop)
	<-done
	if wrongFail > 0 {
		t.Errorf("%d of %d failed acquires were not the failure policy's degraded answer; one: %s", wrongFail, failed, sample)
	}

	first, d, back := acquireUntil(t, lim, p, "ann")
	if !d.Allowed || first.ID() == "" {
		t.Fatalf("the first acquire of ann after the restart: %+v; want granted (the restart forgot her leases)", d)
	}
	fresh := append([]*sluice.Lease{first}, acquireN(t, lim, p, "ann", leaseFaultN-1)...)
	wantDenied(t, lim, p, "ann", "4 leases after the restart")
	for i, x := range old {
		var (
			held bool
			err  error
		)
		switch i % 3 {
		case 0:
			held, err = x.Release(ctx)
		case 1:
			held, err = x.Settle(ctx, 1)
		case 2:
			if held, err = x.Extend(ctx); err == nil && !held {
				held, err = x.Release(ctx)
			}
		}
		if held || err != nil {
			t.Errorf("ending lease %d taken before the restart: held %v, %v; want not held, no error", i, held, err)
		}
	}
	if got, want := aliveTokens(t, s, p, "ann"), tokens(fresh); !slices.Equal(got, want) {
		t.Errorf("after ending the leases from before the restart, the store holds %v, want the 4 after it %v", got, want)
	}
	wantDenied(t, lim, p, "ann", "after ending the leases from before the restart")
	for i, x := range fresh {
		if held, err := x.Release(ctx); !held || err != nil {
			t.Errorf("releasing lease %d taken after the restart: held %v, %v; want held", i, held, err)
		}
	}
	acquireN(t, lim, p, "ann", leaseFaultN)
	t.Logf("restart without persistence: down %v; %d acquires meanwhile, %d failed, each the failure policy's degraded answer (Deny: no lease; Allow: a lease holding nothing); service back %v after; 4 new leases granted, the 4 old ones not held and freeing nothing",
		up.Sub(down).Round(time.Millisecond), calls, failed, back.Round(time.Millisecond))
}

// TestFaultLeaseFrozen freezes Redis with SIGSTOP while ann holds 2 of her
// 4 leases, and 4 goroutines try to acquire more for 300 ms under the
// default 50 ms deadline and OnError Deny: each returns within the deadline
// (plus a bare timer's lateness) with an error and a degraded denial, and
// no lease; a release and an extend of a held lease fail with an error.
//
// What a timed-out call does is not undone by Redis: it was written to
// the connection before its deadline, and the server runs it when it
// wakes. A release that failed may so have freed its lease; an acquire
// that failed may take a slot that no caller holds, and the Limiter
// abandons it (docs/leases.md, "Under faults"). After SIGCONT, once every
// abandon was answered, the store must hold exactly the leases callers
// hold: the one granted and not ended, and the one whose release failed
// unless that release ran; every failed acquire's abandon answered, none
// given up; and it grants exactly the slots it counts free.
func TestFaultLeaseFrozen(t *testing.T) {
	srv, s := openOwn(t, redisstore.Config{Prefix: newPrefix()})
	lim := sluice.NewLimiter(s, sluice.Config{OnError: sluice.Deny, Breaker: sluice.Breaker{Failures: -1}})
	p := leaseFaultPolicy()
	ctx := context.Background()
	held := acquireN(t, lim, p, "ann", 2) // also loads the library and warms the connection

	thaw := freeze(t, srv)
	type try struct {
		latency time.Duration
		x       *sluice.Lease
		d       sluice.Decision
		err     error
	}
	var (
		mu    sync.Mutex
		tries []try
		wg    sync.WaitGroup
	)
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				x, d, err := lim.Acquire(ctx, p, map[string]string{"user": "ann"}, 10)
				mu.Lock()
				tries = append(tries, try{time.Since(start), x, d, err})
				mu.Unlock()
			}
		})
	}
	// The control: how late a bare 50 ms timer fires meanwhile.
	var control []time.Duration
	for range 6 {
		start := time.Now()
		time.Sleep(sluice.DefaultTimeout)
		control = append(control, time.Since(start))
	}
	relHeld, relErr := held[0].Release(ctx)
	extHeld, extErr := held[1].Extend(ctx)
	close(stop)
	wg.Wait()
	if relErr == nil || relHeld {
		t.Errorf("release while frozen: held %v, %v; want an error", relHeld, relErr)
	}
	if extErr == nil || extHeld {
		t.Errorf("extend while frozen: held %v, %v; want an error", extHeld, extErr)
	}
	slack := max(0, percentile(control, 1)-sluice.DefaultTimeout)
	var lat []time.Duration
	wrong := 0
	for _, tr := range tries {
		lat = append(lat, tr.latency)
		if !errors.Is(tr.err, context.DeadlineExceeded) || tr.d.Allowed || !tr.d.Degraded || tr.x != nil {
			wrong++
			t.Errorf("acquire while frozen: %+v, lease %v, %v; want a degraded denial with the deadline's error and no lease", tr.d, tr.x, tr.err)
		}
	}
	if want := sluice.DefaultTimeout + 10*time.Millisecond + slack; percentile(lat, 0.99) > want {
		t.Errorf("acquire while frozen: p99 latency %v, want at most %v (50ms + 10ms + %v by which a bare timer was late)", percentile(lat, 0.99), want, slack)
	}

	thaw()
	// The store's own view once every failed acquire's abandon was
	// answered (Inspect waits for what the server was sent while frozen).
	stats := abandoned(t, lim, "after SIGCONT")
	alive := aliveTokens(t, s, p, "ann")
	if !slices.Contains(alive, tokenOf(held[1])) {
		t.Errorf("after SIGCONT the lease granted and never ended is not held: %v", alive)
	}
	released := !slices.Contains(alive, tokenOf(held[0]))
	want := tokens(held[1:])
	if !released {
		want = tokens(held)
	}
	if !slices.Equal(alive, want) {
		t.Errorf("after SIGCONT and the abandons the store holds leases %v, want exactly those callers hold %v (%d held by nobody)", alive, want, len(alive)-len(want))
	}
	if stats.Abandoned != int64(len(tries)) || stats.Expired != 0 || stats.Dropped != 0 {
		t.Errorf("abandons after SIGCONT: %+v, want the %d failed acquires' each answered, none given up", stats, len(tries))
	}
	// The free slots are exactly those the store counts free.
	acquireN(t, lim, p, "ann", leaseFaultN-len(alive))
	wantDenied(t, lim, p, "ann", "after SIGCONT, with the slots the store counts taken")
	if h, err := held[0].Release(ctx); err != nil || h == released {
		t.Errorf("releasing again the lease whose release failed while frozen: held %v, %v; want held %v (its release ran on SIGCONT: %v)", h, err, !released, released)
	}
	if h, err := held[1].Release(ctx); err != nil || !h {
		t.Errorf("releasing the lease whose extend failed while frozen: held %v, %v; want held", h, err)
	}
	t.Logf("SIGSTOP with 2 of 4 leases held: %d acquires, all degraded denials with no lease, p99 %v, max %v (deadline 50ms, a bare timer late by %v); the failed release ran on SIGCONT: %v; the abandons of the %d failed acquires answered, %d of them ending a lease the acquire had taken; leases alive after SIGCONT: %d, none held by nobody",
		len(tries), percentile(lat, 0.99).Round(100*time.Microsecond), percentile(lat, 1).Round(100*time.Microsecond), slack.Round(100*time.Microsecond), released, stats.Abandoned, stats.Held, len(alive))
}

// abandoned waits until every lease lim queued for abandon was answered or
// given up (its AbandonStats' Pending is 0), for at most 5 s, and returns
// its AbandonStats.
func abandoned(t *testing.T, lim *sluice.Limiter, when string) sluice.AbandonStats {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		st := lim.AbandonStats()
		if st.Pending == 0 {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("abandons still pending 5 s %s: %+v", when, st)
		}
	}
}

// aliveOn returns the tokens of the leases alive (expiring after now) in
// the concurrency window key, read on the server rc talks to.
func aliveOn(t *testing.T, rc rueidis.Client, key string) []string {
	t.Helper()
	var out []string
	for _, m := range members(t, rc, key) {
		if m.Score > time.Now().UnixMicro() {
			out = append(out, m.Member)
		}
	}
	slices.Sort(out)
	return out
}

// TestFaultLeaseSentinelFailover fails a Sentinel master over with
// WaitForReplicas while leases are held and taken (leaseFailover).
func TestFaultLeaseSentinelFailover(t *testing.T) {
	st := redistest.StartSentinel(t)
	s, err := redisstore.New(redisstore.Config{Mode: redisstore.Sentinel, Addrs: st.Addrs(),
		MasterName: redistest.SentinelMaster, Prefix: newPrefix(), WaitForReplicas: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	leaseFailover(t, s, "SENTINEL FAILOVER", func() (rueidis.Client, time.Time, error) {
		next, newMaster, err := st.Failover()
		if err != nil {
			return nil, time.Time{}, err
		}
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{next.Addr()}, DisableCache: true})
		if err != nil {
			return nil, time.Time{}, err
		}
		t.Cleanup(rc.Close)
		return rc, newMaster, nil
	})
}

// TestFaultLeaseClusterFailover promotes, with CLUSTER FAILOVER, the
// replica of the master that holds ann's leases on a 3-master Cluster, with
// WaitForReplicas, while leases are held and taken (leaseFailover); the
// holders' users spread over the other masters too.
func TestFaultLeaseClusterFailover(t *testing.T) {
	c := sharedCluster(t)
	s, err := redisstore.New(redisstore.Config{Mode: redisstore.Cluster, Addrs: c.Addrs(), Prefix: newPrefix(), WaitForReplicas: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ks := s.Keys(request(t, leaseFaultPolicy(), map[string]string{"user": "ann"}, 1))
	_, replica, err := c.MasterOf(ks[1])
	if err != nil {
		t.Fatal(err)
	}
	leaseFailover(t, s, "CLUSTER FAILOVER", func() (rueidis.Client, time.Time, error) {
		newMaster, err := c.Failover(replica)
		return clusterClient(t, c), newMaster, err
	})
}

// leaseFailover runs failover, which promotes a replica and returns a
// client that reads the new master and when it first answered as master,
// while ann holds 3 of her 4 leases and 4 goroutines take and end leases
// of their own users, on s (with WaitForReplicas). The new master holds
// every lease a caller was granted and has not ended, never more than 4 of
// a user, and grants exactly the slots it counts free; ann's leases from
// before the failover are found held by their release, settle and extend
// on it, and a release frees its slot.
func leaseFailover(t *testing.T, s *redisstore.Store, what string, failover func() (rueidis.Client, time.Time, error)) {
	lim := sluice.NewLimiter(s, sluice.Config{Timeout: time.Second, OnError: sluice.Deny, Breaker: sluice.Breaker{Failures: -1}})
	p := leaseFaultPolicy()
	ctx := context.Background()
	before := acquireN(t, lim, p, "ann", leaseFaultN-1)

	// Each goroutine owns a user: it acquires while it holds fewer than 4,
	// else releases its oldest. A call that fails may or may not have run:
	// a lease whose release failed is no longer counted as held.
	type holder struct {
		user        string
		held        []*sluice.Lease
		calls, errs int
		first, last time.Time // of the calls that failed
		sample      error
	}
	failed := func(h *holder, err error) {
		h.errs++
		if h.first.IsZero() {
			h.first = time.Now()
		}
		h.last, h.sample = time.Now(), err
	}
	holders := make([]*holder, 4)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range holders {
		h := &holder{user: fmt.Sprintf("w%d", g)}
		holders[g] = h
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				h.calls++
				if len(h.held) < leaseFaultN {
					x, d, err := lim.Acquire(ctx, p, map[string]string{"user": h.user}, 1)
					if err != nil {
						failed(h, err)
					} else if d.Allowed {
						h.held = append(h.held, x)
					}
					continue
				}
				x := h.held[0]
				h.held = h.held[1:]
				if _, err := x.Release(ctx); err != nil {
					failed(h, err)
				}
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	start := time.Now()
	rc, newMaster, err := failover()
	if err != nil {
		close(stop)
		wg.Wait()
		t.Fatal(err)
	}
	// Until the store serves from the new master: until then the old
	// master refuses writes (ErrNotReplicated, or a redirection the
	// store follows).
	_, _, back := acquireUntil(t, lim, p, "probe")
	served := time.Since(start)
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()
	inFlight := func(user string) string {
		return s.Keys(request(t, p, map[string]string{"user": user}, 1))[1]
	}
	calls, errs := 0, 0
	var (
		firstErr, lastErr time.Time
		sample            error
	)
	for _, h := range holders {
		if h.last.After(lastErr) {
			lastErr, sample = h.last, h.sample
		}
		if !h.first.IsZero() && (firstErr.IsZero() || h.first.Before(firstErr)) {
			firstErr = h.first
		}
		calls, errs = calls+h.calls, errs+h.errs
		alive := aliveOn(t, rc, inFlight(h.user))
		if len(alive) > leaseFaultN {
			t.Errorf("%s: the new master holds %d leases, limit %d", h.user, len(alive), leaseFaultN)
		}
		for _, x := range h.held {
			if !slices.Contains(alive, tokenOf(x)) {
				t.Errorf("%s: a lease granted and not ended is not on the new master (it holds %v)", h.user, alive)
			}
		}
	}
	if !firstErr.IsZero() && firstErr.Before(start) {
		t.Errorf("a lease call failed %v before the failover started: %v", start.Sub(firstErr), sample)
	}
	alive := aliveOn(t, rc, inFlight("ann"))
	if want := tokens(before); !slices.Equal(alive, want) {
		t.Fatalf("ann's leases on the new master: %v, want the 3 taken before the failover %v", alive, want)
	}
	acquireN(t, lim, p, "ann", 1)
	wantDenied(t, lim, p, "ann", "4 leases after the failover")
	if held, err := before[0].Release(ctx); !held || err != nil {
		t.Fatalf("releasing a lease from before the failover: held %v, %v; want held", held, err)
	}
	acquireN(t, lim, p, "ann", 1)
	wantDenied(t, lim, p, "ann", "after a release and an acquire")
	if held, err := before[1].Extend(ctx); !held || err != nil {
		t.Errorf("extending a lease from before the failover: held %v, %v; want held", held, err)
	}
	if held, err := before[2].Settle(ctx, 5); !held || err != nil {
		t.Errorf("settling a lease from before the failover: held %v, %v; want held", held, err)
	}
	t.Logf("%s with WaitForReplicas: the new master answered %v after it started, the store served from it %v after it started (%v of retries after the failover returned); %d lease calls of 4 holders meanwhile, %d failed, from %v to %v after the failover started (%v); every lease granted and not ended is on the new master, none over 4; ann's 3 from before are held there, released, extended and settled",
		what, newMaster.Sub(start).Round(time.Millisecond), served.Round(time.Millisecond), back.Round(time.Millisecond), calls, errs, max(0, firstErr.Sub(start)).Round(time.Millisecond), max(0, lastErr.Sub(start)).Round(time.Millisecond), sample)
}
