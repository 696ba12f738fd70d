package httplimit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/edge/edgetest"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/storetest"
)

// env is a middleware over a memory store with a manual clock.
type env struct {
	clock *storetest.Clock
	lim   *sluice.Limiter
}

func newEnv(t *testing.T) *env {
	t.Helper()
	clock := storetest.NewClock(storetest.T0)
	store := memstore.New(memstore.Config{Clock: clock.Now})
	t.Cleanup(func() { _ = store.Close() })
	return &env{clock: clock, lim: sluice.NewLimiter(store, sluice.Config{})}
}

func perIP(limit int64, window time.Duration) *sluice.Policy {
	return &sluice.Policy{Name: "api", Rules: []sluice.Rule{
		{Name: "per-ip", By: []string{"ip"}, Limit: limit, Window: window},
	}}
}

func mustNew(t *testing.T, cfg Config) *Middleware {
	t.Helper()
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustResolver(t *testing.T, cfg IPConfig) *IPResolver {
	t.Helper()
	r, err := NewIPResolver(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	_, _ = w.Write([]byte("ok"))
})

// do sends one request from peer through h and returns the response.
func do(h http.Handler, peer string, header map[string]string) *http.Response {
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.RemoteAddr = peer
	for k, v := range header {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

// problem decodes a problem+json response body.
func problem(t *testing.T, resp *http.Response) Problem {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type = %q, want application/problem+json", ct)
	}
	var p Problem
	if err := json.NewDecoder(resp.Body).Decode(&p); err != nil {
		t.Fatalf("problem body: %v", err)
	}
	return p
}

func TestMiddlewareAllowsThenDenies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	res := mustResolver(t, IPConfig{})
	m := mustNew(t, Config{Limiter: e.lim, Policies: []*sluice.Policy{perIP(3, 10*time.Second)},
		Keys: map[string]KeyFunc{"ip": res.Key}})
	h := m.Handler(ok)

	for i := range 3 {
		resp := do(h, "203.0.113.7:1000", nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: status %d, want 200", i, resp.StatusCode)
		}
		items := parseField(t, resp.Header, HeaderRateLimit)
		if got, want := items[0].params["r"], int64(2-i); got != want {
			t.Errorf("request %d: r = %d, want %d", i, got, want)
		}
		e.clock.Advance(time.Second)
	}
	resp := do(h, "203.0.113.7:1000", nil)
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("4th request: status %d, want 429", resp.StatusCode)
	}
	// The first entry, 3 s old, leaves the 10 s window in 7 s.
	if got := resp.Header.Get(HeaderRetryAfter); got != "7" {
		t.Errorf("Retry-After = %q, want 7", got)
	}
	items := parseField(t, resp.Header, HeaderRateLimit)
	if items[0].name != "per-ip" || items[0].params["r"] != 0 || items[0].params["t"] != 7 {
		t.Errorf("RateLimit = %+v, want per-ip r=0 t=7", items)
	}
	policy := parseField(t, resp.Header, HeaderRateLimitPolicy)
	if policy[0].params["q"] != 3 || policy[0].params["w"] != 10 {
		t.Errorf("RateLimit-Policy = %+v, want per-ip q=3 w=10", policy)
	}
	p := problem(t, resp)
	if p.Type != QuotaExceededType || p.Status != 429 || len(p.ViolatedPolicies) != 1 || p.ViolatedPolicies[0] != "per-ip" {
		t.Errorf("problem = %+v, want quota-exceeded listing per-ip", p)
	}

	// Another client is not affected.
	if resp := do(h, "203.0.113.8:1000", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("other client: status %d, want 200", resp.StatusCode)
	}
	// Once the oldest entry leaves the window, the client passes again.
	e.clock.Advance(7 * time.Second)
	if resp := do(h, "203.0.113.7:1000", nil); resp.StatusCode != http.StatusOK {
		t.Errorf("after the window slid: status %d, want 200", resp.StatusCode)
	}
}

