package server

import (
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"io/fs"
	"net/http"
	"net/http/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/store"
)

// The admin view: a live page of what the server is doing (its policies,
// decision rates, the keys it denies now and when each is let through, a
// key inspector, the store's health), the JSON API the page reads, and
// /metrics and pprof. It shows attribute values (user ids, client
// addresses), so it is served by AdminHandler on a listener of its own,
// loopback by default, with an optional bearer token; Handler serves none
// of it.

//go:embed admin
var adminFiles embed.FS

// AdminCookie is the cookie that carries the admin token for a browser,
// set when the page is opened with ?token=.
const AdminCookie = "sluice_admin"

// AdminOptions configures AdminHandler. The zero value serves the view to
// anyone who can reach the listener.
type AdminOptions struct {
	// Token, when set, is required of every request: as
	// "Authorization: Bearer TOKEN", or in the AdminCookie cookie, which a
	// browser gets by opening /?token=TOKEN once. Default: none.
	Token string
}

// view is what the admin view counts as the server works. Its parts are
// fed by the server's metrics (metrics.go) and reloads, and read by the
// admin API. It is safe for concurrent use.
type view struct {
	clock  sluice.Clock
	rates  *rates
	denied *deniedKeys
	health storeHealth

	mu     sync.Mutex
	reload reloadJSON // the latest reload
}

// systemClock is the view's default clock, package time's.
type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

func newView(clock sluice.Clock) *view {
	return &view{clock: clock, rates: newRates(), denied: newDeniedKeys()}
}

// decision counts one decision of policy with the outcome and rule of
// sluice_decisions_total (or outcomeDegraded).
func (v *view) decision(policy, rule, outcome string) {
	v.rates.add(seriesKey{policy, rule, outcome}, v.clock.Now())
}

// storeCall records a store call of op that started at start.
func (v *view) storeCall(op string, took time.Duration, err error) {
	v.health.observe(op, took, v.clock.Now(), err)
}

// decided records the windows of a decided request that did not fit.
func (v *view) decided(req *store.Request) {
	v.denied.observe(req, v.clock.Now())
}

// reloaded records a reload of file that ended with err.
func (v *view) reloaded(file string, err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.reload = reloadJSON{File: file, At: v.clock.Now().UTC(), OK: err == nil}
	if err != nil {
		v.reload.Error = err.Error()
	}
}

// reloadJSON is the latest reload in GET /api/v1/config.
type reloadJSON struct {
	File  string    `json:"file"`
	At    time.Time `json:"at"`
	OK    bool      `json:"ok"`
	Error string    `json:"error,omitempty"`
}

// AdminHandler returns the handler of the admin listener: the page at /,
// its JSON API under /api/v1/, /metrics, and pprof under /debug/pprof/.
func (s *Server) AdminHandler(opts AdminOptions) http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(adminFiles, "admin")
	files := http.FileServerFS(static)
	mux.Handle("GET /{$}", noCache(files))
	mux.Handle("GET /app.js", noCache(files))
	mux.Handle("GET /app.css", noCache(files))
	mux.Handle("GET /uplot/", files)
	mux.HandleFunc("GET /api/v1/config", s.handleAdminConfig)
	mux.HandleFunc("GET /api/v1/rates", s.handleAdminRates)
	mux.HandleFunc("GET /api/v1/denied", s.handleAdminDenied)
	mux.HandleFunc("GET /api/v1/health", s.handleAdminHealth)
	mux.HandleFunc("POST /api/v1/inspect", s.handleAdminInspect)
	mux.HandleFunc("POST /api/v1/envoy/reset", s.handleEnvoyReset)
	mux.Handle("GET /metrics", s.metricsHandler())
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	h := s.recoverer(notFound(mux))
	if opts.Token != "" {
		h = requireToken(opts.Token, h)
	}
	return securityHeaders(h)
}

