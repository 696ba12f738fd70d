package httplimit

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sluicerate/sluice"
)

func TestKeyNotUTF8(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	policy := &sluice.Policy{Name: "api", Rules: []sluice.Rule{
		{Name: "per-key", By: []string{"key"}, Limit: 1, Window: time.Minute},
	}}
	keys := map[string]KeyFunc{"key": Header("X-API-Key")}
	h := mustNew(t, Config{Limiter: e.lim, Policies: []*sluice.Policy{policy}, Keys: keys}).Handler(ok)
	// Two keys that a decoder replacing bad bytes with U+FFFD would make one.
	for _, key := range []string{"\xff", "\xfe"} {
		resp := do(h, "203.0.113.7:1", map[string]string{"X-API-Key": key})
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("key %q: status %d, want 400", key, resp.StatusCode)
		}
		if p := problem(t, resp); p.Code != "invalid_attribute" || p.Detail != `The request's "key" attribute is not valid UTF-8.` {
			t.Errorf("key %q: problem %+v, want invalid_attribute naming key", key, p)
		}
	}
	if resp := do(h, "203.0.113.7:1", map[string]string{"X-API-Key": "ключ"}); resp.StatusCode != http.StatusOK {
		t.Errorf("a UTF-8 key: status %d, want 200", resp.StatusCode)
	}

	var got error
	h = mustNew(t, Config{Limiter: e.lim, Policies: []*sluice.Policy{policy}, Keys: keys,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) { got = err }}).Handler(ok)
	do(h, "203.0.113.7:1", map[string]string{"X-API-Key": "\xff"})
	var kerr *KeyError
	if !errors.As(got, &kerr) || kerr.Attribute != "key" || !errors.Is(got, ErrInvalidKey) {
		t.Errorf("error handler got %v, want a *KeyError for key wrapping ErrInvalidKey", got)
	}
}

func TestKeyAbsentOrUnreadable(t *testing.T) {
	t.Parallel()
	errSession := errors.New("session store down")
	user := &sluice.Policy{Name: "user", Rules: []sluice.Rule{{Name: "per-user", By: []string{"user"}, Limit: 10, Window: time.Minute}}}
	route := &sluice.Policy{Name: "route", Rules: []sluice.Rule{{Name: "per-route", By: []string{"route"}, Limit: 10, Window: time.Minute}}}
	cases := []struct {
		name string
		key  KeyFunc
		code string
		want error
	}{
		{"absent", Header("X-User"), "missing_attribute", ErrMissingKey},
		{"unreadable", func(*http.Request) (string, error) { return "", errSession }, "missing_attribute", errSession},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			var got error
			mw := mustNew(t, Config{Limiter: e.lim, Policies: []*sluice.Policy{route, user},
				Keys: map[string]KeyFunc{"user": c.key, "route": Route}})
			mux := http.NewServeMux()
			mux.Handle("GET /items", mw.Handler(ok))
			rec := httptest.NewRecorder()
			mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/items", nil))
			if resp := rec.Result(); resp.StatusCode != http.StatusBadRequest || problem(t, resp).Code != c.code {
				t.Fatalf("status %d, want 400 %s", resp.StatusCode, c.code)
			}
			// The route policy, decided first, recorded nothing.
			d, err := e.lim.Peek(t.Context(), route, map[string]string{"route": "GET /items"}, 1)
			if err != nil || d.Limits()[0].Used != 1 {
				t.Errorf("route window %+v, %v; want nothing recorded", d.Limits(), err)
			}
			mw = mustNew(t, Config{Limiter: e.lim, Policies: []*sluice.Policy{route, user},
				Keys:         map[string]KeyFunc{"user": c.key, "route": Route},
				ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) { got = err }})
			mux = http.NewServeMux()
			mux.Handle("GET /items", mw.Handler(ok))
			mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/items", nil))
			var kerr *KeyError
			if !errors.As(got, &kerr) || kerr.Attribute != "user" || !errors.Is(got, c.want) {
				t.Errorf("error handler got %v, want a *KeyError for user wrapping %v", got, c.want)
			}
		})
	}
}

func TestKeyAbsentOptionalRule(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// Per user when the request names one, else per client address.
	policy := &sluice.Policy{Name: "api", Rules: []sluice.Rule{
		{Name: "per-user", By: []string{"user"}, Optional: true, Limit: 2, Window: time.Minute},
		{Name: "per-ip", By: []string{"ip"}, Unless: []string{"user"}, Limit: 1, Window: time.Minute},
	}}
	h := mustNew(t, Config{Limiter: e.lim, Policies: []*sluice.Policy{policy},
		Keys: map[string]KeyFunc{"user": Header("X-User"), "ip": mustResolver(t, IPConfig{}).Key}}).Handler(ok)
	for i, want := range []int{200, 429} {
		if resp := do(h, "203.0.113.7:1", nil); resp.StatusCode != want {
			t.Errorf("anonymous request %d: status %d, want %d", i, resp.StatusCode, want)
		}
	}
	for i, want := range []int{200, 200, 429} {
		resp := do(h, "203.0.113.7:1", map[string]string{"X-User": "ann"})
		if resp.StatusCode != want {
			t.Errorf("ann's request %d: status %d, want %d", i, resp.StatusCode, want)
		}
		for _, field := range []string{HeaderRateLimit, HeaderRateLimitPolicy} {
			if items := parseField(t, resp.Header, field); len(items) != 1 || items[0].name != "per-user" {
				t.Errorf("ann's request %d: %s %+v, want per-user alone", i, field, items)
			}
		}
	}
}
