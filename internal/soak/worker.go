package soak

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/redisstore"
)

// Outcome is what one decision came to.
type Outcome uint8

const (
	Allowed Outcome = iota
	Denied
	// Failed: the store failed (an error other than the two below); the
	// failure policy denied.
	Failed
	// NoScript: an error that names NOSCRIPT, or a function not found (after
	// FUNCTION FLUSH), reached the caller.
	NoScript
	// CircuitOpen: the circuit breaker answered without calling the store.
	CircuitOpen
)

// Degraded reports whether the failure policy, not the store, decided.
func (o Outcome) Degraded() bool { return o >= Failed }

// Record is one decision as a worker saw it.
type Record struct {
	Target  uint16
	Outcome Outcome
	Sent    int64 // ns, CLOCK_REALTIME
	Replied int64
	// Err is 0, or 1 + the index of the decision's error message in its
	// worker's table of messages.
	Err uint16
}

// recordSize is a Record's size in a worker's file.
const recordSize = 2 + 1 + 8 + 8 + 2

// maxMessages bounds a worker's table of error messages; later messages
// share its last entry.
const maxMessages = 1000

// digits matches the numbers that make one error's message differ from
// the next one's (ports, batch sizes, slots).
var digits = regexp.MustCompile(`[0-9]+`)

// messages is a worker's table of distinct error messages, numbers
// replaced by N.
type messages struct {
	mu    sync.Mutex
	index map[string]uint16
	list  []string
}

func (m *messages) id(err error) uint16 {
	text := digits.ReplaceAllString(strings.ReplaceAll(err.Error(), "\n", " "), "N")
	m.mu.Lock()
	defer m.mu.Unlock()
	if i, ok := m.index[text]; ok {
		return i
	}
	if len(m.list) == maxMessages {
		return uint16(len(m.list))
	}
	if m.index == nil {
		m.index = map[string]uint16{}
	}
	m.list = append(m.list, text)
	m.index[text] = uint16(len(m.list))
	return uint16(len(m.list))
}

// WorkerSpec is what a worker process is told, as JSON in its environment.
type WorkerSpec struct {
	Mode       string   // redisstore.ParseMode's names
	Addrs      []string // server, cluster seeds or sentinels
	MasterName string
	// WaitForReplicas is redisstore.Config.WaitForReplicas.
	WaitForReplicas bool
	Prefix          string
	Goroutines      int
	Period          time.Duration // between two decisions of one goroutine
	Timeout         time.Duration // sluice.Config.Timeout
	Seed            uint64
	Out             string // file the records are written to
	// Holders is how many goroutines run the lease workload (lease.go),
	// whose calls are written to LeaseOut.
	Holders  int
	LeaseOut string
	// BudgetOut, when set, makes the worker one of the budget workload's
	// processes (budget.go) instead: it decides only the budgeted policy,
	// writing each decision to BudgetOut as it is answered.
	BudgetOut string
}

// classify returns the outcome of a decision.
func classify(d sluice.Decision, err error) Outcome {
	switch {
	case err == nil && d.Allowed:
		return Allowed
	case err == nil:
		return Denied
	case errors.Is(err, redisstore.ErrNoScript) || strings.Contains(err.Error(), "NOSCRIPT") ||
		strings.Contains(err.Error(), "Function not found"):
		return NoScript
	case errors.Is(err, sluice.ErrCircuitOpen):
		return CircuitOpen
	}
	return Failed
}

