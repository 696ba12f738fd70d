package httplimit_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/memstore"
)

// A per-client limit of 2 requests per 10 seconds: the third request is
// denied with 429, Retry-After and the quota-exceeded problem.
func Example() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	store := memstore.New(memstore.Config{Clock: func() time.Time { return now }})
	lim := sluice.NewLimiter(store, sluice.Config{})

	clients, err := httplimit.NewIPResolver(httplimit.IPConfig{})
	if err != nil {
		panic(err)
	}
	mw, err := httplimit.New(httplimit.Config{
		Limiter: lim,
		Policies: []*sluice.Policy{{Name: "api", Rules: []sluice.Rule{
			{Name: "per-client", By: []string{"client"}, Limit: 2, Window: 10 * time.Second},
		}}},
		Keys: map[string]httplimit.KeyFunc{"client": clients.Key},
	})
	if err != nil {
		panic(err)
	}
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello\n")
	}))

	for range 3 {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		req.RemoteAddr = "203.0.113.7:4711"
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		fmt.Println(rec.Code, "RateLimit:", rec.Header().Get("RateLimit"))
		if ra := rec.Header().Get("Retry-After"); ra != "" {
			fmt.Println("    Retry-After:", ra)
			fmt.Println("    Content-Type:", rec.Header().Get("Content-Type"))
		}
		now = now.Add(time.Second)
	}
	// Output:
	// 200 RateLimit: "per-client";r=1;t=10
	// 200 RateLimit: "per-client";r=0;t=10
	// 429 RateLimit: "per-client";r=0;t=8
	//     Retry-After: 8
	//     Content-Type: application/problem+json
}

// Behind two proxies at 10.0.0.1 and 10.0.0.2, the client is the rightmost
// address of X-Forwarded-For that is not one of them; what the client wrote
// further left is ignored. IPv6 clients are grouped by /64.
func ExampleIPResolver() {
	clients, err := httplimit.NewIPResolver(httplimit.IPConfig{
		TrustedProxies: []netip.Prefix{
			netip.MustParsePrefix("10.0.0.1/32"),
			netip.MustParsePrefix("10.0.0.2/32"),
		},
	})
	if err != nil {
		panic(err)
	}
	req := httptest.NewRequest(http.MethodGet, "/", nil)
	req.RemoteAddr = "10.0.0.1:8080"
	req.Header.Set("X-Forwarded-For", "6.6.6.6, 2001:db8:1:2::99, 10.0.0.2")
	addr, _ := clients.Resolve(req)
	key, _ := clients.Key(req)
	fmt.Println(addr)
	fmt.Println(key)
	// Output:
	// 2001:db8:1:2::99
	// 2001:db8:1:2::/64
}

// WriteHeaders writes the rate-limit fields of a decision made outside the
// middleware.
func ExampleWriteHeaders() {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	lim := sluice.NewLimiter(memstore.New(memstore.Config{Clock: func() time.Time { return now }}), sluice.Config{})
	notify := &sluice.Policy{Name: "notify", Rules: []sluice.Rule{
		{Name: "global", Limit: 100, Window: 30 * time.Minute},
		{Name: "category", By: []string{"category"}, Limit: 10, Window: 30 * time.Minute},
	}}
	d, err := lim.Allow(context.Background(), notify, map[string]string{"category": "errors"})
	if err != nil {
		panic(err)
	}
	h := http.Header{}
	httplimit.WriteHeaders(h, d, httplimit.HeaderOptions{Legacy: true})
	for _, name := range []string{"RateLimit-Policy", "RateLimit", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"} {
		fmt.Printf("%s: %s\n", name, h.Get(name))
	}
	// Output:
	// RateLimit-Policy: "global";q=100;w=1800, "category";q=10;w=1800
	// RateLimit: "global";r=99;t=1800, "category";r=9;t=1800
	// X-RateLimit-Limit: 10
	// X-RateLimit-Remaining: 9
	// X-RateLimit-Reset: 1800
}
