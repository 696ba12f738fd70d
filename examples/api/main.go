// Command api serves a small JSON API whose users may make at most 100
// requests in any 10 seconds each, a sliding window kept in memory.
//
// Callers authenticate with an API key in the X-API-Key header; the key
// names a user, and the limit is per user, whichever key or address the
// requests come from. Every response carries the RateLimit-Policy and
// RateLimit headers (and the legacy X-RateLimit-* ones); the 101st request
// in a window gets 429 with Retry-After and a problem+json body.
//
//	go run ./examples/api -addr 127.0.0.1:8080 -keys alice:k-alice,bob:k-bob
//	curl -i -H 'X-API-Key: k-alice' http://127.0.0.1:8080/v1/hello
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/memstore"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	keys := flag.String("keys", "alice:k-alice,bob:k-bob", "API keys, as comma-separated user:key pairs")
	flag.Parse()

	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	users, err := parseKeys(*keys)
	if err != nil {
		fmt.Fprintln(os.Stderr, "api:", err)
		os.Exit(2)
	}
	lim := sluice.NewLimiter(memstore.New(memstore.Config{}), sluice.Config{})
	h, err := newServer(lim, users, logger)
	if err != nil {
		fmt.Fprintln(os.Stderr, "api:", err)
		os.Exit(2)
	}
	srv := &http.Server{Addr: *addr, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	logger.Info("listening", "addr", *addr)
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, "api:", err)
		os.Exit(1)
	}
}

// apiPolicy is the API's limit: 100 requests per user in any 10 seconds.
var apiPolicy = sluice.Policy{
	Name: "api",
	Rules: []sluice.Rule{
		{Name: "per-user", By: []string{"user"}, Limit: 100, Window: 10 * time.Second},
	},
}

// userKey is the context key under which authenticate stores the user.
type userKey struct{}

// newServer returns the API's handler: authentication (API key to user),
// then the per-user limit, then the routes. users maps API keys to user
// names. A nil logger discards.
func newServer(lim *sluice.Limiter, users map[string]string, logger *slog.Logger) (http.Handler, error) {
	limit, err := httplimit.New(httplimit.Config{
		Limiter:       lim,
		Policies:      []*sluice.Policy{&apiPolicy},
		Keys:          map[string]httplimit.KeyFunc{"user": httplimit.ContextValue(userKey{})},
		LegacyHeaders: true,
		Logger:        logger,
	})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/hello", func(w http.ResponseWriter, r *http.Request) {
		user, _ := r.Context().Value(userKey{}).(string)
		writeJSON(w, http.StatusOK, map[string]string{"user": user, "message": "hello, " + user})
	})
	return authenticate(users, limit.Handler(mux)), nil
}

// authenticate finds the user of the request's API key and passes the
// request on with the user in its context; without a known key it answers
// 401.
func authenticate(users map[string]string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, ok := users[r.Header.Get("X-API-Key")]
		if !ok {
			w.Header().Set("WWW-Authenticate", `ApiKey header="X-API-Key"`)
			httplimit.Problem{
				Type:   "about:blank",
				Title:  "Unauthorized",
				Status: http.StatusUnauthorized,
				Detail: "Send a valid API key in the X-API-Key header.",
			}.Write(w)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, user)))
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// parseKeys parses "user:key,user:key" into a map from key to user.
func parseKeys(s string) (map[string]string, error) {
	users := map[string]string{}
	for pair := range strings.SplitSeq(s, ",") {
		user, key, ok := strings.Cut(strings.TrimSpace(pair), ":")
		if !ok || user == "" || key == "" {
			return nil, fmt.Errorf("-keys: %q is not user:key", pair)
		}
		if _, dup := users[key]; dup {
			return nil, fmt.Errorf("-keys: key of %q given twice", user)
		}
		users[key] = user
	}
	if len(users) == 0 {
		return nil, errors.New("-keys: no API keys")
	}
	return users, nil
}
