package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/redistest"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/store"
	"github.com/sluicerate/sluice/storetest"
)

// recorder is a sender that keeps what it was asked to deliver.
type recorder struct {
	mu   sync.Mutex
	sent []string
	fail bool
}

func (r *recorder) Send(_ context.Context, user, message string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail {
		return errors.New("provider down")
	}
	r.sent = append(r.sent, user+": "+message)
	return nil
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.sent)
}

// testLimiterConfig gives a store call 10 s instead of the default 50 ms:
// the first call to a Redis that the tests just started loads its scripts,
// and on a machine running every package's tests at once it took longer
// than 50 ms. The decisions are under test, not the latency.
var testLimiterConfig = sluice.Config{Timeout: 10 * time.Second}

type fixture struct {
	srv   *httptest.Server
	clock *storetest.Clock
	sent  *recorder
}

// startWith serves the push service over store, whose clock is clock.
func startWith(t *testing.T, store store.Store, clock *storetest.Clock) *fixture {
	t.Helper()
	t.Cleanup(func() { _ = store.Close() })
	sent := &recorder{}
	h, err := newServer(sluice.NewLimiter(store, testLimiterConfig), sent, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return &fixture{srv: srv, clock: clock, sent: sent}
}

func startMemory(t *testing.T) *fixture {
	t.Helper()
	clock := storetest.NewClock(storetest.T0)
	return startWith(t, memstore.New(memstore.Config{Clock: clock.Now}), clock)
}

func (f *fixture) push(t *testing.T, user, body string) *http.Response {
	t.Helper()
	resp, err := f.srv.Client().Post(f.srv.URL+"/v1/users/"+user+"/push", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

// limit returns the r and t parameters of the response's RateLimit item.
func limit(t *testing.T, resp *http.Response) (r, tt int64) {
	t.Helper()
	list, err := httpsfv.UnmarshalList(resp.Header.Values("RateLimit"))
	if err != nil || len(list) != 1 {
		t.Fatalf("RateLimit %q: %v", resp.Header.Values("RateLimit"), err)
	}
	item := list[0].(httpsfv.Item)
	rv, _ := item.Params.Get("r")
	tv, _ := item.Params.Get("t")
	return rv.(int64), tv.(int64)
}

const hi = `{"message":"hi"}`

// runScenario is the push notifier's behaviour, on whichever store f runs.
func runScenario(t *testing.T, f *fixture) {
	// Two notifications 50 ms apart: the second waits for the gap.
	if resp := f.push(t, "ann", hi); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("first: status %d, want 202", resp.StatusCode)
	}
	f.clock.Advance(50 * time.Millisecond)
	resp := f.push(t, "ann", hi)
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("50ms later: status %d, want 429", resp.StatusCode)
	}
	if got := resp.Header.Get("Retry-After"); got != "1" {
		t.Errorf("gap: Retry-After = %q, want 1", got)
	}
	if r, tt := limit(t, resp); r != 9 || tt != 1 {
		t.Errorf("gap: r=%d t=%d, want r=9 t=1", r, tt)
	}

	// Refused attempts are not counted: hammering during the gap does not
	// use up the quota.
	for range 5 {
		f.push(t, "ann", hi)
	}
	f.clock.Advance(50 * time.Millisecond)
	for i := range 9 {
		resp := f.push(t, "ann", hi)
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("notification %d: status %d, want 202", i+2, resp.StatusCode)
		}
		if r, _ := limit(t, resp); r != int64(8-i) {
			t.Errorf("notification %d: r = %d, want %d", i+2, r, 8-i)
		}
		f.clock.Advance(100 * time.Millisecond)
	}

	// Ten in the last minute: the eleventh, at T0+1s, waits until the
	// first (T0) leaves the window at T0+60s.
	resp = f.push(t, "ann", hi)
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("eleventh: status %d, want 429", resp.StatusCode)
	}
	if got := resp.Header.Get("Retry-After"); got != "59" {
		t.Errorf("eleventh: Retry-After = %q, want 59", got)
	}
	// Another user is not affected.
	if resp := f.push(t, "bob", hi); resp.StatusCode != http.StatusAccepted {
		t.Errorf("bob: status %d, want 202", resp.StatusCode)
	}
	f.clock.Set(storetest.T0.Add(time.Minute))
	if resp := f.push(t, "ann", hi); resp.StatusCode != http.StatusAccepted {
		t.Errorf("a minute after the first: status %d, want 202", resp.StatusCode)
	}
	if got := f.sent.count(); got != 12 {
		t.Errorf("delivered %d notifications, want 12", got)
	}
}

func TestPushMemory(t *testing.T) {
	runScenario(t, startMemory(t))
}

func TestPushRedis(t *testing.T) {
	server := redistest.Start(t)
	clock := storetest.NewClock(storetest.T0)
	store, err := redisstore.New(redisstore.Config{URL: "redis://" + server.Addr() + "/0", Clock: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	runScenario(t, startWith(t, store, clock))
}

func TestOpenStoreRedis(t *testing.T) {
	server := redistest.Start(t)
	if _, err := openStore("http://" + server.Addr()); err == nil {
		t.Error("openStore of an http:// URL succeeded, want an error")
	}
	store, err := openStore("redis://" + server.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	d, err := sluice.NewLimiter(store, testLimiterConfig).Allow(context.Background(), &pushPolicy, map[string]string{"user": "ann"})
	if err != nil || !d.Allowed {
		t.Errorf("first notification through Redis: %+v, %v", d, err)
	}
}

func TestPushBadRequests(t *testing.T) {
	t.Parallel()
	f := startMemory(t)
	for _, body := range []string{"", "{", `{"message":""}`, `{"message":"` + strings.Repeat("x", maxMessage+1) + `"}`} {
		if resp := f.push(t, "ann", body); resp.StatusCode != http.StatusBadRequest {
			t.Errorf("body of %d bytes: status %d, want 400", len(body), resp.StatusCode)
		}
	}
	// Malformed requests consumed nothing.
	resp := f.push(t, "ann", hi)
	if r, _ := limit(t, resp); resp.StatusCode != http.StatusAccepted || r != 9 {
		t.Errorf("first valid: status %d r=%d, want 202 r=9", resp.StatusCode, r)
	}
}

func TestPushProviderDown(t *testing.T) {
	t.Parallel()
	f := startMemory(t)
	f.sent.fail = true
	if resp := f.push(t, "ann", hi); resp.StatusCode != http.StatusBadGateway {
		t.Errorf("status %d, want 502", resp.StatusCode)
	}
}

// downStore is a store whose every decision fails.
type downStore struct{}

func (downStore) Decide(context.Context, *store.Request) error {
	return errors.New("connection refused")
}

func (downStore) Close() error { return nil }

func TestPushStoreDown(t *testing.T) {
	t.Parallel()
	f := startWith(t, downStore{}, nil)
	resp := f.push(t, "ann", hi)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Sluice-Degraded") != "1" {
		t.Errorf("status %d, Sluice-Degraded %q; want 503 and 1", resp.StatusCode, resp.Header.Get("Sluice-Degraded"))
	}
	if f.sent.count() != 0 {
		t.Error("a notification was delivered while the limiter was down")
	}
}