func TestMiddlewareClientIdentity(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		cfg      IPConfig
		requests [][2]string // peer, X-Forwarded-For
		want     []int
	}{
		{
			name: "spoofed X-Forwarded-For from an untrusted peer shares the peer's limit",
			cfg:  IPConfig{TrustedProxies: prefixes("10.0.0.0/8")},
			requests: [][2]string{
				{"203.0.113.7:1", "198.51.100.1"},
				{"203.0.113.7:2", "198.51.100.2"},
				{"203.0.113.7:3", "198.51.100.3"},
			},
			want: []int{200, 200, 429},
		},
		{
			name: "clients behind two trusted proxies are told apart",
			cfg:  IPConfig{TrustedProxies: prefixes("10.0.0.1/32", "10.0.0.2/32")},
			requests: [][2]string{
				{"10.0.0.1:1", "198.51.100.1, 10.0.0.2"},
				{"10.0.0.1:1", "6.6.6.6, 198.51.100.1, 10.0.0.2"},
				{"10.0.0.1:1", "198.51.100.2, 10.0.0.2"},
				{"10.0.0.1:1", "7.7.7.7, 198.51.100.1, 10.0.0.2"},
			},
			want: []int{200, 200, 200, 429},
		},
		{
			name: "IPv6 rotation inside one /64 shares a limit",
			requests: [][2]string{
				{"[2001:db8:1:2::1]:1", ""},
				{"[2001:db8:1:2:ffff:ffff:ffff:ffff]:1", ""},
				{"[2001:db8:1:2:dead:beef::9]:1", ""},
				{"[2001:db8:1:3::1]:1", ""},
			},
			want: []int{200, 200, 429, 200},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			res := mustResolver(t, c.cfg)
			h := mustNew(t, Config{Limiter: e.lim, Policies: []*sluice.Policy{perIP(2, time.Minute)},
				Keys: map[string]KeyFunc{"ip": res.Key}}).Handler(ok)
			for i, r := range c.requests {
				var hdr map[string]string
				if r[1] != "" {
					hdr = map[string]string{"X-Forwarded-For": r[1]}
				}
				if got := do(h, r[0], hdr).StatusCode; got != c.want[i] {
					t.Errorf("request %d (%s, %q): status %d, want %d", i, r[0], r[1], got, c.want[i])
				}
			}
		})
	}
}

func TestMiddlewareShadowNeverDenies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	shadow := perIP(1, time.Minute)
	shadow.Shadow = true
	var logs bytes.Buffer
	h := mustNew(t, Config{
		Limiter: e.lim, Policies: []*sluice.Policy{shadow},
		Keys:   map[string]KeyFunc{"ip": mustResolver(t, IPConfig{}).Key},
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	}).Handler(ok)
	for i := range 3 {
		resp := do(h, "203.0.113.7:1", nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: status %d, want 200 under a shadow policy", i, resp.StatusCode)
		}
		if got := parseField(t, resp.Header, HeaderRateLimit)[0].params["r"]; got != 0 {
			t.Errorf("request %d: r = %d, want 0", i, got)
		}
		if got := resp.Header.Get(HeaderRetryAfter); got != "" {
			t.Errorf("request %d: Retry-After %q on a served response", i, got)
		}
	}
	if !strings.Contains(logs.String(), "shadow policy would deny") {
		t.Errorf("no shadow log line in %q", logs.String())
	}
}

// failingStore is a store whose every decision fails.
type failingStore = edgetest.FailingStore

