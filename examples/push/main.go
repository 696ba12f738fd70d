// Command push accepts push notifications over HTTP and delivers at most 10
// per minute to each user, and never two to one user less than 100 ms
// apart, so a user's phone neither floods nor buzzes in bursts.
//
// The windows are kept in memory, or in Redis with -redis, where every
// instance of the service shares them:
//
//	go run ./examples/push -addr 127.0.0.1:8081
//	go run ./examples/push -redis redis://127.0.0.1:6379/0
//	curl -i -X POST -d '{"message":"hi"}' http://127.0.0.1:8081/v1/users/ann/push
//
// A refused notification is answered 429 with Retry-After and the
// RateLimit headers, and is not counted: a sender that retries too early
// is told when to come back, not locked out for as long as it keeps trying.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/store"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8081", "listen address")
	redisURL := flag.String("redis", "", "Redis URL, redis[s]://[user:password@]host:port[/db] (see redisstore.ParseURL); default: in memory")
	flag.Parse()

	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	store, err := openStore(*redisURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, "push:", err)
		os.Exit(2)
	}
	defer store.Close()
	h, err := newServer(sluice.NewLimiter(store, sluice.Config{}), logSender{logger}, logger)
	if err != nil {
		fmt.Fprintln(os.Stderr, "push:", err)
		os.Exit(2)
	}
	srv := &http.Server{Addr: *addr, Handler: h, ReadHeaderTimeout: 5 * time.Second}
	logger.Info("listening", "addr", *addr, "store", storeName(*redisURL))
	if err := srv.ListenAndServe(); err != nil {
		fmt.Fprintln(os.Stderr, "push:", err)
		os.Exit(1)
	}
}

// openStore opens the Redis store at redisURL, or an in-memory store when
// the URL is empty.
func openStore(redisURL string) (store.Store, error) {
	if redisURL == "" {
		return memstore.New(memstore.Config{}), nil
	}
	return redisstore.New(redisstore.Config{URL: redisURL})
}

func storeName(redisURL string) string {
	if redisURL == "" {
		return "memory"
	}
	return "redis"
}

// pushPolicy is the push notifier's limit: 10 notifications per user in any minute,
// at least 100 ms apart. Penalize stays off: a refused notification is not
// recorded.
var pushPolicy = sluice.Policy{
	Name: "push",
	Rules: []sluice.Rule{
		{Name: "per-user", By: []string{"user"}, Limit: 10, Window: time.Minute, MinGap: 100 * time.Millisecond},
	},
}

// sender delivers a notification to a user's devices.
type sender interface {
	Send(ctx context.Context, user, message string) error
}

// logSender stands in for a push provider: it logs each notification.
type logSender struct{ log *slog.Logger }

func (s logSender) Send(ctx context.Context, user, message string) error {
	s.log.InfoContext(ctx, "push", "user", user, "message", message)
	return nil
}

// maxMessage is the largest notification body accepted, in bytes.
const maxMessage = 4 << 10

// newServer returns the service's handler: POST /v1/users/{user}/push with a
// JSON body {"message": "..."} delivers the message through s when the
// user's limit allows, and answers 202. A nil logger discards.
//
// The handler asks the limiter itself, after validating the request, so
// malformed requests consume nothing, and answers with httplimit's headers
// and problem bodies.
func newServer(lim *sluice.Limiter, s sender, logger *slog.Logger) (http.Handler, error) {
	if err := pushPolicy.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/users/{user}/push", func(w http.ResponseWriter, r *http.Request) {
		user := r.PathValue("user")
		var body struct {
			Message string `json:"message"`
		}
		dec := json.NewDecoder(io.LimitReader(r.Body, maxMessage+1))
		if err := dec.Decode(&body); err != nil || body.Message == "" || len(body.Message) > maxMessage {
			badRequest(w, `Send a JSON body {"message": "..."} of at most 4 KiB.`)
			return
		}

		d, err := lim.Allow(r.Context(), &pushPolicy, map[string]string{"user": user})
		if err != nil && !d.Degraded {
			logger.ErrorContext(r.Context(), "push: limiter error", "user", user, "err", err)
			httplimit.Problem{Type: "about:blank", Title: "Internal Server Error", Status: http.StatusInternalServerError}.Write(w)
			return
		}
		if err != nil {
			logger.WarnContext(r.Context(), "push: limiter store failed; failure policy applied",
				"user", user, "allowed", d.Allowed, "err", err)
		}
		httplimit.WriteHeaders(w.Header(), d, httplimit.HeaderOptions{})
		switch {
		case d.Allowed:
		case d.FailedClosed():
			// Refused by the failure policy alone: the store is down.
			httplimit.Unavailable().Write(w)
			return
		default:
			httplimit.QuotaExceeded(d).Write(w)
			return
		}

		if err := s.Send(r.Context(), user, body.Message); err != nil {
			logger.ErrorContext(r.Context(), "push: delivery failed", "user", user, "err", err)
			httplimit.Problem{Type: "about:blank", Title: "Bad Gateway", Status: http.StatusBadGateway,
				Detail: "The push provider did not accept the notification."}.Write(w)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_ = json.NewEncoder(w).Encode(map[string]any{"user": user, "remaining": d.Remaining})
	})
	return mux, nil
}

func badRequest(w http.ResponseWriter, detail string) {
	httplimit.Problem{Type: "about:blank", Title: "Bad Request", Status: http.StatusBadRequest, Detail: detail}.Write(w)
}
