package server

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sluicerate/sluice/internal/adminauth"
	"github.com/sluicerate/sluice/memstore"
)

// TestQuotaAuthorization: the public listener serves credits and usage
// only with the admin tokens (as a bearer token; no cookie), refusing them
// when the server has none; the admin listener under its own tokens; a
// change needs a write token, a read a read token, and the answers are
// the admin listener's.
func TestQuotaAuthorization(t *testing.T) {
	st := memstore.New(memstore.Config{Clock: func() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }})
	t.Cleanup(func() { st.Close() })
	tokens := adminauth.Tokens{{Name: "ops", Secret: "w-secret", Access: adminauth.Write}, {Name: "viewer", Secret: "r-secret", Access: adminauth.Read}}
	open := serverFor(t, st, testConfig, Options{})
	guarded := serverFor(t, st, testConfig, Options{AdminTokens: tokens})
	const (
		get = `{"policy":"notify","attributes":{"category":"a"},"op":"get"}`
		add = `{"policy":"notify","attributes":{"category":"a"},"op":"add","amount":5,"id":"inv-1"}`
	)
	for _, tc := range []struct {
		name         string
		h            *Server
		admin        bool // the admin listener's handler
		method, path string
		body         string
		header       []string
		status       int
		detail       string
	}{
		{"public, no tokens: credits refused", open, false, "POST", "/v1/credits", get, nil, 403, "needs an admin token, and this server has none"},
		{"public, no tokens: usage refused", open, false, "GET", "/v1/usage?policy=notify", "", nil, 403, "SLUICE_ADMIN_TOKEN"},
		{"public: no token", guarded, false, "POST", "/v1/credits", get, nil, 401, "Authorization: Bearer"},
		{"public: a wrong token", guarded, false, "POST", "/v1/credits", get, []string{"Authorization", "Bearer nope"}, 401, "does not carry an admin token"},
		{"public: the cookie is not taken", guarded, false, "POST", "/v1/credits", get, []string{"Cookie", "sluice_admin=w-secret"}, 401, ""},
		{"public: a read token may not add", guarded, false, "POST", "/v1/credits", add, []string{"Authorization", "Bearer r-secret"}, 403, `the admin token "viewer" may read, not change`},
		{"public: a read token may get", guarded, false, "POST", "/v1/credits", get, []string{"Authorization", "Bearer r-secret"}, 400, `policy "notify" has no credits rule`},
		{"public: a write token may add", guarded, false, "POST", "/v1/credits", add, []string{"Authorization", "Bearer w-secret"}, 400, `policy "notify" has no credits rule`},
		{"public: a read token may read usage", guarded, false, "GET", "/v1/usage?policy=notify&category=a", "", []string{"Authorization", "Bearer r-secret"}, 400, `policy "notify" has no calendar quota`},
		{"admin, no tokens: anyone", open, true, "POST", "/v1/credits", add, nil, 400, `policy "notify" has no credits rule`},
		{"admin: no token", guarded, true, "GET", "/v1/usage?policy=notify", "", nil, 401, ""},
		{"admin: a read token may not set", guarded, true, "POST", "/v1/credits", strings.Replace(add, `"add"`, `"set"`, 1), []string{"Authorization", "Bearer r-secret"}, 403, "may read, not change"},
		{"admin: a read token may get", guarded, true, "POST", "/v1/credits", get, []string{"Authorization", "Bearer r-secret"}, 400, "no credits rule"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.h.Handler()
			if tc.admin {
				h = tc.h.AdminHandler(AdminOptions{Tokens: tokensOf(tc.h)})
			}
			r := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
			for i := 0; i+1 < len(tc.header); i += 2 {
				r.Header.Set(tc.header[i], tc.header[i+1])
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.status || !strings.Contains(problemDetail(t, w), tc.detail) {
				t.Fatalf("%s %s = %d %s; want %d with %q", tc.method, tc.path, w.Code, w.Body, tc.status, tc.detail)
			}
			if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("Content-Type %q, want application/problem+json", ct)
			}
		})
	}
}

// problemDetail returns the detail of w's problem.
func problemDetail(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	var p struct{ Detail string }
	if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
		t.Fatalf("%d %s: %v", w.Code, w.Body, err)
	}
	return p.Detail
}

// tokensOf returns the admin tokens srv was given.
func tokensOf(srv *Server) adminauth.Tokens { return srv.apiTokens }

// TestQuotaBadRequests: every 400 of credits and usage names what to fix.
func TestQuotaBadRequests(t *testing.T) {
	ts := newTestServer(t, testConfig)
	ts.h = ts.srv.AdminHandler(AdminOptions{}) // no tokens: anyone, as on loopback
	for _, tc := range []struct{ name, method, path, body, detail string }{
		{"unknown field", "POST", "/v1/credits", `{"policy":"notify","op":"get","amout":3}`, `"amout"`},
		{"no op", "POST", "/v1/credits", `{"policy":"notify"}`, "op"},
		{"bad op", "POST", "/v1/credits", `{"policy":"notify","op":"topup","amount":3}`, `op "topup": use add, set or get`},
		{"add 0", "POST", "/v1/credits", `{"policy":"notify","op":"add"}`, "amount is 0"},
		{"no credits rule", "POST", "/v1/credits", `{"policy":"notify","op":"set","amount":5}`, `policy "notify" has no credits rule`},
		{"unknown policy", "POST", "/v1/credits", `{"policy":"nope","op":"get"}`, `"nope"`},
		{"usage: no policy", "GET", "/v1/usage?user=a", "", "policy is missing"},
		{"usage: unknown policy", "GET", "/v1/usage?policy=nope", "", `"nope"`},
		{"usage: bad at", "GET", "/v1/usage?policy=notify&at=tomorrow", "", `at "tomorrow"`},
		{"usage: a parameter twice", "GET", "/v1/usage?policy=notify&category=a&category=b", "", `parameter "category" is given 2 times`},
		{"usage: not a calendar quota", "GET", "/v1/usage?policy=notify&rule=global", "", `policy "notify" rule "global" is not a calendar quota; it has no calendar quota`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := ts.do(tc.method, tc.path, tc.body)
			if w.Code != 400 || !strings.Contains(problemDetail(t, w), tc.detail) {
				t.Fatalf("%s %s %s = %d %s; want 400 with %q", tc.method, tc.path, tc.body, w.Code, w.Body, tc.detail)
			}
		})
	}
}
