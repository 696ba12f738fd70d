package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// requireCaddy returns the path of caddy. When it is missing the test is
// skipped, except under CI, where make deps must have installed it.
func requireCaddy(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("caddy")
	if err == nil {
		return path
	}
	if os.Getenv("CI") != "" {
		t.Fatal("caddy is not installed and CI is set; make deps installs it (apt-get install -y caddy)")
	}
	t.Skip("caddy is not installed; make deps installs it (apt-get install -y caddy)")
	return ""
}

// freeAddr returns a loopback address that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestCaddyForwardAuth runs Caddy with forward_auth to sluice serve in
// front of a backend: the first requests of a client reach the backend, then
// Caddy answers 429 with Retry-After from sluice.
func TestCaddyForwardAuth(t *testing.T) {
	t.Parallel()
	caddy := requireCaddy(t)
	dir := t.TempDir()
	file := writeFile(t, dir, "sluice.yaml", e2eConfig) // edge: 3 per IP per minute
	p := startServe(t, file)

	var hits atomic.Int64
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "backend\n")
	}))
	defer backend.Close()

	addr := freeAddr(t)
	caddyfile := writeFile(t, dir, "Caddyfile", fmt.Sprintf(`{
	admin off
	auto_https off
}

http://%s {
	forward_auth %s {
		uri /v1/forward-auth?policy=edge
	}
	reverse_proxy %s
}
`, addr, strings.TrimPrefix(p.HTTP, "http://"), strings.TrimPrefix(backend.URL, "http://")))
	cmd := exec.Command(caddy, "run", "--config", caddyfile, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir, "XDG_CONFIG_HOME="+dir)
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	defer func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-exited:
			t.Fatalf("caddy exited:\n%s", logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("caddy did not listen on %s:\n%s", addr, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}

	for i := range 5 {
		res, err := httpClient.Get("http://" + addr + "/orders?page=1")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if i < 3 {
			if res.StatusCode != 200 || string(body) != "backend\n" {
				t.Fatalf("request %d = %d %q, want the backend's answer", i, res.StatusCode, body)
			}
			continue
		}
		if res.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("request %d = %d %q, want 429", i, res.StatusCode, body)
		}
		if ra := res.Header.Get("Retry-After"); ra == "" || ra == "0" {
			t.Errorf("request %d: Retry-After %q", i, ra)
		}
		if res.Header.Get("RateLimit") == "" || !strings.Contains(string(body), "quota-exceeded") {
			t.Errorf("request %d: headers %v body %s", i, res.Header, body)
		}
	}
	if got := hits.Load(); got != 3 {
		t.Errorf("the backend saw %d requests, want 3", got)
	}
}
