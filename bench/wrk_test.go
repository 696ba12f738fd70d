package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"
)

// TestRunWrkScript drives a test server with wrk and checks that every request
// it counted reached the server with the script's body.
func TestRunWrkScript(t *testing.T) {
	if _, err := exec.LookPath("wrk"); err != nil {
		t.Skip("wrk is not installed (make deps)")
	}
	const body = `[{"policy":"a]]b","attributes":{"x":"y"}}]`
	var got, bad atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got.Add(1)
		if r.Method != "POST" || string(b) != body || r.Header.Get("Content-Type") != "application/json" {
			bad.Add(1)
		}
		_, _ = w.Write([]byte("{}\n"))
	}))
	defer ts.Close()
	res, err := runWrkScript(t.Context(), wrkLoad{threads: 1, connections: 2, duration: time.Second}, ts.URL, luaPost(body))
	if err != nil {
		t.Fatal(err)
	}
	if res.requests == 0 || res.requests > got.Load() || bad.Load() != 0 || res.errors != 0 || res.non2xx != 0 {
		t.Errorf("wrk counted %+v; the server saw %d requests, %d of them not the script's", res, got.Load(), bad.Load())
	}
	if res.elapsed < 900*time.Millisecond || res.p50 <= 0 || res.p99 < res.p50 || res.perSecond() <= 0 {
		t.Errorf("figures %+v", res)
	}
}

func TestLuaString(t *testing.T) {
	for _, s := range []string{"", "a", "]]", "]=]", "x]==]y", "\nfirst"} {
		if got := luaString(s); len(got) < len(s)+5 {
			t.Errorf("luaString(%q) = %q", s, got)
		}
	}
}