// Work is a worker process's body. With spec.BudgetOut it runs the budget
// workload (runBudget) instead of what follows, and gives its slices back
// when in is closed. It connects, writes "ready" to out,
// waits for a line on in, then decides from spec.Goroutines goroutines,
// one decision per spec.Period each, and runs spec.Holders lease holders
// (runHolders), until in is closed. It then writes every record to
// spec.Out, every lease call to spec.LeaseOut, then "msg <text>" for each error message a
// Record.Err refers to, in order, and "done <records>" to out.
//
// Each goroutine starts at a random instant of its first period and keeps
// that phase: a decision that takes longer than the period skips the
// instants it missed, never a burst to catch up, and the next one goes out
// at the goroutine's next instant. The load stays spread over the period,
// as a service's requests arrive, whatever a fault did to the answers. (A
// goroutine that went on at once instead would leave in step with every
// other one whose answer came back at the same moment, the connection
// dropped or the server resumed, and stay so for the rest of the run: 256
// decisions at once every period, which on 2 cores raised the p99 latency
// 2 to 3 times and kept the service "not normal" for seconds after faults
// it had recovered from; docs/failure-modes.md, "Chaos soak".)
//
// A line "align <ns>" on in moves every goroutine's next decision to that
// instant (ns of CLOCK_REALTIME), the same in every worker: from then on
// they decide in step, which the soak's control phase measures.
func Work(spec WorkerSpec, in io.Reader, out io.Writer) error {
	mode, err := redisstore.ParseMode(spec.Mode)
	if err != nil {
		return err
	}
	st, err := redisstore.New(redisstore.Config{Mode: mode, Addrs: spec.Addrs, MasterName: spec.MasterName,
		Prefix: spec.Prefix, WaitForReplicas: spec.WaitForReplicas})
	if err != nil {
		return err
	}
	defer st.Close()
	// The defaults but the deadline: deny on failure, a breaker of 5
	// failures and 1 s.
	lim := sluice.NewLimiter(st, sluice.Config{Timeout: spec.Timeout})
	mix := NewMix()
	cum := make([]float64, len(mix.Weights))
	sum := 0.0
	for i, w := range mix.Weights {
		sum += w
		cum[i] = sum
	}
	// Warm up, with time to spare: a connection (and, on a cluster, the
	// slot map) and the scripts.
	warm := sluice.NewLimiter(st, sluice.Config{Timeout: 10 * time.Second})
	if _, err := warm.Peek(context.Background(), mix.Targets[0].Policy, mix.Targets[0].Attrs, 1); err != nil {
		return fmt.Errorf("soak: worker's first peek: %w", err)
	}
	wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err = st.Warm(wctx) // the lease scripts too
	cancel()
	if err != nil {
		return fmt.Errorf("soak: worker's warm-up: %w", err)
	}

	r := bufio.NewReader(in)
	fmt.Fprintln(out, "ready")
	if _, err := r.ReadString('\n'); err != nil {
		return fmt.Errorf("soak: waiting for the start: %w", err)
	}
	stop := make(chan struct{})
	var alignAt atomic.Int64 // the latest "align" instant, ns
	go func() {
		for {
			line, err := r.ReadString('\n')
			if at, ok := strings.CutPrefix(strings.TrimSpace(line), "align "); ok {
				if n, err := strconv.ParseInt(at, 10, 64); err == nil {
					alignAt.Store(n)
				}
			}
			if err != nil {
				break
			}
		}
		close(stop)
	}()

	if spec.BudgetOut != "" {
		n, err := runBudget(lim, spec, stop)
		if err != nil {
			return err
		}
		if err := lim.Close(); err != nil {
			fmt.Fprintf(out, "msg giving the slices back: %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		}
		st := lim.BudgetStats()
		fmt.Fprintf(out, "stats slices leased %d, units leased %d, returned %d, stranded %d; decisions answered locally %d, by the store %d\n",
			st.SlicesLeased, st.UnitsLeased, st.UnitsReturned, st.UnitsStranded, st.Local, st.Store)
		fmt.Fprintf(out, "done %d\n", n)
		return nil
	}

	var (
		mu   sync.Mutex
		all  [][]Record
		msgs messages
		wg   sync.WaitGroup
	)
	var leaseCalls []LeaseCall
	if spec.Holders > 0 {
		wg.Go(func() { leaseCalls = runHolders(lim, spec.Holders, spec.Seed, stop) })
	}
	for g := range spec.Goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(spec.Seed, uint64(g)))
			recs := make([]Record, 0, 1<<14)
			next := time.Now().Add(time.Duration(rng.Int64N(int64(spec.Period))))
			timer := time.NewTimer(time.Until(next))
			defer timer.Stop()
			var aligned int64 // the "align" instant this goroutine followed
			for {
				select {
				case <-stop:
					mu.Lock()
					all = append(all, recs)
					mu.Unlock()
					return
				case <-timer.C:
				}
				x := rng.Float64() * sum
				i := 0
				for i < len(cum)-1 && cum[i] < x {
					i++
				}
				tg := mix.Targets[i]
				sent := time.Now()
				d, err := lim.Allow(context.Background(), tg.Policy, tg.Attrs)
				replied := time.Now()
				rec := Record{Target: uint16(i), Outcome: classify(d, err), Sent: sent.UnixNano(), Replied: replied.UnixNano()}
				if err != nil {
					rec.Err = msgs.id(err)
				}
				recs = append(recs, rec)
				next = nextTick(next, time.Now(), spec.Period)
				if a := alignAt.Load(); a != aligned {
					aligned = a
					next = time.Unix(0, a)
				}
				timer.Reset(time.Until(next))
			}
		})
	}
	wg.Wait()

	recs := slices.Concat(all...)
	if err := WriteRecords(spec.Out, recs); err != nil {
		return err
	}
	if spec.LeaseOut != "" {
		if err := WriteLeaseCalls(spec.LeaseOut, leaseCalls); err != nil {
			return err
		}
	}
	for _, m := range msgs.list {
		fmt.Fprintf(out, "msg %s\n", m)
	}
	fmt.Fprintf(out, "done %d\n", len(recs))
	return nil
}

// nextTick returns the instant of a goroutine's next decision, given the
// instant of its last one and the time now, when its answer came: last +
// period, or when that has passed, the first instant of the goroutine's
// phase (last + a whole number of periods) after now.
func nextTick(last, now time.Time, period time.Duration) time.Time {
	next := last.Add(period)
	if next.Before(now) {
		next = next.Add((now.Sub(next)/period + 1) * period)
	}
	return next
}

// WriteRecords writes recs to the file path, as ReadRecords reads them.
func WriteRecords(path string, recs []Record) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var buf [recordSize]byte
	for _, rec := range recs {
		binary.LittleEndian.PutUint16(buf[0:], rec.Target)
		buf[2] = byte(rec.Outcome)
		binary.LittleEndian.PutUint64(buf[3:], uint64(rec.Sent))
		binary.LittleEndian.PutUint64(buf[11:], uint64(rec.Replied))
		binary.LittleEndian.PutUint16(buf[19:], rec.Err)
		if _, err := w.Write(buf[:]); err != nil {
			f.Close()
			return fmt.Errorf("soak: %w", err)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("soak: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	return nil
}

// ReadRecords reads a file of WriteRecords.
func ReadRecords(path string) ([]Record, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("soak: %w", err)
	}
	if len(b)%recordSize != 0 {
		return nil, fmt.Errorf("soak: %s: %d bytes, not a whole number of records", path, len(b))
	}
	out := make([]Record, 0, len(b)/recordSize)
	for off := 0; off < len(b); off += recordSize {
		out = append(out, Record{
			Target:  binary.LittleEndian.Uint16(b[off:]),
			Outcome: Outcome(b[off+2]),
			Sent:    int64(binary.LittleEndian.Uint64(b[off+3:])),
			Replied: int64(binary.LittleEndian.Uint64(b[off+11:])),
			Err:     binary.LittleEndian.Uint16(b[off+19:]),
		})
	}
	return out, nil
}
