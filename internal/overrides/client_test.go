package overrides_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicerate/sluice/internal/adminauth"
	"github.com/sluicerate/sluice/internal/overrides"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/storetest"
)

// TestClient drives the admin API through the Client, as sluice override
// does: a set is listed and got with its summary, a delete ends it, a
// missing override and a missing token are *APIError with their status,
// and a listener that is not there is an error that names --admin.
func TestClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := storetest.NewClock(t0)
	in := newInstance(t, memstore.New(memstore.Config{Clock: c.Now}), c, 5)
	mux := http.NewServeMux()
	in.m.Routes(mux)
	srv := httptest.NewServer(adminauth.Tokens{{Name: "oncall", Secret: "w-secret", Access: adminauth.Write}}.Require("c", mux))
	t.Cleanup(srv.Close)
	client := &overrides.Client{Admin: strings.TrimPrefix(srv.URL, "http://") + "/", Token: "w-secret"}

	body, _ := json.Marshal(overrides.Override{Policy: "api", Rule: "per-user", Values: []string{"acme"}, Limit: limit(500),
		Window: overrides.Duration(2 * 60e9), For: overrides.Duration(3600e9), Reason: "launch"})
	b, err := client.Do(ctx, http.MethodPut, "", body)
	var set overrides.Override
	if err != nil || json.Unmarshal(b, &set) != nil {
		t.Fatalf("set: %v, %s", err, b)
	}
	want := "limit 500 per 2m0s, until 2026-03-01T13:00:00Z; set by oncall at 2026-03-01T12:00:00Z (launch)"
	if set.ID != "api:per-user:acme" || set.Summary() != want {
		t.Errorf("set %s: %q, want api:per-user:acme: %q", set.ID, set.Summary(), want)
	}

	b, err = client.Do(ctx, http.MethodGet, "", nil)
	var l overrides.Listing
	if err != nil || json.Unmarshal(b, &l) != nil {
		t.Fatalf("list: %v, %s", err, b)
	}
	var out bytes.Buffer
	l.WriteText(&out)
	lines := strings.Split(out.String(), "\n")
	if len(lines) != 4 || strings.Fields(lines[0])[0] != "ID" || !strings.HasPrefix(lines[1], "api:per-user:acme  active  "+want) ||
		lines[2] != "1 overrides (this server holds up to 5)" {
		t.Errorf("list:\n%s", out.String())
	}

	b, err = client.Do(ctx, http.MethodDelete, "/api:per-user:acme", nil)
	if err != nil || !strings.Contains(string(b), `"deleted":"api:per-user:acme"`) {
		t.Errorf("delete: %v, %s", err, b)
	}
	var apiErr *overrides.APIError
	if _, err := client.Do(ctx, http.MethodGet, "/api:per-user:acme", nil); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound ||
		!strings.Contains(err.Error(), "404 Not Found: no runtime override api:per-user:acme") {
		t.Errorf("get after delete: %v, want a 404 naming the override", err)
	}
	anonymous := &overrides.Client{Admin: srv.URL}
	if _, err := anonymous.Do(ctx, http.MethodGet, "", nil); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized ||
		!strings.Contains(apiErr.Detail, "set SLUICE_ADMIN_TOKEN (or --token)") {
		t.Errorf("list without a token: %v, want a 401 that says how to give one", err)
	}

	gone := httptest.NewServer(mux)
	gone.Close()
	if _, err := (&overrides.Client{Admin: gone.URL}).Do(ctx, http.MethodGet, "", nil); err == nil || errors.As(err, &apiErr) ||
		!strings.Contains(err.Error(), "is sluice serve's admin listener at "+gone.URL+"? (--admin URL)") {
		t.Errorf("a listener that is not there: %v", err)
	}
	if _, err := (&overrides.Client{Admin: "http://bad host"}).Do(ctx, http.MethodGet, "", nil); err == nil || !strings.HasPrefix(err.Error(), `--admin "http://bad host": `) {
		t.Errorf("a bad URL: %v", err)
	}
}
