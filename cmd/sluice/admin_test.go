package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/internal/server"
	"github.com/sluicerate/sluice/memstore"
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
	// sluice override without the token names the variable that holds it.
	code, _, errOut := runCLIEnv(t, []string{"SLUICE_ADMIN_URL=http://" + admin}, "override", "list")
	if code != exitUsage || !strings.Contains(errOut, "401") || !strings.Contains(errOut, "set SLUICE_ADMIN_TOKEN") || strings.Contains(errOut, "browser") {
		t.Errorf("sluice override list without the token: exit %d, %q; want 2 and SLUICE_ADMIN_TOKEN named", code, errOut)
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

// TestServeAdminRefusesOpenNetwork: sluice serve --admin 0.0.0.0:PORT
// without a token does not start, and says how to fix it.
func TestServeAdminRefusesOpenNetwork(t *testing.T) {
	t.Parallel()
	file := writeFile(t, t.TempDir(), "sluice.yaml", e2eConfig)
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()} // no SLUICE_ADMIN_*
	code, out, errOut := runCLIEnv(t, env, "serve", "--config", file, "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--admin", "0.0.0.0:0")
	if code != exitUsage {
		t.Fatalf("serve --admin 0.0.0.0:0 without a token: exit %d, want 2\n%s%s", code, out, errOut)
	}
	for _, fix := range []string{"no admin token is set", "SLUICE_ADMIN_TOKEN", "--admin-token-file", "--admin 127.0.0.1:9464", "--admin-trusted-network"} {
		if !strings.Contains(errOut, fix) {
			t.Errorf("the refusal does not name %q:\n%s", fix, errOut)
		}
	}
	t.Logf("sluice serve --admin 0.0.0.0:0 without a token: exit %d\n%s", code, errOut)
}

// TestServeAdminRoutesNeedToken runs sluice serve --admin 0.0.0.0:PORT with
// a write and a read token and sends every route of the admin listener (as
// its mux lists them, so that a route added later is checked too) without
// a token and with a wrong one: 401 each; a change with the read token:
// 403; with the write token: neither.
func TestServeAdminRoutesNeedToken(t *testing.T) {
	t.Parallel()
	cfg, err := config.Parse("sluice.yaml", []byte(e2eConfig))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(memstore.New(memstore.Config{}), cfg, server.Options{})
	if err != nil {
		t.Fatal(err)
	}
	patterns := srv.AdminHandler(server.AdminOptions{}).Patterns()
	for _, want := range []string{"GET /{$}", "GET /api/v1/config", "POST /api/v1/inspect", "GET /metrics", "GET /debug/pprof/",
		"POST /api/v1/envoy/reset", "GET /api/v1/overrides", "PUT /api/v1/overrides", "DELETE /api/v1/overrides/{id}",
		"POST /v1/credits", "GET /v1/usage", "GET /usage"} {
		if !slices.Contains(patterns, want) {
			t.Fatalf("the admin listener's routes %q lack %q", patterns, want)
		}
	}

	file := writeFile(t, t.TempDir(), "sluice.yaml", e2eConfig)
	p := startServeArgs(t, []string{adminTokenEnv + "=write-secret", adminReadTokenEnv + "=read-secret"},
		"--config", file, "--admin", "0.0.0.0:0")
	_, port, err := net.SplitHostPort(p.adminAddr())
	if err != nil {
		t.Fatal(err)
	}
	base := "http://127.0.0.1:" + port
	for _, pattern := range patterns {
		method, path, ok := strings.Cut(pattern, " ")
		if !ok {
			method, path = "GET", pattern
		}
		path = strings.NewReplacer("{$}", "", "{id}", "api:per-user:acme").Replace(path)
		if strings.HasPrefix(path, "/debug/pprof/") {
			path += "?seconds=1" // the profile and the trace, short
		}
		t.Run(pattern, func(t *testing.T) {
			for _, tc := range []struct {
				name   string
				header []string
				want   func(int) bool
			}{
				{"no token", nil, func(c int) bool { return c == 401 }},
				{"wrong token", []string{"Authorization", "Bearer nope"}, func(c int) bool { return c == 401 }},
				{"wrong cookie", []string{"Cookie", "sluice_admin=nope"}, func(c int) bool { return c == 401 }},
				{"read token", []string{"Authorization", "Bearer read-secret"}, func(c int) bool {
					// POST /v1/credits reads or changes by its body: {} changes nothing.
					if method == "GET" || pattern == "POST /api/v1/inspect" || pattern == "POST /v1/credits" {
						return c != 401 && c != 403
					}
					return c == 403
				}},
				{"write token", []string{"Authorization", "Bearer write-secret"}, func(c int) bool { return c != 401 && c != 403 }},
			} {
				r := request(t, method, base+path, "{}", tc.header...)
				if !tc.want(r.Status) {
					t.Errorf("%s %s with %s = %d %s", method, path, tc.name, r.Status, r.Body)
				}
				if r.Status == 401 && (strings.Contains(string(r.Body), "secret") || r.Header.Get("WWW-Authenticate") == "") {
					t.Errorf("%s %s with %s: a 401 without a Bearer challenge, or showing a token: %v %s", method, path, tc.name, r.Header, r.Body)
				}
			}
		})
	}
	t.Logf("%d admin routes, each 401 without a token: %s", len(patterns), strings.Join(patterns, ", "))
}

// TestAdminTokensFromFlagsAndEnvironment: the admin tokens of sluice
// serve come from a token file, the flags and the environment, the flags
// before the environment, and a token listed twice is refused.
func TestAdminTokensFromFlagsAndEnvironment(t *testing.T) {
	t.Parallel()
	file := writeFile(t, t.TempDir(), "tokens", "# who access secret\noncall write w-1\ngrafana read r-1\n")
	env := map[string]string{adminTokenEnv: "env-write", adminReadTokenEnv: "env-read", adminTokenFileEnv: file}
	for _, tc := range []struct {
		name string
		args []string
		want string // name:access:secret, in order
		err  string
	}{
		{"environment", nil, "oncall:write:w-1 grafana:read:r-1 admin:write:env-write read:read:env-read", ""},
		{"flags first", []string{"--admin-token", "flag-write"}, "oncall:write:w-1 grafana:read:r-1 admin:write:flag-write read:read:env-read", ""},
		{"a secret twice", []string{"--admin-read-token", "w-1"}, "", `tokens "oncall" and "read" have the same secret`},
		{"no file", []string{"--admin-token-file", file + ".missing"}, "", "admin token file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := newFlagSet("serve", io.Discard)
			af := addAdminFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			ts, err := af.tokens(func(k string) string { return env[k] })
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("tokens = %v, %v; want an error with %q", ts, err, tc.err)
				}
				return
			}
			var got []string
			for _, tok := range ts {
				got = append(got, tok.Name+":"+tok.Access.String()+":"+tok.Secret)
			}
			if err != nil || strings.Join(got, " ") != tc.want {
				t.Errorf("tokens = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
