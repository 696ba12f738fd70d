// Command llm is an LLM gateway's token budget: per user, 100,000 tokens a
// minute and 4 requests at once. A request is admitted with an estimate of
// its tokens (its prompt's and its max_tokens), holding a lease, and when
// the model's answer reports its usage the lease is settled with it: the
// budget counts the tokens spent, not the estimates.
//
//	go run ./examples/llm
//	go run ./examples/llm -redis redis://127.0.0.1:6379/0
//
// It plays one user's requests against a model that answers with the usage
// each request really took, and prints each step: what was admitted, the
// tokens counted and the requests in flight after it. On the memory store
// its clock is a manual one, so the figures are the same on every run.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/store"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// budget is the gateway's policy: 100,000 tokens a minute and 4 requests in
// flight per user. A lease lives 2 minutes: a request whose client died
// frees its slot then.
var budget = &sluice.Policy{Name: "llm", Rules: []sluice.Rule{
	{Name: "tokens", By: []string{"user"}, Limit: 100_000, Window: time.Minute},
	{Name: "in-flight", By: []string{"user"}, Concurrency: 4, Lease: 2 * time.Minute},
}}

// request is a request to the model: its estimate, and the usage the
// model's answer will report.
type request struct {
	name            string
	estimate, usage int64
}

// gateway admits requests against the budget and settles them.
type gateway struct {
	lim  *sluice.Limiter
	out  io.Writer
	user map[string]string
}

// begin acquires a lease for r's estimate and prints the decision.
func (g *gateway) begin(ctx context.Context, r request) (*sluice.Lease, error) {
	lease, d, err := g.lim.Acquire(ctx, budget, g.user, r.estimate)
	if err != nil {
		return nil, err
	}
	if d.Allowed {
		fmt.Fprintf(g.out, "%-10s admitted  estimate %6d  tokens %6d  in flight %d\n", r.name, r.estimate, d.Limits()[0].Used, d.Limits()[1].Used)
	} else {
		fmt.Fprintf(g.out, "%-10s denied by %s (%s), retry after %v\n", r.name, d.DeniedBy, d.Cause, d.RetryAfter.Round(time.Second))
	}
	return lease, nil
}

// end settles lease with r's usage and prints what the budget counts then.
func (g *gateway) end(ctx context.Context, r request, lease *sluice.Lease) error {
	if _, err := lease.Settle(ctx, r.usage); err != nil {
		return err
	}
	d, err := g.lim.Peek(ctx, budget, g.user, 1)
	if err != nil {
		return err
	}
	// The peek counts itself in Used: one token, one request.
	fmt.Fprintf(g.out, "%-10s settled   usage    %6d  tokens %6d  in flight %d\n", r.name, r.usage, d.Limits()[0].Used-1, d.Limits()[1].Used-1)
	return nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("llm", flag.ContinueOnError)
	fs.SetOutput(stderr)
	redisURL := fs.String("redis", "", "keep the budget in Redis at this `URL` (redis://host:port/db); default: in memory")
	user := fs.String("user", "ann", "the user whose requests are played")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	st, advance, err := openStore(*redisURL)
	if err != nil {
		fmt.Fprintln(stderr, "llm:", err)
		return 2
	}
	defer st.Close()
	g := &gateway{lim: sluice.NewLimiter(st, sluice.Config{}), out: stdout, user: map[string]string{"user": *user}}
	if err := play(ctx, g, advance); err != nil {
		fmt.Fprintln(stderr, "llm:", err)
		return 1
	}
	return 0
}

// play runs the requests of docs/leases.md's example: four at once fill
// the user's slots, a fifth waits for one to end, an answer that ran long
// is counted in full.
func play(ctx context.Context, g *gateway, advance func(time.Duration)) error {
	reqs := []request{
		{"request 1", 6_000, 1_840},
		{"request 2", 6_000, 9_000},
		{"request 3", 6_000, 2_500},
		{"request 4", 6_000, 3_100},
	}
	leases := make([]*sluice.Lease, len(reqs))
	for i, r := range reqs {
		x, err := g.begin(ctx, r)
		if err != nil {
			return err
		}
		leases[i] = x
	}
	fifth := request{"request 5", 6_000, 700}
	if _, err := g.begin(ctx, fifth); err != nil { // four in flight: denied
		return err
	}
	advance(3 * time.Second)
	if err := g.end(ctx, reqs[0], leases[0]); err != nil {
		return err
	}
	x, err := g.begin(ctx, fifth) // a slot is free
	if err != nil {
		return err
	}
	advance(5 * time.Second)
	for i := 1; i < len(reqs); i++ {
		if err := g.end(ctx, reqs[i], leases[i]); err != nil {
			return err
		}
	}
	return g.end(ctx, fifth, x)
}

// openStore opens the Redis store at redisURL, or a memory store on a
// manual clock that advance moves.
func openStore(redisURL string) (store.Store, func(time.Duration), error) {
	if redisURL != "" {
		s, err := redisstore.New(redisstore.Config{URL: redisURL, Prefix: "llm-example"})
		return s, func(d time.Duration) { time.Sleep(d) }, err
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := memstore.New(memstore.Config{Clock: func() time.Time { return now }})
	return s, func(d time.Duration) { now = now.Add(d) }, nil
}
