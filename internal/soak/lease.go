package soak

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/sluicerate/sluice"
)

// The lease workload: holders acquire a lease on a concurrency rule, hold
// it for a while and release it, or settle it with a cost above the
// estimate it was acquired with; some never end their lease, which must be
// freed at the lease time. Each call is logged with its send and reply
// times and its answer, and the checker (leasecheck.go) judges the store
// from that log alone.

// Lease workload figures.
const (
	// LeaseTime is every concurrency rule's lease.
	LeaseTime = 2 * time.Second
	// LeaseSlots is every concurrency rule's N.
	LeaseSlots = 4
	// settleLimit is the settle policy's rate rule, per Window: above
	// what its leases record, so that it denies rarely.
	settleLimit = 2000
	// leaseEstimate is what a settle policy's lease is acquired with;
	// its settle records 2 to 5, always more, so that a settle the store
	// lost shows as units missing from its window.
	leaseEstimate = 1
	// abandonOneIn: one lease in this many is never ended by its holder.
	abandonOneIn = 50
	// maxHold is the longest a holder keeps a lease before ending it.
	maxHold = 300 * time.Millisecond
)

// LeaseTarget is one concurrency window the holders acquire on: a policy
// and its attributes. Settle says its leases are settled (the policy has
// a rate rule, Rule "cost", that a peek reads), else released.
type LeaseTarget struct {
	Name   string
	Policy *sluice.Policy
	Attrs  map[string]string
	Settle bool
}

// LeaseTargets returns the lease workload's windows: two keys of a policy
// of one concurrency rule, whose leases are released, and two keys of a
// policy of a concurrency rule and a log rule, whose leases are settled.
func LeaseTargets() []LeaseTarget {
	lease := &sluice.Policy{Name: "lease", Rules: []sluice.Rule{
		{Name: "slots", By: []string{"job"}, Concurrency: LeaseSlots, Lease: LeaseTime},
	}}
	settle := &sluice.Policy{Name: "settle", Rules: []sluice.Rule{
		{Name: "slots", By: []string{"job"}, Concurrency: LeaseSlots, Lease: LeaseTime},
		{Name: "cost", By: []string{"job"}, Limit: settleLimit, Window: Window},
	}}
	var out []LeaseTarget
	for i := range 2 {
		j := fmt.Sprintf("j%d", i)
		out = append(out, LeaseTarget{Name: "lease " + j, Policy: lease, Attrs: map[string]string{"job": j}})
	}
	for i := range 2 {
		j := fmt.Sprintf("s%d", i)
		out = append(out, LeaseTarget{Name: "settle " + j, Policy: settle, Attrs: map[string]string{"job": j}, Settle: true})
	}
	return out
}

// LeaseOp is a lease call.
type LeaseOp uint8

const (
	OpAcquire LeaseOp = iota
	OpRelease
	OpSettle
)

// LeaseAnswer is what a lease call was answered.
type LeaseAnswer uint8

const (
	// Granted: the acquire was allowed and holds a lease.
	Granted LeaseAnswer = iota
	// DeniedSlots: the acquire was denied by the concurrency rule.
	DeniedSlots
	// DeniedRate: the acquire was denied by a rate rule.
	DeniedRate
	// Held: the release or settle ended a lease that was held.
	Held
	// NotHeld: the release or settle found the lease not held.
	NotHeld
	// CallFailed: an error; the outcome is unknown to the caller.
	CallFailed
)

// LeaseCall is one lease call as a worker saw it.
type LeaseCall struct {
	Target uint8
	Op     LeaseOp
	Answer LeaseAnswer
	// Cost is the acquire's estimate or the settle's cost.
	Cost uint8
	// Lease names the lease, per worker; the soak makes it unique over
	// every worker.
	Lease         uint64
	Sent, Replied int64 // ns, CLOCK_REALTIME
}

// leaseCallSize is a LeaseCall's size in a worker's file.
const leaseCallSize = 1 + 1 + 1 + 1 + 8 + 8 + 8

// answerOf classifies an acquire's answer.
func answerOf(d sluice.Decision, err error) LeaseAnswer {
	switch {
	case err != nil:
		return CallFailed
	case d.Allowed:
		return Granted
	case d.Cause == sluice.CauseConcurrency:
		return DeniedSlots
	}
	return DeniedRate
}

// endAnswer classifies a release's or a settle's answer.
func endAnswer(held bool, err error) LeaseAnswer {
	switch {
	case err != nil:
		return CallFailed
	case held:
		return Held
	}
	return NotHeld
}

