package redisstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/redisstore"
)

// The concurrency soak: 3 processes × 32 goroutines take leases of one key
// whose concurrency rule admits 8, on Redis's own clock, for
// SLUICE_LEASE_SOAK (default 3s). Each goroutine acquires, holds the lease
// a random time, and releases it, or, one time in five, never releases it.
// An independent checker reads only the send and reply times of every call
// (the wall clock of one machine, which Redis's TIME also reads):
//
//   - a lease is certainly held from the reply to its acquire until the
//     send of its release, and no longer than its lease time after the
//     send of its acquire (the store's time of the acquire is between the
//     two); no moment may have more than 8 leases certainly held;
//   - a lease is possibly held from the send of its acquire until the reply
//     to its release, or, unreleased, until its lease time after the reply
//     to its acquire; a denied acquire must meet 8 leases possibly held at
//     some moment between its send and its reply, or a lease was held past
//     its time (an unreleased lease not freed within its lease time).
const (
	leaseSoakEnv   = "SLUICE_LEASE_SOAK"
	leaseSoakProcs = 3
	leaseSoakGo    = 32
	leaseSoakN     = 8
	leaseSoakTime  = 200 * time.Millisecond // the lease time
)

// leaseCall is one acquire, and its release when there was one, as a
// child reports it: times in µs of the wall clock.
type leaseCall struct {
	Sent, Reply       int64 // the acquire
	Allowed, Released bool
	RelSent, RelReply int64 // the release
	ReleaseHeld       bool  // the release found the lease held
	Child, Goroutine  int   `json:"-"`
}

func leaseSoakPolicy() *sluice.Policy {
	return &sluice.Policy{Name: "soak", Rules: []sluice.Rule{
		{Name: "in-flight", Concurrency: leaseSoakN, Lease: leaseSoakTime},
	}}
}

func TestLeaseSoak(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 3 processes for seconds")
	}
	server.Require(t)
	length := 3 * time.Second
	if v := os.Getenv(leaseSoakEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("%s=%q: %v", leaseSoakEnv, v, err)
		}
		length = d
	}
	prefix := newPrefix()
	ctx, cancel := context.WithTimeout(context.Background(), length+2*time.Minute)
	defer cancel()
	var calls []leaseCall
	runChildren(t, ctx, leaseSoakProcs, "TestLeaseSoakProcess",
		[]string{helperEnv + "=" + server.Addr(), helperPrefixEnv + "=" + prefix, leaseSoakEnv + "=" + length.String()},
		func(i int, line string) {
			if !strings.HasPrefix(line, "{") {
				return // the test binary's own lines
			}
			var c leaseCall
			if err := json.Unmarshal([]byte(line), &c); err != nil {
				t.Fatalf("child %d: %q: %v", i, line, err)
			}
			c.Child = i
			calls = append(calls, c)
		})
	r := checkLeaseSoak(calls)
	t.Logf("lease soak: %d processes x %d goroutines for %v, concurrency %d, lease %v: %d acquires, %d granted, %d denied, %d never released; "+
		"most leases certainly held at once %d; moments with more than %d: %d; denials without %d possibly held: %d; releases after the lease time that found it held: %d",
		leaseSoakProcs, leaseSoakGo, length, leaseSoakN, leaseSoakTime, len(calls), r.granted, r.denied, r.unreleased,
		r.most, leaseSoakN, r.over, leaseSoakN, r.unexplained, r.lateHeld)
	if r.over > 0 {
		t.Errorf("%d moments with more than %d leases certainly held", r.over, leaseSoakN)
	}
	if r.unexplained > 0 {
		t.Errorf("%d denials met fewer than %d leases possibly held: a lease held past its time", r.unexplained, leaseSoakN)
	}
	if r.lateHeld > 0 {
		t.Errorf("%d releases sent after their lease's time found it held", r.lateHeld)
	}
	if r.granted == 0 || r.denied == 0 || r.unreleased == 0 {
		t.Errorf("the soak did not reach its cases: %d granted, %d denied, %d never released", r.granted, r.denied, r.unreleased)
	}
}

