package server

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicerate/sluice/internal/wire"
	"github.com/sluicerate/sluice/store"
)

// brokenStore fails every call, as a store whose server is down.
type brokenStore struct{}

var errDown = errors.New("connection refused")

func (brokenStore) Decide(context.Context, *store.Request) error {
	return errDown
}
func (brokenStore) Close() error               { return nil }
func (brokenStore) Ping(context.Context) error { return errDown }

func TestStoreFailure(t *testing.T) {
	for _, tt := range []struct {
		onError     string
		allowed     bool
		forwardAuth int
	}{
		{"deny", false, 503},
		{"allow", true, 200},
	} {
		t.Run(tt.onError, func(t *testing.T) {
			h := serverFor(t, brokenStore{}, "store:\n  on_error: "+tt.onError+"\n"+testConfig, Options{}).Handler()
			do := func(method, path, body string) *httptest.ResponseRecorder {
				r := httptest.NewRequest(method, path, strings.NewReader(body))
				r.Header.Set("X-User-Id", "u")
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				return w
			}
			w := do("POST", "/v1/decide", `{"policy":"notify","attributes":{"category":"a"}}`)
			var d wire.DecisionJSON
			if err := json.Unmarshal(w.Body.Bytes(), &d); w.Code != 200 || err != nil {
				t.Fatalf("decide = %d %s", w.Code, w.Body)
			}
			if !d.Degraded || d.Allowed != tt.allowed {
				t.Errorf("decision = %+v, want degraded, allowed %v", d, tt.allowed)
			}
			if w := do("GET", "/v1/forward-auth?policy=edge", ""); w.Code != tt.forwardAuth || w.Header().Get("Sluice-Degraded") != "1" {
				t.Errorf("forward-auth = %d %v, want %d degraded", w.Code, w.Header(), tt.forwardAuth)
			}
			if w := do("POST", "/v1/reserve", `{"schedule":"carrier","attributes":{"carrier":"1"}}`); !strings.Contains(w.Body.String(), `"degraded":true`) {
				t.Errorf("reserve = %d %s, want degraded", w.Code, w.Body)
			}
			if w := do("GET", "/readyz", ""); w.Code != 503 {
				t.Errorf("/readyz = %d, want 503", w.Code)
			}
			m := do("GET", "/metrics", "").Body.String()
			for _, want := range []string{
				`sluice_store_errors_total{op="decide"} 2`,
				`sluice_store_errors_total{op="ping"} 1`,
				`sluice_degraded_decisions_total{outcome="` + map[bool]string{true: "allowed", false: "denied"}[tt.allowed] + `",policy="notify"} 1`,
				`sluice_reservations_total{outcome="degraded",schedule="carrier"} 1`,
			} {
				if !strings.Contains(m, want) {
					t.Errorf("/metrics lacks %q", want)
				}
			}
		})
	}
}
