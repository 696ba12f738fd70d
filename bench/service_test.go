package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/sluicerate/sluice/internal/envoy"
)

// TestServiceKeyMix checks the key mix both clients send: 9,000 regular
// users and 10 heavy users who get a tenth of the requests, heavy users on
// route r0.
func TestServiceKeyMix(t *testing.T) {
	const keys = 10_000
	count := map[string]int{}
	for i := range keys {
		count[serviceUser(i)]++
		if u := serviceUser(i); strings.HasPrefix(u, "h") && serviceRoute(i) != "r0" {
			t.Errorf("index %d: heavy user %s on route %s, want r0", i, u, serviceRoute(i))
		}
	}
	heavy := 0
	for u, n := range count {
		if strings.HasPrefix(u, "h") {
			heavy += n
		} else if n != 1 {
			t.Errorf("user %s has %d indexes, want 1", u, n)
		}
	}
	if got, want := len(count), 9_000+serviceHeavyUsers; got != want {
		t.Errorf("%d users, want %d", got, want)
	}
	if got, want := heavy, keys/10; got != want {
		t.Errorf("heavy users have %d of %d indexes, want %d", got, keys, want)
	}
}

// TestServiceWrkBodies drives a test server with the wrk script of each
// domain and checks that every body it sent is, in protobuf's JSON
// mapping, the request the gRPC client sends for the index it names.
func TestServiceWrkBodies(t *testing.T) {
	if _, err := exec.LookPath("wrk"); err != nil {
		t.Skip("wrk is not installed (make deps)")
	}
	for _, dom := range serviceDomains() {
		t.Run(dom.name, func(t *testing.T) {
			var (
				mu     sync.Mutex
				bodies = map[string]bool{}
			)
			ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				bodies[r.Method+" "+r.URL.Path+" "+string(b)] = true
				mu.Unlock()
				if strings.Contains(string(b), `"value":"h`) { // a heavy user
					w.WriteHeader(http.StatusTooManyRequests)
				}
				_, _ = w.Write([]byte("{}\n"))
			}))
			defer ts.Close()
			l, err := runJSON(dom, strings.TrimPrefix(ts.URL, "http://"), 2, 1000, time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if l.requests == 0 || l.allowed == 0 || l.denied == 0 || l.failed != 0 {
				t.Errorf("runJSON measured %+v, want allowed and denied requests and no failures", l)
			}
			mu.Lock()
			defer mu.Unlock()
			for b := range bodies {
				mp, body, _ := strings.Cut(b, " /json ")
				if mp != "POST" {
					t.Errorf("request %q, want POST /json", b)
					continue
				}
				var got rlsv3.RateLimitRequest
				if err := protojson.Unmarshal([]byte(body), &got); err != nil {
					t.Errorf("body %s: %v", body, err)
					continue
				}
				i := indexOf(t, got.GetDescriptors()[0].GetEntries()[0].GetValue())
				if want := dom.request(i); !proto.Equal(&got, want) {
					t.Errorf("body %s\nwant %v", body, want)
				}
			}
		})
	}
}

// indexOf returns a key index whose user is user.
func indexOf(t *testing.T, user string) int {
	t.Helper()
	n, err := strconv.Atoi(user[1:])
	if err != nil {
		t.Fatalf("user %q", user)
	}
	if user[0] == 'h' {
		return 10 * n
	}
	return n
}

// TestServiceDomainKeys checks that each sluice contender's key lands in
// every limit of each domain's file, and that sluice reads it there: the
// files load, and a key sluice refuses makes them fail to.
func TestServiceDomainKeys(t *testing.T) {
	for _, c := range []string{"algorithm: gcra", "algorithm: sliding-counter", serviceBudget} {
		for _, d := range serviceDomains() {
			file := d.withKey(c)
			if got, want := strings.Count(file, c), strings.Count(d.yaml, "rate_limit:"); got != want || want == 0 {
				t.Errorf("domain %s with %q: %d limits carry it, want %d:\n%s", d.name, c, got, want, file)
			}
			if _, err := envoy.Parse([]envoy.Source{{Name: d.name + ".yaml", Data: []byte(file)}}, envoy.LoadOptions{}); err != nil {
				t.Errorf("domain %s with %q: %v", d.name, c, err)
			}
			bad := d.withKey("algorithm: nosuch")
			if _, err := envoy.Parse([]envoy.Source{{Name: d.name + ".yaml", Data: []byte(bad)}}, envoy.LoadOptions{}); err == nil {
				t.Errorf("domain %s with an unknown algorithm loads", d.name)
			}
		}
	}
}
