package rls

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/sluicerate/sluice/internal/envoy"
	"github.com/sluicerate/sluice/internal/envoy/xds"
	"github.com/sluicerate/sluice/internal/front"
)

// UseXDS serves the envoyproxy/ratelimit model from a control plane, whose
// versions come through Apply; status is its client's. Until the first
// version, Envoy's requests are answered UNAVAILABLE and the server is not
// ready, unless force (FORCE_START_WITHOUT_INITIAL_CONFIG): it then serves
// at once with no domain, every request OK. It is called once, before
// serving, instead of Load.
func (e *Front) UseXDS(opts Options, force bool, status func() xds.Status) error {
	if e.metrics != nil {
		return errors.New("server: the Envoy configuration is already loaded")
	}
	e.opts, e.xds = opts, status
	e.metrics = newMetrics(e.reg)
	if force {
		empty, err := envoy.Parse(nil, opts.Load)
		if err != nil {
			return err
		}
		e.use(empty)
	}
	e.f.AddReadiness(e.ready)
	return nil
}

// Apply loads one version's documents from the control plane and, when
// they are valid, swaps them in: each request is decided wholly under the
// old or the new version. An invalid version is returned with every
// problem, for the client to refuse; the version in use stays.
func (e *Front) Apply(version string, docs []envoy.Source) error {
	cfg, err := envoy.Parse(docs, e.opts.Load)
	e.f.Metrics.Reload(err)
	if err != nil {
		e.metrics.loadErrors.WithLabelValues().Inc()
		return err
	}
	e.applied.Store(&xdsVersion{version: version, resources: len(docs), at: time.Now(), cfg: cfg})
	e.use(cfg)
	e.metrics.loads.WithLabelValues().Inc()
	e.f.Log.Info("Envoy configuration from the xDS control plane in use", slog.String("version", version),
		slog.Int("resources", len(docs)), slog.Int("domains", len(cfg.Domains())))
	e.logNotes(cfg)
	return nil
}

// pending reports whether the configuration is still awaited from a
// control plane.
func (e *Front) pending() bool { return e.xds != nil && e.cfg.Load() == nil }

// ready is the front's readiness check: a configuration awaited from a
// control plane, or, with RequireDomain, one with no domain, is not.
func (e *Front) ready() error {
	cfg := e.cfg.Load()
	switch {
	case e.pending():
		return fmt.Errorf("no Envoy configuration yet: waiting for the first version from the xDS control plane at %s", e.xds().Server)
	case e.opts.RequireDomain && (cfg == nil || len(cfg.Domains()) == 0):
		return errors.New("the Envoy configuration has no domain yet (HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED)")
	}
	return nil
}

// xdsVersion is a version from the control plane as applied: stored with
// its configuration, so that /rlconfig names the version of the
// configuration it shows (the client's status follows a moment later).
type xdsVersion struct {
	version   string
	resources int
	at        time.Time
	cfg       *envoy.Config
}

// xdsRLConfig is /rlconfig when the configuration comes from a control
// plane: a first line saying where from and which version, then that
// version's configuration.
func (e *Front) xdsRLConfig() string {
	server := e.xds().Server
	v := e.applied.Load()
	if v == nil {
		head := fmt.Sprintf("# xDS control plane %s: no version applied yet\n", server)
		if cfg := e.cfg.Load(); cfg != nil { // FORCE_START_WITHOUT_INITIAL_CONFIG's empty one
			return head + cfg.Dump()
		}
		return head
	}
	return fmt.Sprintf("# xDS control plane %s: version %s, %d resources, applied %s\n", server, v.version, v.resources,
		v.at.UTC().Format(time.RFC3339)) + v.cfg.Dump()
}

// configJSON is the answer of the admin listener's GET /api/v1/envoy/config.
type configJSON struct {
	Source  string   `json:"source"` // "files" or "xds"
	Dir     string   `json:"dir,omitempty"`
	Domains []string `json:"domains"`
	Ready   bool     `json:"ready"`

	// The control plane's, with source "xds".
	Server        string     `json:"server,omitempty"`
	Connected     bool       `json:"connected,omitempty"`
	Version       string     `json:"version,omitempty"`
	Resources     int        `json:"resources,omitempty"`
	Applied       *time.Time `json:"applied,omitempty"`
	Rejected      string     `json:"rejected,omitempty"`
	RejectedError string     `json:"rejected_error,omitempty"`
	LastError     string     `json:"last_error,omitempty"`
}

func (e *Front) handleConfig(w http.ResponseWriter, r *http.Request) {
	out := configJSON{Source: "files", Dir: e.dir, Domains: []string{}, Ready: e.ready() == nil}
	if cfg := e.cfg.Load(); cfg != nil {
		out.Domains = cfg.Domains()
	}
	if e.xds != nil {
		st := e.xds()
		out.Source, out.Server, out.Connected, out.Version, out.Resources = "xds", st.Server, st.Connected, st.Version, st.Resources
		out.Rejected, out.RejectedError, out.LastError = st.Rejected, st.RejectedError, st.LastError
		if !st.Applied.IsZero() {
			out.Applied = &st.Applied
		}
	}
	front.WriteJSON(w, out)
}