func TestMiddlewareStoreFailure(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		onError sluice.OnError
		want    int
	}{
		{"deny answers 503", sluice.Deny, http.StatusServiceUnavailable},
		{"allow serves", sluice.Allow, http.StatusOK},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var logs bytes.Buffer
			lim := sluice.NewLimiter(failingStore{}, sluice.Config{OnError: c.onError})
			h := mustNew(t, Config{
				Limiter: lim, Policies: []*sluice.Policy{perIP(1, time.Minute)},
				Keys:   map[string]KeyFunc{"ip": mustResolver(t, IPConfig{}).Key},
				Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			}).Handler(ok)
			resp := do(h, "203.0.113.7:1", nil)
			if resp.StatusCode != c.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, c.want)
			}
			if got := resp.Header.Get(HeaderDegraded); got != "1" {
				t.Errorf("Sluice-Degraded = %q, want 1", got)
			}
			if c.want == http.StatusServiceUnavailable {
				body, _ := json.Marshal(problem(t, resp))
				if strings.Contains(string(body), "redis") || strings.Contains(string(body), "10.1.2.3") {
					t.Errorf("503 body %s leaks the store error", body)
				}
			}
			if !strings.Contains(logs.String(), "connection refused") {
				t.Errorf("store error not logged: %q", logs.String())
			}
		})
	}
}

func TestMiddlewareFallbackDenialIsQuota(t *testing.T) {
	t.Parallel()
	fallback := memstore.New(memstore.Config{Clock: storetest.NewClock(storetest.T0).Now})
	lim := sluice.NewLimiter(failingStore{}, sluice.Config{Fallback: fallback, Breaker: sluice.Breaker{Failures: -1}})
	h := mustNew(t, Config{Limiter: lim, Policies: []*sluice.Policy{perIP(1, time.Minute)},
		Keys: map[string]KeyFunc{"ip": mustResolver(t, IPConfig{}).Key}}).Handler(ok)
	if resp := do(h, "203.0.113.7:1", nil); resp.StatusCode != http.StatusOK || resp.Header.Get(HeaderDegraded) != "1" {
		t.Fatalf("first: status %d, Sluice-Degraded %q; want 200 and 1", resp.StatusCode, resp.Header.Get(HeaderDegraded))
	}
	resp := do(h, "203.0.113.7:1", nil)
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("second: status %d, want 429 from the fallback store's denial", resp.StatusCode)
	}
	if resp.Header.Get(HeaderDegraded) != "1" || resp.Header.Get(HeaderRetryAfter) != "60" {
		t.Errorf("Sluice-Degraded %q, Retry-After %q; want 1 and 60", resp.Header.Get(HeaderDegraded), resp.Header.Get(HeaderRetryAfter))
	}
	if p := problem(t, resp); p.Type != QuotaExceededType {
		t.Errorf("problem type %q, want quota-exceeded", p.Type)
	}
}

func TestMiddlewareShadowSurvivesStoreFailure(t *testing.T) {
	t.Parallel()
	shadow := perIP(1, time.Minute)
	shadow.Shadow = true
	lim := sluice.NewLimiter(failingStore{}, sluice.Config{OnError: sluice.Deny})
	h := mustNew(t, Config{Limiter: lim, Policies: []*sluice.Policy{shadow},
		Keys: map[string]KeyFunc{"ip": mustResolver(t, IPConfig{}).Key}}).Handler(ok)
	resp := do(h, "203.0.113.7:1", nil)
	if resp.StatusCode != http.StatusOK || resp.Header.Get(HeaderDegraded) != "1" {
		t.Errorf("status %d, Sluice-Degraded %q; want 200 and 1: a shadow policy never denies", resp.StatusCode, resp.Header.Get(HeaderDegraded))
	}
}