// AdminServer returns an http.Server for AdminHandler with timeouts set. Its
// write timeout leaves room for a 30 s CPU profile.
func (s *Server) AdminServer(addr string, opts AdminOptions) *http.Server {
	hs := s.HTTPServer(addr)
	hs.Handler = s.AdminHandler(opts)
	hs.WriteTimeout = 2 * time.Minute
	return hs
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
			http.SetCookie(w, &http.Cookie{Name: AdminCookie, Value: token, Path: "/", HttpOnly: true,
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
		if c, err := r.Cookie(AdminCookie); err == nil && matches(c.Value) {
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

// adminConfigJSON is the answer of GET /api/v1/config.
type adminConfigJSON struct {
	Now      time.Time `json:"now"`
	File     string    `json:"file"`
	LoadedAt time.Time `json:"loaded_at"`

	// Reload is the latest reload of the file, whether it took or not;
	// absent before the first. A failed reload leaves the configuration
	// loaded at LoadedAt in use.
	Reload *reloadJSON `json:"reload,omitempty"`

	// Store is "redis" or "memory"; Inspect says whether the inspector
	// can show a window's entries (Redis) or only its figures.
	Store   string `json:"store"`
	Entries bool   `json:"entries"`
	Queues  bool   `json:"queues"`

	Policies  []adminPolicyJSON `json:"policies"`
	Schedules []scheduleJSON    `json:"schedules"`

	// TopKeys is how many denied keys the view keeps per rule.
	TopKeys int `json:"top_keys"`
}

type adminPolicyJSON struct {
	Name     string     `json:"name"`
	Penalize bool       `json:"penalize"`
	Shadow   bool       `json:"shadow"`
	By       []string   `json:"by"` // every attribute its rules read
	Rules    []ruleJSON `json:"rules"`
}

// storeKind names the server's store for the view.
func (s *Server) storeKind() string {
	if _, ok := s.store.Store.(*redisstore.Store); ok {
		return "redis"
	}
	if _, ok := s.store.Store.(store.Local); ok {
		return "memory"
	}
	return "custom"
}

func (s *Server) handleAdminConfig(w http.ResponseWriter, r *http.Request) {
	st := s.state.Load()
	_, redis := s.store.Store.(*redisstore.Store)
	out := adminConfigJSON{Now: s.view.clock.Now().UTC(), File: st.cfg.File, LoadedAt: st.loaded.UTC(),
		Store: s.storeKind(), Entries: redis, Queues: s.queues != nil, TopKeys: deniedPerRule,
		Policies: []adminPolicyJSON{}, Schedules: []scheduleJSON{}}
	s.view.mu.Lock()
	if !s.view.reload.At.IsZero() {
		rl := s.view.reload
		out.Reload = &rl
	}
	s.view.mu.Unlock()
	for i := range st.cfg.Policies {
		p := &st.cfg.Policies[i]
		pj := adminPolicyJSON{Name: p.Name, Penalize: p.Penalize, Shadow: p.Shadow, By: []string{}}
		for _, r := range p.Rules {
			for _, a := range r.By {
				if !slices.Contains(pj.By, a) {
					pj.By = append(pj.By, a)
				}
			}
			pj.Rules = append(pj.Rules, newRuleJSON(p, &r))
		}
		out.Policies = append(out.Policies, pj)
	}
	for i := range st.cfg.Schedules {
		out.Schedules = append(out.Schedules, newScheduleJSON(&st.cfg.Schedules[i]))
	}
	writeJSON(w, out)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// seconds reads the ?seconds= parameter: how far back a series goes.
func seconds(r *http.Request, def, most int) (int, *httplimit.Problem) {
	v := r.URL.Query().Get("seconds")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		return 0, badRequest("bad_request", "?seconds=%q: give a whole number of seconds from 1 to %d", v, most)
	}
	return n, nil
}

func (s *Server) handleAdminRates(w http.ResponseWriter, r *http.Request) {
	n, p := seconds(r, rateSeconds, rateSeconds)
	if p != nil {
		p.Write(w)
		return
	}
	writeJSON(w, s.view.rates.snapshot(s.view.clock.Now(), n))
}

// deniedJSON is the answer of GET /api/v1/denied.
type deniedJSON struct {
	Now   time.Time        `json:"now"`
	Rules []deniedRuleJSON `json:"rules"`
}

func (s *Server) handleAdminDenied(w http.ResponseWriter, r *http.Request) {
	now := s.view.clock.Now()
	rules := s.view.denied.snapshot(now)
	cfg := s.state.Load().cfg
	for i := range rules {
		if p := cfg.Policy(rules[i].Policy); p != nil {
			for _, rl := range p.Rules {
				if rl.Name != rules[i].Rule {
					continue
				}
				rules[i].By = nonNil(rl.By)
				for j := range rules[i].Keys {
					rules[i].Keys[j].Shadow = rules[i].Keys[j].Shadow || p.Shadow || rl.Shadow
				}
			}
		}
	}
	writeJSON(w, deniedJSON{Now: now.UTC(), Rules: rules})
}

func (s *Server) handleAdminHealth(w http.ResponseWriter, r *http.Request) {
	n, p := seconds(r, 120, healthSeconds)
	if p != nil {
		p.Write(w)
		return
	}
	start := time.Now()
	err := s.Ready(r.Context())
	took := time.Since(start)
	s.store.observe("ping", start, err)
	now := s.view.clock.Now()
	out := healthJSON{Now: now.UTC(), Store: s.storeKind(), PingMS: float64(took.Microseconds()) / 1000}
	if err != nil {
		out.PingError = err.Error()
	}
	s.view.health.snapshot(&out, now, n)
	out.Breaker = s.state.Load().lim.Circuit()
	rs := s.view.rates.snapshot(now, 60)
	for _, sr := range rs.Series {
		if sr.Outcome == outcomeDegraded {
			out.Degraded += sr.Total
			for _, c := range sr.PerSecond {
				out.DegradedLastMinute += c
			}
		}
	}
	writeJSON(w, out)
}
