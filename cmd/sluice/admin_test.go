package main

import (
	"net/http"
	"strings"
	"testing"
)

// TestServeAdmin runs sluice serve with --admin and a token from the
// environment: the admin listener refuses requests without the token and
// serves the view with it; the public listener serves none of the view.
func TestServeAdmin(t *testing.T) {
	t.Setenv(adminTokenEnv, "e2e-token") // inherited by the child process
	file := writeFile(t, t.TempDir(), "sluice.yaml", e2eConfig)
	p := startServe(t, file, "--admin", "127.0.0.1:0")
	admin := p.adminAddr()
	p.mu.Lock()
	for _, rec := range p.logs {
		if rec["msg"] == "sluice serving" && rec["admin_token"] != true {
			t.Errorf("serving record %v does not say a token is required", rec)
		}
	}
	p.mu.Unlock()
	var d struct{ Allowed bool }
	p.post("/v1/decide", `{"policy":"notify","attributes":{"category":"c"}}`, &d)
	get := func(url, token string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	for _, path := range []string{"/", "/api/v1/config", "/api/v1/rates", "/metrics", "/debug/pprof/"} {
		if got := get("http://"+admin+path, ""); got != 401 {
			t.Errorf("admin GET %s without the token = %d, want 401", path, got)
		}
		if got := get("http://"+admin+path, "wrong"); got != 401 {
			t.Errorf("admin GET %s with a wrong token = %d, want 401", path, got)
		}
		if got := get("http://"+admin+path, "e2e-token"); got != 200 {
			t.Errorf("admin GET %s with the token = %d, want 200", path, got)
		}
	}
	for _, path := range []string{"/", "/app.js", "/api/v1/config", "/api/v1/denied", "/debug/pprof/"} {
		if got := get(strings.TrimSuffix(p.HTTP, "/")+path, "e2e-token"); got != 404 {
			t.Errorf("public GET %s = %d, want 404", path, got)
		}
	}
}

func TestAdminAddr(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{":9464": "127.0.0.1:9464", "0.0.0.0:9464": "0.0.0.0:9464", "[::1]:1": "[::1]:1"} {
		if got := adminAddr(in); got != want {
			t.Errorf("adminAddr(%q) = %q, want %q", in, got, want)
		}
	}
}

// adminAddr returns the admin listener's address from the server's
// "sluice serving" log record.
func (p *serveProc) adminAddr() string {
	p.t.Helper()
	p.mu.Lock()
	addr := ""
	for _, rec := range p.logs {
		if a, _ := rec["admin"].(string); rec["msg"] == "sluice serving" && a != "" {
			addr = a
		}
	}
	p.mu.Unlock()
	if addr == "" {
		p.t.Fatalf("no admin address in the logs:\n%s", p.logText())
	}
	return addr
}