// holdLeases is one holder: until stop is closed it picks a target,
// acquires a lease (after a denial or an error, again after 100 to 250 ms), holds it up to maxHold and releases or settles it, or, one time
// in abandonOneIn, forgets it. It returns its calls; the leases it names
// are first + 0, 1, ...
func holdLeases(lim *sluice.Limiter, targets []LeaseTarget, rng *rand.Rand, first uint64, stop <-chan struct{}) []LeaseCall {
	var out []LeaseCall
	id := first
	pause := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-stop:
			return false
		case <-t.C:
			return true
		}
	}
	for {
		select {
		case <-stop:
			return out
		default:
		}
		ti := rng.IntN(len(targets))
		tg := targets[ti]
		id++
		sent := time.Now()
		x, d, err := lim.Acquire(context.Background(), tg.Policy, tg.Attrs, leaseEstimate)
		ans := answerOf(d, err)
		if ans == Granted && x.ID() == "" {
			ans = CallFailed // admitted by the failure policy: nothing held
		}
		out = append(out, LeaseCall{Target: uint8(ti), Op: OpAcquire, Answer: ans, Cost: leaseEstimate, Lease: id,
			Sent: sent.UnixNano(), Replied: time.Now().UnixNano()})
		if ans != Granted {
			if !pause(time.Duration(100+rng.IntN(150)) * time.Millisecond) {
				return out
			}
			continue
		}
		if !pause(time.Duration(rng.Int64N(int64(maxHold)))) {
			return out
		}
		if rng.IntN(abandonOneIn) == 0 {
			continue // never ended: freed at the lease time
		}
		call := LeaseCall{Target: uint8(ti), Op: OpRelease, Lease: id}
		var held bool
		sent = time.Now()
		if tg.Settle {
			call.Op, call.Cost = OpSettle, uint8(2+rng.IntN(4))
			held, err = x.Settle(context.Background(), int64(call.Cost))
		} else {
			held, err = x.Release(context.Background())
		}
		call.Sent, call.Replied, call.Answer = sent.UnixNano(), time.Now().UnixNano(), endAnswer(held, err)
		out = append(out, call)
	}
}

// runHolders runs n holders until stop is closed and returns their calls.
func runHolders(lim *sluice.Limiter, n int, seed uint64, stop <-chan struct{}) []LeaseCall {
	targets := LeaseTargets()
	var (
		mu  sync.Mutex
		all []LeaseCall
		wg  sync.WaitGroup
	)
	for g := range n {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, 1<<32+uint64(g)))
			calls := holdLeases(lim, targets, rng, uint64(g)<<32, stop)
			mu.Lock()
			all = append(all, calls...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return all
}

// WriteLeaseCalls writes calls to the file path, as ReadLeaseCalls reads
// them.
func WriteLeaseCalls(path string, calls []LeaseCall) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var buf [leaseCallSize]byte
	for _, c := range calls {
		buf[0], buf[1], buf[2], buf[3] = c.Target, byte(c.Op), byte(c.Answer), c.Cost
		binary.LittleEndian.PutUint64(buf[4:], c.Lease)
		binary.LittleEndian.PutUint64(buf[12:], uint64(c.Sent))
		binary.LittleEndian.PutUint64(buf[20:], uint64(c.Replied))
		if _, err := w.Write(buf[:]); err != nil {
			f.Close()
			return fmt.Errorf("soak: %w", err)
		}
	}
	if err := errors.Join(w.Flush(), f.Close()); err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	return nil
}

// ReadLeaseCalls reads a file of WriteLeaseCalls.
func ReadLeaseCalls(path string) ([]LeaseCall, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("soak: %w", err)
	}
	if len(b)%leaseCallSize != 0 {
		return nil, fmt.Errorf("soak: %s: %d bytes, not a whole number of lease calls", path, len(b))
	}
	out := make([]LeaseCall, 0, len(b)/leaseCallSize)
	for off := 0; off < len(b); off += leaseCallSize {
		out = append(out, LeaseCall{
			Target: b[off], Op: LeaseOp(b[off+1]), Answer: LeaseAnswer(b[off+2]), Cost: b[off+3],
			Lease:   binary.LittleEndian.Uint64(b[off+4:]),
			Sent:    int64(binary.LittleEndian.Uint64(b[off+12:])),
			Replied: int64(binary.LittleEndian.Uint64(b[off+20:])),
		})
	}
	return out, nil
}

// AuditLeases peeks, through lim, at every settle target's rate rule
// ("cost") every period until stop is closed, and returns per target
// (indexed as targets) what the store held at each peek that succeeded.
func AuditLeases(lim *sluice.Limiter, targets []LeaseTarget, period time.Duration, stop <-chan struct{}) [][]Look {
	looks := make([][]Look, len(targets))
	var wg sync.WaitGroup
	for i, tg := range targets {
		if !tg.Settle {
			continue
		}
		wg.Go(func() {
			peekEvery(lim, tg.Policy, tg.Attrs, period, stop, func(sent, replied int64, d *sluice.Decision) {
				if held, ok := heldBy(d, "cost"); ok {
					looks[i] = append(looks[i], Look{Sent: sent, Replied: replied, Held: held})
				}
			})
		})
	}
	wg.Wait()
	return looks
}