// leaseSoakReport is what checkLeaseSoak found.
type leaseSoakReport struct {
	granted, denied, unreleased int
	most, over                  int // leases certainly held at once: the most, and moments above N
	unexplained                 int // denials that met fewer than N possibly held
	lateHeld                    int // releases sent past the lease time that found it held
}

// checkLeaseSoak checks the calls as TestLeaseSoak says.
func checkLeaseSoak(calls []leaseCall) leaseSoakReport {
	var r leaseSoakReport
	type edge struct {
		at    int64
		delta int // +1 starts, -1 ends; ends sort first at one instant
	}
	life := leaseSoakTime.Microseconds()
	var certain []edge
	type span struct{ from, to int64 }
	var possible []span
	for _, c := range calls {
		if !c.Allowed {
			r.denied++
			continue
		}
		r.granted++
		if !c.Released {
			r.unreleased++
			possible = append(possible, span{c.Sent, c.Reply + life})
		} else {
			possible = append(possible, span{c.Sent, min(c.RelReply, c.Reply+life)})
			if c.RelSent > c.Reply+life && c.ReleaseHeld {
				r.lateHeld++
			}
		}
		end := c.Sent + life
		if c.Released {
			end = min(end, c.RelSent)
		}
		if c.Reply < end {
			certain = append(certain, edge{c.Reply, 1}, edge{end, -1})
		}
	}
	slices.SortFunc(certain, func(a, b edge) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return a.delta - b.delta
	})
	held := 0
	for _, e := range certain {
		held += e.delta
		r.most = max(r.most, held)
		if held > leaseSoakN {
			r.over++
		}
	}
	// A denial [sent, reply] needs a moment in it with N possibly held:
	// the count changes only at span starts, so check its send and every
	// start within it.
	for _, c := range calls {
		if c.Allowed {
			continue
		}
		count := func(t int64) int {
			n := 0
			for _, s := range possible {
				if s.from <= t && t < s.to {
					n++
				}
			}
			return n
		}
		ok := count(c.Sent) >= leaseSoakN
		for _, s := range possible {
			if ok {
				break
			}
			if s.from > c.Sent && s.from <= c.Reply {
				ok = count(s.from) >= leaseSoakN
			}
		}
		if !ok {
			r.unexplained++
		}
	}
	return r
}

// TestLeaseSoakProcess is a child of TestLeaseSoak; run directly, it does
// nothing.
func TestLeaseSoakProcess(t *testing.T) {
	addr, v := os.Getenv(helperEnv), os.Getenv(leaseSoakEnv)
	if addr == "" || v == "" {
		return
	}
	length, err := time.ParseDuration(v)
	if err != nil {
		t.Fatal(err)
	}
	s, err := redisstore.New(redisstore.Config{Addrs: []string{addr}, Prefix: os.Getenv(helperPrefixEnv)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	lim := sluice.NewLimiter(s, sluice.Config{Timeout: 5 * time.Second})
	p := leaseSoakPolicy()
	fmt.Println("ready")
	if _, err := os.Stdin.Read(make([]byte, 1)); err == nil {
		t.Fatal("stdin: want EOF, the signal to start")
	}
	ctx := context.Background()
	end := time.Now().Add(length)
	var (
		mu  sync.Mutex
		enc = json.NewEncoder(os.Stdout)
		wg  sync.WaitGroup
	)
	for range leaseSoakGo {
		wg.Go(func() {
			for time.Now().Before(end) {
				c := leaseCall{Sent: time.Now().UnixMicro()}
				x, d, err := lim.Acquire(ctx, p, nil, 1)
				c.Reply = time.Now().UnixMicro()
				if err != nil {
					t.Error(err)
					return
				}
				c.Allowed = d.Allowed
				if d.Allowed {
					hold := time.Duration(rand.IntN(int(1.5 * float64(leaseSoakTime))))
					time.Sleep(hold) // the work the lease covers
					if rand.IntN(5) != 0 {
						c.Released = true
						c.RelSent = time.Now().UnixMicro()
						held, err := x.Release(ctx)
						c.RelReply = time.Now().UnixMicro()
						if err != nil {
							t.Error(err)
							return
						}
						c.ReleaseHeld = held
					}
				} else {
					time.Sleep(time.Duration(rand.IntN(int(10 * time.Millisecond))))
				}
				mu.Lock()
				_ = enc.Encode(c)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}
