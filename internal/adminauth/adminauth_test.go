package adminauth_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicerate/sluice/internal/adminauth"
)

func TestReadFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(content string) string {
		p := filepath.Join(dir, "tokens")
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ts, err := adminauth.ReadFile(write("# who access secret\n\noncall write s3cret-one\n  grafana read s3cret-two  \n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ts) != 2 || ts[0] != (adminauth.Token{Name: "oncall", Secret: "s3cret-one", Access: adminauth.Write}) ||
		ts[1] != (adminauth.Token{Name: "grafana", Secret: "s3cret-two", Access: adminauth.Read}) {
		t.Errorf("tokens %+v", ts)
	}
	for content, want := range map[string]string{
		"a write\n":                   "tokens:1: 2 fields",
		"a admin s\n":                 `tokens:1: access "admin" is neither read nor write`,
		"a read s1\na write s2\n":     `tokens:2: two tokens are named "a"`,
		"a read s1\nb write s1\n":     `tokens:2: tokens "a" and "b" have the same secret`,
		"# nothing but a comment\n\n": "holds no token",
	} {
		if _, err := adminauth.ReadFile(write(content)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want %q", content, err, want)
		}
	}
	if _, err := adminauth.ReadFile(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing file read without error")
	}
}

// TestRequire: no token or a wrong one is 401, a read token changing
// anything is 403, the key inspector's POST reads; the handler learns the
// token's name; ?token= sets the cookie, which then stands for the token.
func TestRequire(t *testing.T) {
	t.Parallel()
	ts := adminauth.Tokens{{Name: "oncall", Secret: "w", Access: adminauth.Write}, {Name: "viewer", Secret: "r", Access: adminauth.Read}}
	who := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(adminauth.Who(r))) })
	h := ts.Require("sluice_admin", who)
	do := func(method, path, auth string, cookie *http.Cookie) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		if cookie != nil {
			req.AddCookie(cookie)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for _, tc := range []struct {
		method, path, auth string
		code               int
		who                string
	}{
		{"GET", "/", "", 401, ""},
		{"GET", "/", "Bearer nope", 401, ""},
		{"GET", "/", "Basic w", 401, ""},
		{"GET", "/api/v1/config", "Bearer r", 200, "viewer"},
		{"POST", "/api/v1/inspect", "Bearer r", 200, "viewer"},
		{"PUT", "/api/v1/overrides", "Bearer r", 403, ""},
		{"POST", "/api/v1/envoy/reset", "Bearer r", 403, ""},
		{"DELETE", "/api/v1/overrides/x", "bearer w", 200, "oncall"},
	} {
		rec := do(tc.method, tc.path, tc.auth, nil)
		if rec.Code != tc.code || tc.code == 200 && rec.Body.String() != tc.who {
			t.Errorf("%s %s %q = %d %q, want %d %q", tc.method, tc.path, tc.auth, rec.Code, rec.Body, tc.code, tc.who)
		}
		if tc.code == 401 && rec.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("%s %s: 401 without WWW-Authenticate", tc.method, tc.path)
		}
	}
	rec := do("GET", "/?token=r&x=1", "", nil)
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/?x=1" {
		t.Fatalf("?token= = %d to %q, want 303 to /?x=1", rec.Code, rec.Header().Get("Location"))
	}
	cookie := rec.Result().Cookies()[0]
	if !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode {
		t.Errorf("cookie %+v, want HttpOnly, SameSite=Strict", cookie)
	}
	if rec := do("GET", "/", "", cookie); rec.Code != 200 || rec.Body.String() != "viewer" {
		t.Errorf("with the cookie = %d %q", rec.Code, rec.Body)
	}
	if rec := do("GET", "/?token=bad", "", nil); rec.Code != 401 {
		t.Errorf("?token=bad = %d, want 401", rec.Code)
	}
	open := adminauth.Tokens(nil).Require("c", who)
	req := httptest.NewRequest("PUT", "/api/v1/overrides", nil)
	rr := httptest.NewRecorder()
	open.ServeHTTP(rr, req)
	if rr.Code != 200 || rr.Body.String() != adminauth.Anonymous {
		t.Errorf("no tokens: %d %q, want anonymous allowed", rr.Code, rr.Body)
	}
}
