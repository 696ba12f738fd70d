package httplimit

import (
	"net/http"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
)

// inFlight is a policy of 100 tokens a minute and 2 requests in progress
// per client.
func inFlight() *sluice.Policy {
	return &sluice.Policy{Name: "llm", Rules: []sluice.Rule{
		{Name: "tokens", By: []string{"ip"}, Limit: 100, Window: time.Minute},
		{Name: "in-flight", By: []string{"ip"}, Concurrency: 2, Lease: 30 * time.Second},
	}}
}

func TestMiddlewareLease(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	res := mustResolver(t, IPConfig{})
	p := inFlight()
	m := mustNew(t, Config{Limiter: e.lim, Policies: []*sluice.Policy{p}, Keys: map[string]KeyFunc{"ip": res.Key}, Lease: true})
	const peer = "203.0.113.7:1000"
	// A handler that, while it runs, makes the next request of the same
	// client, twice deep: the third request finds both slots held.
	var h http.Handler
	var statuses []int
	var retry string
	depth := 0
	h = m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if depth < 2 {
			depth++
			resp := do(h, peer, nil)
			statuses = append(statuses, resp.StatusCode)
			if resp.StatusCode != http.StatusOK {
				retry = resp.Header.Get(HeaderRetryAfter)
			}
		}
		ReportCost(r.Context(), 10)
	}))
	if resp := do(h, peer, nil); resp.StatusCode != http.StatusOK || len(statuses) != 2 || statuses[0] != http.StatusTooManyRequests ||
		statuses[1] != http.StatusOK || retry != "30" {
		t.Fatalf("nested: status %d, inner %v, Retry-After %q; want 200, [429 200] and 30", resp.StatusCode, statuses, retry)
	}
	// Both held leases were settled at 10 tokens each, and released.
	d, err := e.lim.Peek(t.Context(), p, map[string]string{"ip": "203.0.113.7"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if d.Limits()[0].Used != 10+10+1 || d.Limits()[1].Used != 1 {
		t.Errorf("after the requests: tokens %d, in flight %d (the peek's own included); want 21 and 1", d.Limits()[0].Used, d.Limits()[1].Used)
	}
	// A handler that panics releases its slot; without ReportCost the
	// estimate, 1, stands.
	panicking := m.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("handler failed") }))
	func() {
		defer func() { _ = recover() }()
		do(panicking, peer, nil)
	}()
	d, err = e.lim.Peek(t.Context(), p, map[string]string{"ip": "203.0.113.7"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	if d.Limits()[0].Used != 21+1 || d.Limits()[1].Used != 1 {
		t.Errorf("after a panic: tokens %d, in flight %d; want 22 and 1", d.Limits()[0].Used, d.Limits()[1].Used)
	}
	// Without Lease, a policy with a concurrency rule cannot be decided.
	plain := mustNew(t, Config{Limiter: e.lim, Policies: []*sluice.Policy{p}, Keys: map[string]KeyFunc{"ip": res.Key}})
	if resp := do(plain.Handler(ok), peer, nil); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("without Lease: status %d, want 400", resp.StatusCode)
	}
}
