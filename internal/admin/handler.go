package admin

import (
	"embed"
	"io/fs"
	"net/http"
	"net/http/pprof"

	"github.com/sluicerate/sluice/internal/adminauth"
	"github.com/sluicerate/sluice/internal/front"
)

// The admin view shows attribute values (user ids, client addresses) and
// changes limits, so it is served on a listener of its own, loopback by
// default, behind bearer tokens (package adminauth) that sluice serve
// requires on any other address; the public listener serves none of it.

//go:embed page
var pageFiles embed.FS

// Cookie is the cookie that carries the admin token for a browser, set
// when the page is opened with ?token=.
const Cookie = "sluice_admin"

// Options configures Handler. The zero value serves the view, without an
// inspector of entries, to anyone who can reach the listener.
type Options struct {
	// Tokens, when set, are required of every request: one as
	// "Authorization: Bearer TOKEN", or in the Cookie cookie, which a
	// browser gets by opening /?token=TOKEN once; a request that changes
	// something needs a token with write access (package adminauth).
	// Default: none, every request is allowed.
	Tokens adminauth.Tokens

	// Overrides, when set, says that the server applies runtime
	// overrides, whose routes Routes adds: the page shows their panel.
	Overrides bool

	// Inspector reads the store's windows and queues for the key
	// inspector. Default: none (the inspector shows a window's figures).
	Inspector Inspector

	// Metrics serves /metrics. Default: none.
	Metrics http.Handler

	// Routes adds the routes of other fronts to the listener's mux
	// (Envoy's window reset). Default: none.
	Routes func(mux front.Mux)
}

// admin serves the view of a Front.
type admin struct {
	v         *View
	f         *front.Front
	insp      Inspector
	overrides bool
}

// Listener is the handler of the admin listener (View.Handler).
type Listener struct {
	http.Handler
	routes *front.Routes
}

// Patterns returns every route the listener serves, as registered ("GET
// /api/v1/config"); each needs a token when tokens are set.
func (l *Listener) Patterns() []string { return l.routes.Patterns() }

// Handler returns the handler of the admin listener over f: the page at /,
// its JSON API under /api/v1/, a calendar quota's usage chart at /usage,
// /metrics, and pprof under /debug/pprof/.
func (v *View) Handler(f *front.Front, opts Options) *Listener {
	a := &admin{v: v, f: f, insp: opts.Inspector, overrides: opts.Overrides}
	mux := front.NewRoutes()
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
	mux.HandleFunc("GET /api/v1/leases", a.handleLeases)
	mux.HandleFunc("GET /api/v1/budgets", a.handleBudgets)
	mux.HandleFunc("POST /api/v1/inspect", a.handleInspect)
	mux.HandleFunc("GET /usage", a.handleUsageChart)
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
	return &Listener{Handler: securityHeaders(opts.Tokens.Require(Cookie, front.Handler(f.Log, mux.ServeMux))), routes: mux}
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