func TestMiddlewareKeyError(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	policy := &sluice.Policy{Name: "api", Rules: []sluice.Rule{
		{Name: "per-key", By: []string{"key"}, Limit: 1, Window: time.Minute},
	}}
	h := mustNew(t, Config{Limiter: e.lim, Policies: []*sluice.Policy{policy},
		Keys: map[string]KeyFunc{"key": Header("X-API-Key")}}).Handler(ok)
	resp := do(h, "203.0.113.7:1", nil)
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("no API key: status %d, want 400", resp.StatusCode)
	}
	if p := problem(t, resp); !strings.Contains(p.Detail, `"key"`) {
		t.Errorf("problem detail %q does not name the attribute", p.Detail)
	}

	var gotErr error
	h = mustNew(t, Config{Limiter: e.lim, Policies: []*sluice.Policy{policy},
		Keys: map[string]KeyFunc{"key": Header("X-API-Key")},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			gotErr = err
			w.WriteHeader(http.StatusUnauthorized)
		}}).Handler(ok)
	if resp := do(h, "203.0.113.7:1", nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("custom error handler: status %d, want 401", resp.StatusCode)
	}
	var kerr *KeyError
	if !errors.As(gotErr, &kerr) || kerr.Attribute != "key" || !errors.Is(gotErr, ErrMissingKey) {
		t.Errorf("error handler got %v, want a *KeyError for key wrapping ErrMissingKey", gotErr)
	}
}

func TestMiddlewareCustomDeny(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	var got Denial
	h := mustNew(t, Config{Limiter: e.lim, Policies: []*sluice.Policy{perIP(1, time.Minute)},
		Keys:          map[string]KeyFunc{"ip": mustResolver(t, IPConfig{}).Key},
		LegacyHeaders: true,
		DenyHandler: func(w http.ResponseWriter, r *http.Request, d Denial) {
			got = d
			http.Error(w, "slow down", http.StatusServiceUnavailable)
		}}).Handler(ok)
	do(h, "203.0.113.7:1", nil)
	resp := do(h, "203.0.113.7:1", nil)
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want the custom 503", resp.StatusCode)
	}
	if got.Policy == nil || got.Policy.Name != "api" || got.Decision.DeniedBy != "per-ip" {
		t.Errorf("denial = %+v, want policy api denied by per-ip", got)
	}
	for _, name := range []string{HeaderRetryAfter, HeaderRateLimit, HeaderLimit} {
		if resp.Header.Get(name) == "" {
			t.Errorf("custom deny response lacks %s", name)
		}
	}
}

func TestMiddlewareSeveralPolicies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	route := &sluice.Policy{Name: "route", Rules: []sluice.Rule{
		{Name: "per-route", By: []string{"route"}, Limit: 100, Window: time.Minute},
	}}
	user := &sluice.Policy{Name: "user", Rules: []sluice.Rule{
		{Name: "per-user", By: []string{"user"}, Limit: 1, Window: time.Minute},
	}}
	mw := mustNew(t, Config{Limiter: e.lim, Policies: []*sluice.Policy{user, route},
		Keys: map[string]KeyFunc{"route": Route, "user": PathValue("user")}})
	mux := http.NewServeMux()
	mux.Handle("GET /users/{user}/items", mw.Handler(ok))
	mux.Handle("GET /users/{user}/orders", mw.Handler(ok))

	get := func(path string) *http.Response {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Result()
	}
	resp := get("/users/ann/items")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("first: status %d", resp.StatusCode)
	}
	limits := parseField(t, resp.Header, HeaderRateLimit)
	if len(limits) != 2 || limits[0].name != "per-user" || limits[1].name != "per-route" || limits[1].params["r"] != 99 {
		t.Errorf("RateLimit items = %+v, want per-user then per-route with r=99", limits)
	}
	if p := parseField(t, resp.Header, HeaderRateLimitPolicy); len(p) != 2 {
		t.Errorf("RateLimit-Policy items = %+v, want 2", p)
	}
	// Denied by the first policy: the second records nothing.
	if resp := get("/users/ann/items"); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("second: status %d, want 429", resp.StatusCode)
	}
	// A peek counts the request it would admit: 1 used, and itself.
	d, err := e.lim.Peek(context.Background(), route, map[string]string{"route": "GET /users/{user}/items"}, 1)
	if err != nil || d.Limits()[0].Used != 2 {
		t.Errorf("per-route used %d (%v), want 1: a denied request must not reach later policies", d.Limits()[0].Used-1, err)
	}
	// Other users pass; the route window counts every user.
	if resp := get("/users/bob/items"); resp.StatusCode != http.StatusOK {
		t.Errorf("bob: status %d", resp.StatusCode)
	}
	d, _ = e.lim.Peek(context.Background(), route, map[string]string{"route": "GET /users/{user}/items"}, 1)
	if d.Limits()[0].Used != 3 {
		t.Errorf("per-route used %d, want 2", d.Limits()[0].Used-1)
	}
}

