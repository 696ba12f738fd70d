package overrides_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicerate/sluice/internal/adminauth"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/storetest"
)

// TestHTTP drives the admin API behind named tokens: a write token sets
// and deletes, a read token lists and is refused a change, and the log
// names the token that made each change.
func TestHTTP(t *testing.T) {
	t.Parallel()
	c := storetest.NewClock(t0)
	in := newInstance(t, memstore.New(memstore.Config{Clock: c.Now}), c, 0)
	mux := http.NewServeMux()
	in.m.Routes(mux)
	tokens := adminauth.Tokens{{Name: "oncall", Secret: "w-secret", Access: adminauth.Write}, {Name: "grafana", Secret: "r-secret", Access: adminauth.Read}}
	srv := httptest.NewServer(tokens.Require("c", mux))
	t.Cleanup(srv.Close)
	do := func(method, path, token, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	set := `{"policy":"api","rule":"per-user","values":["acme"],"limit":500,"window":"2m","for":"1h","reason":"launch"}`
	if code, _ := do("PUT", "/api/v1/overrides", "", set); code != 401 {
		t.Errorf("PUT without a token = %d, want 401", code)
	}
	if code, body := do("PUT", "/api/v1/overrides", "r-secret", set); code != 403 || !strings.Contains(body, `token \"grafana\" may read, not change`) {
		t.Errorf("PUT with the read token = %d %s, want 403", code, body)
	}
	code, body := do("PUT", "/api/v1/overrides", "w-secret", set)
	var got struct {
		ID, SetBy, Window, Until string
		Limit                    int64
	}
	if err := json.Unmarshal([]byte(body), &got); code != 200 || err != nil || got.ID != "api:per-user:acme" || got.SetBy != "" && got.SetBy != "oncall" ||
		got.Limit != 500 || got.Window != "2m0s" || got.Until != "2026-03-01T13:00:00Z" {
		t.Errorf("PUT = %d %s", code, body)
	}
	if !strings.Contains(body, `"set_by":"oncall"`) {
		t.Errorf("PUT answer %s does not name the token", body)
	}
	if code, body := do("GET", "/api/v1/overrides", "r-secret", ""); code != 200 || !strings.Contains(body, `"id":"api:per-user:acme"`) ||
		!strings.Contains(body, `"active":true`) || !strings.Contains(body, `"targets":[{"policy":"api","rule":"per-user","by":["user"]`) {
		t.Errorf("GET list = %d %s", code, body)
	}
	if code, _ := do("GET", "/api/v1/overrides/api:per-user:acme", "r-secret", ""); code != 200 {
		t.Errorf("GET one = %d", code)
	}
	for _, bad := range []struct{ body, code string }{
		{`{"policy":"api","rule":"per-user","values":["a"],"limit":1,"extra":1}`, "malformed_json"},
		{`{"policy":"api","rule":"per-user","values":["a"],"limit":1,"window":"5"}`, "malformed_json"},
		{`{"policy":"api","rule":"nope","values":["a"],"limit":1}`, "invalid_override"},
		{`{"id":"x","policy":"api","rule":"per-user","values":["a"],"limit":1}`, "bad_request"},
	} {
		if code, body := do("PUT", "/api/v1/overrides", "w-secret", bad.body); code != 400 || !strings.Contains(body, `"code":"`+bad.code+`"`) {
			t.Errorf("PUT %s = %d %s, want 400 %s", bad.body, code, body, bad.code)
		}
	}
	if code, _ := do("DELETE", "/api/v1/overrides/api:per-user:acme", "r-secret", ""); code != 403 {
		t.Errorf("DELETE with the read token = %d, want 403", code)
	}
	if code, body := do("DELETE", "/api/v1/overrides/api:per-user:acme", "w-secret", ""); code != 200 || !strings.Contains(body, `"deleted":"api:per-user:acme"`) {
		t.Errorf("DELETE = %d %s", code, body)
	}
	if code, _ := do("DELETE", "/api/v1/overrides/api:per-user:acme", "w-secret", ""); code != 404 {
		t.Errorf("DELETE again = %d, want 404", code)
	}
	if code, _ := do("GET", "/api/v1/overrides/api:per-user:acme", "w-secret", ""); code != 404 {
		t.Errorf("GET of a deleted one = %d, want 404", code)
	}
	for _, want := range []string{`msg="runtime override set" who=oncall`, `msg="runtime override deleted" who=oncall`} {
		if !strings.Contains(in.log.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, in.log)
		}
	}
}
