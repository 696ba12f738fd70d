package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The proxy tests run the set-ups of docs/proxies.md as written, with real
// Caddy and nginx in front of sluice serve and a backend: the policy, the
// Caddyfile and the nginx server block are read from the page, and only
// their addresses are changed. Each proxy lets a client's first 20 requests
// to a path through (the page's per-ip-path limit), then answers 429 with
// sluice's Retry-After and RateLimit.

// requireTool returns the path of the command name, from the Debian package
// pkg: on PATH, or in /usr/sbin (Debian's nginx), which a user's PATH may
// lack. When it is missing the test is skipped, except under CI, where make
// deps must have installed it.
func requireTool(t *testing.T, name, pkg string) string {
	t.Helper()
	for _, p := range []string{name, "/usr/sbin/" + name} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is not installed and CI is set; make deps installs it (apt-get install -y %s)", name, pkg)
	}
	t.Skipf("%s is not installed; make deps installs it (apt-get install -y %s)", name, pkg)
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

// proxySetup is docs/proxies.md's block of the language lang, its first,
// with each old string of replace (old, new, old, new...) replaced by the
// new one; the test fails when the page no longer has one of them.
func proxySetup(t *testing.T, lang string, replace ...string) string {
	t.Helper()
	page, err := os.ReadFile("../../docs/proxies.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```" + lang + "\n(.*?)```").FindSubmatch(page)
	if m == nil {
		t.Fatalf("docs/proxies.md has no %s block", lang)
	}
	block := string(m[1])
	for i := 0; i+1 < len(replace); i += 2 {
		if !strings.Contains(block, replace[i]) {
			t.Fatalf("docs/proxies.md's %s block no longer has %q; update %s", lang, replace[i], t.Name())
		}
		block = strings.ReplaceAll(block, replace[i], replace[i+1])
	}
	return block
}

// proxyRig is sluice serve with the page's policy, and a backend that counts
// the requests it is sent.
type proxyRig struct {
	dir     string
	sluice  string // sluice serve's HTTP host:port
	backend string // the backend's host:port
	hits    atomic.Int64
}

func newProxyRig(t *testing.T) *proxyRig {
	t.Helper()
	r := &proxyRig{dir: t.TempDir()}
	p := startServe(t, writeFile(t, r.dir, "sluice.yaml", proxySetup(t, "yaml")))
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		r.hits.Add(1)
		io.WriteString(w, "backend\n")
	}))
	t.Cleanup(backend.Close)
	r.sluice, r.backend = strings.TrimPrefix(p.HTTP, "http://"), strings.TrimPrefix(backend.URL, "http://")
	return r
}

// run starts the proxy cmd, waits until it listens on addr, and checks what
// a client of it sees; cmd is stopped when the test ends.
func (r *proxyRig) run(t *testing.T, cmd *exec.Cmd, addr string) {
	t.Helper()
	var logs strings.Builder
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			break
		}
		select {
		case <-exited:
			t.Fatalf("%s exited:\n%s", cmd.Path, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not listen on %s:\n%s", cmd.Path, addr, logs.String())
		}
	}

	const allowed = 20 // the page's per-ip-path limit
	for i := range allowed + 2 {
		res, err := httpClient.Get("http://" + addr + "/orders?page=1")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if i < allowed {
			if res.StatusCode != 200 || string(body) != "backend\n" {
				t.Fatalf("request %d = %d %q, want the backend's answer\n%s", i, res.StatusCode, body, logs.String())
			}
			continue
		}
		if res.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("request %d = %d %q, want 429\n%s", i, res.StatusCode, body, logs.String())
		}
		if ra := res.Header.Get("Retry-After"); ra == "" || ra == "0" {
			t.Errorf("request %d: Retry-After %q", i, ra)
		}
		if res.Header.Get("RateLimit") == "" || !strings.Contains(string(body), "quota-exceeded") {
			t.Errorf("request %d: headers %v body %s", i, res.Header, body)
		}
	}
	if got := r.hits.Load(); got != allowed {
		t.Errorf("the backend saw %d requests, want %d", got, allowed)
	}
}

// TestCaddyForwardAuth runs docs/proxies.md's Caddyfile.
func TestCaddyForwardAuth(t *testing.T) {
	t.Parallel()
	caddy := requireTool(t, "caddy", "caddy")
	r := newProxyRig(t)
	addr := freeAddr(t)
	site := proxySetup(t, "caddyfile",
		"example.com", "http://"+addr,
		"127.0.0.1:8080", r.sluice,
		"127.0.0.1:9000", r.backend)
	file := writeFile(t, r.dir, "Caddyfile", "{\n\tadmin off\n\tauto_https off\n}\n\n"+site)
	cmd := exec.Command(caddy, "run", "--config", file, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "HOME="+r.dir, "XDG_DATA_HOME="+r.dir, "XDG_CONFIG_HOME="+r.dir)
	r.run(t, cmd, addr)
}

// TestNginxForwardAuth runs docs/proxies.md's nginx server block, whose
// auth_request turns sluice's 403 (deny_status=403) into a 429.
func TestNginxForwardAuth(t *testing.T) {
	t.Parallel()
	nginx := requireTool(t, "nginx", "nginx")
	r := newProxyRig(t)
	addr := freeAddr(t)
	server := proxySetup(t, "nginx",
		"listen 80;", "listen "+addr+";",
		"127.0.0.1:8080", r.sluice,
		"127.0.0.1:9000", r.backend)
	// One process, as whoever runs the test, with every file under dir.
	conf := writeFile(t, r.dir, "nginx.conf", fmt.Sprintf(`daemon off;
master_process off;
pid %[1]s/nginx.pid;
error_log stderr;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
%[2]s}
`, r.dir, server))
	r.run(t, exec.Command(nginx, "-p", r.dir, "-e", filepath.Join(r.dir, "error.log"), "-c", conf), addr)
}
