package admin

import (
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"io/fs"
	"net/http"
	"net/http/pprof"
	"strings"

	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/front"
)

// The admin view shows attribute values (user ids, client addresses), so
// it is served on a listener of its own, loopback by default, with an
// optional bearer token; the public listener serves none of it.

//go:embed page
var pageFiles embed.FS

// Cookie is the cookie that carries the admin token for a browser, set
// when the page is opened with ?token=.
const Cookie = "sluice_admin"

// Options configures Handler. The zero value serves the view, without an
// inspector of entries, to anyone who can reach the listener.
type Options struct {
	// Token, when set, is required of every request: as
	// "Authorization: Bearer TOKEN", or in the Cookie cookie, which a
	// browser gets by opening /?token=TOKEN once. Default: none.
	Token string

	// Inspector reads the store's windows and queues for the key
	// inspector. Default: none (the inspector shows a window's figures).
	Inspector Inspector

	// Metrics serves /metrics. Default: none.
	Metrics http.Handler

	// Routes adds the routes of other fronts to the listener's mux
	// (Envoy's window reset). Default: none.
	Routes func(mux *http.ServeMux)
}

// admin serves the view of a Front.
type admin struct {
	v    *View
	f    *front.Front
	insp Inspector
}

// Handler returns the handler of the admin listener over f: the page at /,
// its JSON API under /api/v1/, /metrics, and pprof under /debug/pprof/.
func (v *View) Handler(f *front.Front, opts Options) http.Handler {
	a := &admin{v: v, f: f, insp: opts.Inspector}
	mux := http.NewServeMux()
	static, _ := fs.Sub(pageFiles, "page")
	files := http.FileServerFS(static)
	mux.Handle("GET /{$}", noCache(files))
	mux.Handle("GET /app.js", noCache(files))
	mux.Handle("GET /app.css", noCache(files))
	mux.Handle("GET /uplot/", files)
	mux.HandleFunc("GET /api/v1/config", a.handleConfig)
	mux.HandleFunc("GET /api/v1/rates", a.handleRates)
	mux.HandleFunc("GET /api/v1/denied", a.handleDenied)
	mux.HandleFunc("GET /api/v1/health", a.handleHealth)
	mux.HandleFunc("POST /api/v1/inspect", a.handleInspect)
	if opts.Routes != nil {
		opts.Routes(mux)
	}
	if opts.Metrics != nil {
		mux.Handle("GET /metrics", opts.Metrics)
	}
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	h := front.Handler(f.Log, mux)
	if opts.Token != "" {
		h = requireToken(opts.Token, h)
	}
	return securityHeaders(h)
}

// requireToken answers 401 to a request that carries neither the token as
// a bearer token nor the cookie. A page opened with ?token=TOKEN sets the
// cookie and is sent to the same address without the token, so that it
// leaves no trace in the address bar or history.
func requireToken(token string, next http.Handler) http.Handler {
	want := sha256.Sum256([]byte(token))
	matches := func(got string) bool {
		sum := sha256.Sum256([]byte(got))
		return got != "" && subtle.ConstantTimeCompare(sum[:], want[:]) == 1
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if q := r.URL.Query(); q.Has("token") && r.Method == http.MethodGet {
			if !matches(q.Get("token")) {
				unauthorized(w, "the token in ?token= is not the admin token")
				return
			}
			http.SetCookie(w, &http.Cookie{Name: Cookie, Value: token, Path: "/", HttpOnly: true,
				SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
			q.Del("token")
			u := *r.URL
			u.RawQuery = q.Encode()
			http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
			return
		}
		if auth := r.Header.Get("Authorization"); auth != "" {
			scheme, got, _ := strings.Cut(auth, " ")
			if !strings.EqualFold(scheme, "Bearer") || !matches(strings.TrimSpace(got)) {
				unauthorized(w, "the Authorization header does not carry the admin token; send Authorization: Bearer TOKEN")
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		if c, err := r.Cookie(Cookie); err == nil && matches(c.Value) {
			next.ServeHTTP(w, r)
			return
		}
		unauthorized(w, "the admin listener requires its token: send Authorization: Bearer TOKEN, or open /?token=TOKEN in a browser")
	})
}

func unauthorized(w http.ResponseWriter, detail string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="sluice admin"`)
	httplimit.Problem{Status: http.StatusUnauthorized, Code: "unauthorized", Detail: detail}.Write(w)
}

// securityHeaders keeps the page from being framed or loading anything
// from elsewhere.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'")
		next.ServeHTTP(w, r)
	})
}

func noCache(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-cache")
		next.ServeHTTP(w, r)
	})
}
