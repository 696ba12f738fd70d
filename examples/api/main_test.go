package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/storetest"
)

// start runs the API over a memory store with a manual clock behind a real
// HTTP server.
func start(t *testing.T) (*httptest.Server, *storetest.Clock) {
	t.Helper()
	clock := storetest.NewClock(storetest.T0)
	store := memstore.New(memstore.Config{Clock: clock.Now})
	t.Cleanup(func() { _ = store.Close() })
	h, err := newServer(sluice.NewLimiter(store, sluice.Config{}), map[string]string{"k-alice": "alice", "k-bob": "bob"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, clock
}

func get(t *testing.T, srv *httptest.Server, key string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/v1/hello", nil)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("X-API-Key", key)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

// rateLimit parses the response's RateLimit field and returns the r and t
// parameters of its per-user item.
func rateLimit(t *testing.T, resp *http.Response) (r, tt int64) {
	t.Helper()
	list, err := httpsfv.UnmarshalList(resp.Header.Values("RateLimit"))
	if err != nil || len(list) != 1 {
		t.Fatalf("RateLimit %q: %v", resp.Header.Values("RateLimit"), err)
	}
	item := list[0].(httpsfv.Item)
	if item.Value != "per-user" {
		t.Fatalf("RateLimit item %v, want per-user", item.Value)
	}
	rv, _ := item.Params.Get("r")
	tv, _ := item.Params.Get("t")
	return rv.(int64), tv.(int64)
}

func TestAPIEndToEnd(t *testing.T) {
	srv, clock := start(t)

	// 100 requests spread over 5 s: all served, the quota counting down.
	for i := range 100 {
		resp := get(t, srv, "k-alice")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: status %d, want 200", i, resp.StatusCode)
		}
		if r, _ := rateLimit(t, resp); r != int64(99-i) {
			t.Fatalf("request %d: r = %d, want %d", i, r, 99-i)
		}
		clock.Advance(50 * time.Millisecond)
	}

	// At T0+5s the window is full: the rest are denied until the first
	// request, made at T0, leaves the 10 s window in 5 s.
	for i := range 5 {
		resp := get(t, srv, "k-alice")
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("extra request %d: status %d, want 429", i, resp.StatusCode)
		}
		if got := resp.Header.Get("Retry-After"); got != "5" {
			t.Errorf("extra request %d: Retry-After = %q, want 5", i, got)
		}
		if r, tt := rateLimit(t, resp); r != 0 || tt != 5 {
			t.Errorf("extra request %d: r=%d t=%d, want r=0 t=5", i, r, tt)
		}
		policy, err := httpsfv.UnmarshalList(resp.Header.Values("RateLimit-Policy"))
		if err != nil || len(policy) != 1 {
			t.Fatalf("RateLimit-Policy %q: %v", resp.Header.Values("RateLimit-Policy"), err)
		}
		q, _ := policy[0].(httpsfv.Item).Params.Get("q")
		w, _ := policy[0].(httpsfv.Item).Params.Get("w")
		if q != int64(100) || w != int64(10) {
			t.Errorf("RateLimit-Policy q=%v w=%v, want q=100 w=10", q, w)
		}
		if got := resp.Header.Get("X-RateLimit-Remaining"); got != "0" {
			t.Errorf("X-RateLimit-Remaining = %q, want 0", got)
		}
		var p httplimit.Problem
		if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
			t.Fatal(err)
		}
		if p.Type != httplimit.QuotaExceededType || len(p.ViolatedPolicies) != 1 || p.ViolatedPolicies[0] != "per-user" {
			t.Errorf("problem = %+v", p)
		}
	}

	// Bob has his own window.
	if resp := get(t, srv, "k-bob"); resp.StatusCode != http.StatusOK {
		t.Errorf("bob: status %d, want 200", resp.StatusCode)
	}

	// The window slides: at T0+10s the first request has left it, so one
	// more is served; the second left at T0+10.05s, and so on.
	clock.Set(storetest.T0.Add(10 * time.Second))
	if resp := get(t, srv, "k-alice"); resp.StatusCode != http.StatusOK {
		t.Fatalf("after the window slid: status %d, want 200", resp.StatusCode)
	}
	resp := get(t, srv, "k-alice")
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("second after the slide: status %d, want 429", resp.StatusCode)
	}
	if _, tt := rateLimit(t, resp); tt != 1 {
		t.Errorf("t = %d, want 1 (50ms rounded up)", tt)
	}
	clock.Advance(50 * time.Millisecond)
	if resp := get(t, srv, "k-alice"); resp.StatusCode != http.StatusOK {
		t.Errorf("50ms later: status %d, want 200", resp.StatusCode)
	}
	// After a whole quiet window everything is back.
	clock.Advance(10 * time.Second)
	resp = get(t, srv, "k-alice")
	if r, _ := rateLimit(t, resp); resp.StatusCode != http.StatusOK || r != 99 {
		t.Errorf("after a quiet window: status %d r=%d, want 200 r=99", resp.StatusCode, r)
	}
	body, _ := io.ReadAll(resp.Body)
	var hello map[string]string
	if err := json.Unmarshal(body, &hello); err != nil || hello["user"] != "alice" {
		t.Errorf("body %s: %v", body, err)
	}
}

func TestAPIRequiresKey(t *testing.T) {
	srv, _ := start(t)
	for _, key := range []string{"", "k-mallory"} {
		resp := get(t, srv, key)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("key %q: status %d, want 401", key, resp.StatusCode)
		}
		if resp.Header.Get("RateLimit") != "" {
			t.Errorf("key %q: RateLimit header on an unauthenticated request", key)
		}
	}
}

func TestParseKeys(t *testing.T) {
	t.Parallel()
	users, err := parseKeys("alice:k1, bob:k2")
	if err != nil || users["k1"] != "alice" || users["k2"] != "bob" {
		t.Errorf("parseKeys = %v, %v", users, err)
	}
	for _, bad := range []string{"", "alice", "alice:", ":k1", "alice:k1,bob:k1"} {
		if _, err := parseKeys(bad); err == nil {
			t.Errorf("parseKeys(%q) succeeded, want an error", bad)
		}
	}
}
