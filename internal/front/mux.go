package front

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/sluicerate/sluice/httplimit"
)

// Handler serves mux as every listener of sluice serve does: unknown
// routes answered 404 and known routes with the wrong method 405, both as
// problem+json instead of the mux's plain text, and a panicking handler
// answered 500 and logged to log.
func Handler(log *slog.Logger, mux *http.ServeMux) http.Handler {
	return recoverer(log, notFound(mux))
}

// notFound answers unknown routes and wrong methods with problem+json
// instead of the mux's plain text.
func notFound(mux *http.ServeMux) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, pattern := mux.Handler(r)
		if pattern == "" {
			rec := &statusRecorder{header: http.Header{}}
			h.ServeHTTP(rec, r)
			switch rec.status {
			case http.StatusMethodNotAllowed:
				w.Header().Set("Allow", rec.header.Get("Allow"))
				httplimit.Problem{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed",
					Detail: fmt.Sprintf("%s does not accept %s; use %s", r.URL.Path, r.Method, rec.header.Get("Allow"))}.Write(w)
			case http.StatusNotFound:
				httplimit.Problem{Status: http.StatusNotFound, Code: "not_found",
					Detail: fmt.Sprintf("no endpoint at %s; see GET /v1/policies and the API documentation", r.URL.Path)}.Write(w)
			default:
				// Redirects the mux makes to clean a path.
				for k, v := range rec.header {
					w.Header()[k] = v
				}
				w.WriteHeader(rec.status)
			}
			return
		}
		mux.ServeHTTP(w, r) // the mux, not h: it sets the pattern's path values
	})
}

// statusRecorder captures what the mux's fallback handlers write.
type statusRecorder struct {
	header http.Header
	status int
}

func (r *statusRecorder) Header() http.Header         { return r.header }
func (r *statusRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (r *statusRecorder) WriteHeader(code int)        { r.status = code }

// recoverer answers a panicking handler with 500 and logs the panic.
func recoverer(log *slog.Logger, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				log.Error("panic serving a request", slog.String("path", r.URL.Path), slog.Any("panic", v))
				httplimit.Problem{Status: http.StatusInternalServerError, Code: "internal"}.Write(w)
			}
		}()
		next.ServeHTTP(w, r)
	})
}
