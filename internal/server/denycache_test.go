package server

import (
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/store"
)

// countingStore is a memory store that counts the decisions it is asked
// for. It is a store.Local, as the memory store is, so that the server's
// Limiter calls it without a deadline: with the Limiter's 50 ms deadline on
// the real clock, a call held up that long on a loaded machine failed and
// was answered by the failure policy.
type countingStore struct {
	store.Store
	calls int
}

var _ store.Local = (*countingStore)(nil)

// Local implements store.Local.
func (*countingStore) Local() {}

func (s *countingStore) Decide(ctx context.Context, req *store.Request) error {
	s.calls++
	if _, ok := ctx.Deadline(); ok {
		return errors.New("countingStore: the Limiter gave a memory store's call a deadline, as it does a network store's")
	}
	return s.Store.Decide(ctx, req)
}

// TestDenyCache: with Options.DenyCache, the configured policies' repeated
// denials are answered without a store call and counted; a reload empties
// the cache and keeps the counters.
func TestDenyCache(t *testing.T) {
	parse := func(limit string) *config.Config {
		return parseConfig(t, `
policies:
  - name: api
    limits:
      - {name: per-ip, by: [ip], limit: `+limit+`, window: 1m}
`)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st := &countingStore{Store: memstore.New(memstore.Config{Clock: func() time.Time { return t0 }})}
	t.Cleanup(func() { st.Close() })
	srv, err := New(st, parse("1"), Options{Logger: slog.New(slog.DiscardHandler), DenyCache: 100})
	if err != nil {
		t.Fatal(err)
	}
	h := srv.Handler()
	do := func(method, path, body string) string {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(method, path, strings.NewReader(body)))
		return w.Body.String()
	}
	decide := func() bool {
		return strings.Contains(do("POST", "/v1/decide", `{"policy":"api","attributes":{"ip":"203.0.113.7"}}`), `"allowed":true`)
	}
	expect := func(what string, wants ...string) {
		t.Helper()
		body := do("GET", "/metrics", "")
		for _, want := range wants {
			if !strings.Contains(body, want+"\n") {
				t.Errorf("%s: /metrics lacks %q", what, want)
			}
		}
	}
	for i, want := range []bool{true, false, false, false} {
		if got := decide(); got != want {
			t.Fatalf("request %d: allowed %v, want %v", i+1, got, want)
		}
	}
	if st.calls != 2 {
		t.Errorf("%d store calls for an admission and three denials, want 2", st.calls)
	}
	expect("before the reload",
		`sluice_deny_cache_entries 1`, `sluice_deny_cache_hits_total 2`, `sluice_deny_cache_misses_total 2`,
		`sluice_deny_cache_evictions_total 0`,
		`sluice_decisions_total{outcome="denied",policy="api",rule="per-ip"} 3`)
	// A reload with a higher limit: the new Limiter's cache is empty, and
	// the store admits the next request, the second of the window.
	if err := srv.Swap(parse("2")); err != nil {
		t.Fatal(err)
	}
	expect("after the reload", `sluice_deny_cache_entries 0`, `sluice_deny_cache_hits_total 2`)
	for i, want := range []bool{true, false, false} {
		if got := decide(); got != want {
			t.Fatalf("after the reload, request %d: allowed %v, want %v", i+1, got, want)
		}
	}
	expect("after the reload", `sluice_deny_cache_entries 1`, `sluice_deny_cache_hits_total 3`, `sluice_deny_cache_misses_total 4`)

	// Without Options.DenyCache: no cache, every request asks the store.
	off, err := New(st, parse("1"), Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if p := off.Config().Policies[0]; p.CacheDenials {
		t.Error("a policy caches its denials without Options.DenyCache")
	}

	// A policy with deny_cache: false asks the store every time.
	optOut := parseConfig(t, "policies:\n  - name: api\n    deny_cache: false\n    limits: [{name: per-ip, by: [ip], limit: 1, window: 1m}]\n")
	if err := srv.Swap(optOut); err != nil {
		t.Fatal(err)
	}
	calls := st.calls
	for range 3 {
		decide()
	}
	if st.calls != calls+3 || srv.Config().Policies[0].CacheDenials {
		t.Errorf("deny_cache: false: %d store calls for three denials, want 3", st.calls-calls)
	}
}
