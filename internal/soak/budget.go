package soak

import (
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

// The budget workload: a few worker processes (BudgetWorkers), each a
// Limiter, decide one budgeted log rule with no attributes (one window
// for the whole fleet) with demand well above its limit, so that every
// process leases slices of it, admits from them in memory and asks the
// store when they run out. Each decision is written to the process's file
// as soon as it is answered, with one write call, so that a process killed
// with SIGKILL leaves every admission it acted on; the checker
// (budgetcheck.go) judges the store from these files alone.

// Budget workload figures.
const (
	// BudgetWorkers is how many processes decide the budgeted rule.
	BudgetWorkers = 3
	// BudgetLimit is the rule's limit per BudgetWindow.
	BudgetLimit = 2000
	// BudgetWindow is the rule's window.
	BudgetWindow = 2 * time.Second
	// BudgetTime is the rule's budget: the longest a process holds a
	// slice, a quarter of the window (the most sluice allows).
	BudgetTime = BudgetWindow / 4
)

// BudgetPolicy returns the budgeted policy: one log rule, "global", with
// no attributes.
func BudgetPolicy() *sluice.Policy {
	return &sluice.Policy{Name: "budget", Rules: []sluice.Rule{
		{Name: "global", Limit: BudgetLimit, Window: BudgetWindow, Budget: BudgetTime},
	}}
}

// BudgetCall is one decision of the budget workload as a worker saw it.
type BudgetCall struct {
	Outcome Outcome
	// Local reports a decision answered from the process's slice, without
	// a store call (sluice.Decision.Local).
	Local         bool
	Sent, Replied int64 // ns, CLOCK_REALTIME
}

// budgetCallSize is a BudgetCall's size in a worker's file.
const budgetCallSize = 1 + 1 + 8 + 8

// appendBudgetCall appends c's encoding to dst.
func appendBudgetCall(dst []byte, c BudgetCall) []byte {
	local := byte(0)
	if c.Local {
		local = 1
	}
	dst = append(dst, byte(c.Outcome), local)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(c.Sent))
	return binary.LittleEndian.AppendUint64(dst, uint64(c.Replied))
}

// DecodeBudgetCalls decodes a budget worker's file. A killed worker's file
// may end in part of a call, which is left out: the worker died before it
// wrote that call, so before it acted on it.
func DecodeBudgetCalls(b []byte) []BudgetCall {
	out := make([]BudgetCall, 0, len(b)/budgetCallSize)
	for off := 0; off+budgetCallSize <= len(b); off += budgetCallSize {
		out = append(out, BudgetCall{
			Outcome: Outcome(b[off]),
			Local:   b[off+1] == 1,
			Sent:    int64(binary.LittleEndian.Uint64(b[off+2:])),
			Replied: int64(binary.LittleEndian.Uint64(b[off+10:])),
		})
	}
	return out
}

// ReadBudgetCalls reads a budget worker's file.
func ReadBudgetCalls(path string) ([]BudgetCall, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("soak: %w", err)
	}
	return DecodeBudgetCalls(b), nil
}

// SliceLook is what a budget process held of the budgeted rule at an
// instant (ns, CLOCK_REALTIME): its slice's units, how many it used, and
// how long it could still admit from it; all 0 when it held none.
type SliceLook struct {
	At            int64
	Granted, Used int64
	Left          time.Duration
}

// sliceLookSize is a SliceLook's size in a worker's file.
const sliceLookSize = 4 * 8

// slicePeriod is how often a budget process writes what it holds.
const slicePeriod = 50 * time.Millisecond

// appendSliceLook appends l's encoding to dst.
func appendSliceLook(dst []byte, l SliceLook) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, uint64(l.At))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(l.Granted))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(l.Used))
	return binary.LittleEndian.AppendUint64(dst, uint64(l.Left))
}

// DecodeSliceLooks decodes a budget worker's file of SliceLooks, leaving
// out a last partial one.
func DecodeSliceLooks(b []byte) []SliceLook {
	var out []SliceLook
	for off := 0; off+sliceLookSize <= len(b); off += sliceLookSize {
		out = append(out, SliceLook{
			At:      int64(binary.LittleEndian.Uint64(b[off:])),
			Granted: int64(binary.LittleEndian.Uint64(b[off+8:])),
			Used:    int64(binary.LittleEndian.Uint64(b[off+16:])),
			Left:    time.Duration(binary.LittleEndian.Uint64(b[off+24:])),
		})
	}
	return out
}

// watchSlice writes what lim holds of the budgeted rule to path every
// slicePeriod until stop is closed, each with one write call, so that
// the file of a process killed with SIGKILL tells what it held then.
func watchSlice(lim *sluice.Limiter, path string, stop <-chan struct{}) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	tick := time.NewTicker(slicePeriod)
	defer tick.Stop()
	buf := make([]byte, 0, sliceLookSize)
	for {
		select {
		case <-stop:
			return f.Close()
		case <-tick.C:
		}
		look := SliceLook{At: time.Now().UnixNano()}
		for _, sl := range lim.Slices() {
			if sl.Policy == "budget" && sl.Rule == "global" {
				look.Granted, look.Used, look.Left = sl.Granted, sl.Used, sl.Left
			}
		}
		buf = appendSliceLook(buf[:0], look)
		if _, err := f.Write(buf); err != nil {
			f.Close()
			return fmt.Errorf("soak: %s: %w", path, err)
		}
	}
}

// runBudget decides the budgeted policy through lim from spec.Goroutines
// goroutines, one decision per spec.Period each (as Work's goroutines do),
// until stop is closed, writing each decision to spec.BudgetOut with one
// write call as soon as it is answered, and what it holds to
// spec.BudgetOut + ".slices" (watchSlice). It returns the number of
// decisions.
func runBudget(lim *sluice.Limiter, spec WorkerSpec, stop <-chan struct{}) (int, error) {
	f, err := os.OpenFile(spec.BudgetOut, os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_TRUNC, 0o644)
	if err != nil {
		return 0, fmt.Errorf("soak: %w", err)
	}
	p := BudgetPolicy()
	var (
		mu    sync.Mutex
		n     int
		first error
		wg    sync.WaitGroup
	)
	var watchErr error
	wg.Go(func() { watchErr = watchSlice(lim, spec.BudgetOut+".slices", stop) })
	for g := range spec.Goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(spec.Seed, uint64(g)))
			next := time.Now().Add(time.Duration(rng.Int64N(int64(spec.Period))))
			timer := time.NewTimer(time.Until(next))
			defer timer.Stop()
			buf := make([]byte, 0, budgetCallSize)
			for {
				select {
				case <-stop:
					return
				case <-timer.C:
				}
				sent := time.Now()
				d, err := lim.Allow(context.Background(), p, nil)
				replied := time.Now()
				c := BudgetCall{Outcome: classify(d, err), Local: err == nil && d.Local, Sent: sent.UnixNano(), Replied: replied.UnixNano()}
				buf = appendBudgetCall(buf[:0], c)
				mu.Lock()
				if _, err := f.Write(buf); err != nil && first == nil {
					first = err
				}
				n++
				mu.Unlock()
				next = nextTick(next, time.Now(), spec.Period)
				timer.Reset(time.Until(next))
			}
		})
	}
	wg.Wait()
	if err := errors.Join(first, watchErr, f.Close()); err != nil {
		return n, fmt.Errorf("soak: %s: %w", spec.BudgetOut, err)
	}
	return n, nil
}
