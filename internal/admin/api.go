package admin

import (
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/adminauth"
	"github.com/sluicerate/sluice/internal/front"
	"github.com/sluicerate/sluice/internal/wire"
	"github.com/sluicerate/sluice/store"
)

// configJSON is the answer of GET /api/v1/config.
type configJSON struct {
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

	Policies  []policyJSON        `json:"policies"`
	Schedules []wire.ScheduleJSON `json:"schedules"`

	// TopKeys is how many denied keys the view keeps per rule.
	TopKeys int `json:"top_keys"`

	// Overrides says whether the server applies runtime overrides
	// (/api/v1/overrides), and Access what the request's token allows:
	// "write" to change them, or "read".
	Overrides bool   `json:"overrides"`
	Access    string `json:"access"`
}

type policyJSON struct {
	Name     string          `json:"name"`
	Penalize bool            `json:"penalize"`
	Shadow   bool            `json:"shadow"`
	By       []string        `json:"by"` // every attribute its rules read
	Rules    []wire.RuleJSON `json:"rules"`
}

// storeKind names the server's store for the view: the Inspector's name,
// else memory for a store.Local, else custom.
func (a *admin) storeKind() string {
	if a.insp != nil {
		return a.insp.Name()
	}
	if _, ok := a.f.Store.Store.(store.Local); ok {
		return "memory"
	}
	return "custom"
}

func (a *admin) handleConfig(w http.ResponseWriter, r *http.Request) {
	st := a.f.State()
	out := configJSON{Now: a.v.clock.Now().UTC(), File: st.Config.File, LoadedAt: st.Loaded.UTC(), Reload: a.v.lastReload(),
		Store: a.storeKind(), Entries: a.insp != nil, Queues: a.insp != nil, TopKeys: deniedPerRule,
		Policies: []policyJSON{}, Schedules: []wire.ScheduleJSON{}, Overrides: a.overrides, Access: adminauth.AccessOf(r).String()}
	for i := range st.Config.Policies {
		p := &st.Config.Policies[i]
		pj := policyJSON{Name: p.Name, Penalize: p.Penalize, Shadow: p.Shadow, By: []string{}}
		for _, r := range p.Rules {
			for _, a := range r.By {
				if !slices.Contains(pj.By, a) {
					pj.By = append(pj.By, a)
				}
			}
			pj.Rules = append(pj.Rules, wire.NewRuleJSON(p, &r))
		}
		out.Policies = append(out.Policies, pj)
	}
	for i := range st.Config.Schedules {
		out.Schedules = append(out.Schedules, wire.NewScheduleJSON(&st.Config.Schedules[i]))
	}
	front.WriteJSON(w, out)
}

// leasesJSON is the answer of GET /api/v1/leases.
type leasesJSON struct {
	Now   time.Time       `json:"now"`
	Rules []leaseRuleJSON `json:"rules"`
}

// leaseRuleJSON is one concurrency rule and the leases this server granted
// of it (front.LeaseFigures): every concurrency rule of the configuration,
// in its order, then any rule this server granted leases of that a reload
// removed (Concurrency 0).
type leaseRuleJSON struct {
	Policy      string   `json:"policy"`
	Rule        string   `json:"rule"`
	By          []string `json:"by"`
	Concurrency int64    `json:"concurrency"`
	LeaseMS     int64    `json:"lease_ms"`

	// InFlight counts this server's leases of the rule alive now, over all
	// its keys; Expired those that expired unreleased since it started.
	InFlight int64 `json:"in_flight"`
	Expired  int64 `json:"expired"`
}

func (a *admin) handleLeases(w http.ResponseWriter, r *http.Request) {
	figures := a.f.Metrics.Leases()
	out := leasesJSON{Now: a.v.clock.Now().UTC(), Rules: []leaseRuleJSON{}}
	cfg := a.f.State().Config
	for i := range cfg.Policies {
		p := &cfg.Policies[i]
		for _, rl := range p.Rules {
			if rl.Concurrency <= 0 {
				continue
			}
			lr := leaseRuleJSON{Policy: p.Name, Rule: rl.Name, By: wire.NonNil(rl.By), Concurrency: rl.Concurrency, LeaseMS: wire.Millis(rl.Lease)}
			if j := slices.IndexFunc(figures, func(f front.LeaseFigures) bool { return f.Policy == p.Name && f.Rule == rl.Name }); j >= 0 {
				lr.InFlight, lr.Expired = figures[j].InFlight, figures[j].Expired
				figures = slices.Delete(figures, j, j+1)
			}
			out.Rules = append(out.Rules, lr)
		}
	}
	for _, f := range figures {
		out.Rules = append(out.Rules, leaseRuleJSON{Policy: f.Policy, Rule: f.Rule, By: []string{}, InFlight: f.InFlight, Expired: f.Expired})
	}
	front.WriteJSON(w, out)
}

// seconds reads the ?seconds= parameter: how far back a series goes.
func seconds(r *http.Request, def, most int) (int, *httplimit.Problem) {
	v := r.URL.Query().Get("seconds")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > most {
		return 0, front.BadRequest("bad_request", "?seconds=%q: give a whole number of seconds from 1 to %d", v, most)
	}
	return n, nil
}

func (a *admin) handleRates(w http.ResponseWriter, r *http.Request) {
	n, p := seconds(r, rateSeconds, rateSeconds)
	if p != nil {
		p.Write(w)
		return
	}
	front.WriteJSON(w, a.v.rates.snapshot(a.v.clock.Now(), n))
}

// deniedJSON is the answer of GET /api/v1/denied.
type deniedJSON struct {
	Now   time.Time        `json:"now"`
	Rules []deniedRuleJSON `json:"rules"`
}

func (a *admin) handleDenied(w http.ResponseWriter, r *http.Request) {
	now := a.v.clock.Now()
	rules := a.v.denied.snapshot(now)
	cfg := a.f.State().Config
	for i := range rules {
		if p := cfg.Policy(rules[i].Policy); p != nil {
			for _, rl := range p.Rules {
				if rl.Name != rules[i].Rule {
					continue
				}
				rules[i].By = wire.NonNil(rl.By)
				for j := range rules[i].Keys {
					rules[i].Keys[j].Shadow = rules[i].Keys[j].Shadow || p.Shadow || rl.Shadow
				}
			}
		}
	}
	front.WriteJSON(w, deniedJSON{Now: now.UTC(), Rules: rules})
}

func (a *admin) handleHealth(w http.ResponseWriter, r *http.Request) {
	n, p := seconds(r, 120, healthSeconds)
	if p != nil {
		p.Write(w)
		return
	}
	start := time.Now()
	err := a.f.Ping(r.Context())
	took := time.Since(start)
	now := a.v.clock.Now()
	out := healthJSON{Now: now.UTC(), Store: a.storeKind(), PingMS: float64(took.Microseconds()) / 1000}
	if err != nil {
		out.PingError = err.Error()
	}
	a.v.health.snapshot(&out, now, n)
	out.Breaker = a.f.State().Limiter.Circuit()
	rs := a.v.rates.snapshot(now, 60)
	for _, sr := range rs.Series {
		if sr.Outcome == outcomeDegraded {
			out.Degraded += sr.Total
			for _, c := range sr.PerSecond {
				out.DegradedLastMinute += c
			}
		}
	}
	front.WriteJSON(w, out)
}