func TestRouteWithoutPattern(t *testing.T) {
	t.Parallel()
	if _, err := Route(httptest.NewRequest(http.MethodGet, "/", nil)); !errors.Is(err, ErrMissingKey) {
		t.Errorf("Route of an unrouted request: %v, want ErrMissingKey", err)
	}
}

type userKey struct{}

type userID string

func (u userID) String() string { return string(u) }

func TestKeyFuncs(t *testing.T) {
	t.Parallel()
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.Header.Set("x-api-key", "k1")
	ctx := context.WithValue(req.Context(), userKey{}, "ann")
	withUser := req.WithContext(ctx)
	withStringer := req.WithContext(context.WithValue(req.Context(), userKey{}, userID("bob")))
	cases := []struct {
		name string
		fn   KeyFunc
		req  *http.Request
		want string // "" means an error wrapping ErrMissingKey
	}{
		{"header", Header("X-Api-Key"), req, "k1"},
		{"header missing", Header("Authorization"), req, ""},
		{"context string", ContextValue(userKey{}), withUser, "ann"},
		{"context stringer", ContextValue(userKey{}), withStringer, "bob"},
		{"context missing", ContextValue(userKey{}), req, ""},
		{"path value missing", PathValue("user"), req, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := c.fn(c.req)
			if c.want == "" {
				if !errors.Is(err, ErrMissingKey) {
					t.Errorf("got %q, %v; want an error wrapping ErrMissingKey", got, err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Errorf("got %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

func TestNewErrors(t *testing.T) {
	t.Parallel()
	lim := sluice.NewLimiter(memstore.New(memstore.Config{}), sluice.Config{})
	keys := map[string]KeyFunc{"ip": mustResolver(t, IPConfig{}).Key}
	other := &sluice.Policy{Name: "other", Rules: []sluice.Rule{{Name: "per-ip", By: []string{"ip"}, Limit: 1, Window: time.Second}}}
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no limiter", Config{Policies: []*sluice.Policy{perIP(1, time.Second)}, Keys: keys}, "Limiter is nil"},
		{"no policies", Config{Limiter: lim, Keys: keys}, "Policies is empty"},
		{"nil policy", Config{Limiter: lim, Policies: []*sluice.Policy{nil}, Keys: keys}, "Policies[0] is nil"},
		{"invalid policy", Config{Limiter: lim, Policies: []*sluice.Policy{perIP(-1, time.Second)}, Keys: keys}, "limit -1 is negative"},
		{"duplicate policy", Config{Limiter: lim, Policies: []*sluice.Policy{perIP(1, time.Second), perIP(2, time.Second)}, Keys: keys}, "listed twice"},
		{"duplicate rule name", Config{Limiter: lim, Policies: []*sluice.Policy{perIP(1, time.Second), other}, Keys: keys}, `rule name "per-ip" is used by policies`},
		{"missing key function", Config{Limiter: lim, Policies: []*sluice.Policy{perIP(1, time.Second)}}, `attribute "ip", which has no function`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := New(c.cfg)
			if err == nil || !strings.HasPrefix(err.Error(), "httplimit: ") || !strings.Contains(err.Error(), c.want) {
				t.Errorf("New error = %v, want one starting with httplimit: and containing %q", err, c.want)
			}
		})
	}
}
