package server

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sluicerate/sluice/internal/envoy"
	"github.com/sluicerate/sluice/internal/outage"
	"github.com/sluicerate/sluice/internal/yamlfile"
	"github.com/sluicerate/sluice/store"
)

// EnvoyOptions configures the Envoy model (LoadEnvoyConfig).
type EnvoyOptions struct {
	// Load configures loading the directory.
	Load envoy.LoadOptions

	// Decide configures deciding: counting, shadow mode, headers.
	Decide envoy.Options
}

// envoyFront is a Server's envoyproxy/ratelimit model: the directory of
// its configuration files, loaded, and how requests are decided against it.
// Its zero value is off: Envoy's requests name sluice policies.
type envoyFront struct {
	cfg      atomic.Pointer[envoy.Config]
	dir      string
	opts     EnvoyOptions
	metrics  *envoyMetrics
	draining atomic.Bool
	reset    func(ctx context.Context, req *store.Request) (int, error)
}

// SetWindowReset gives the server the store's way to empty windows, for
// POST /v1/envoy/reset: reset deletes the windows of req's checks and
// returns how many held anything. Without one the endpoint answers 501.
func (s *Server) SetWindowReset(reset func(ctx context.Context, req *store.Request) (int, error)) {
	s.envoy.reset = reset
}

// LoadEnvoyConfig loads the directory of envoyproxy/ratelimit configuration
// files dir and serves its domains on Envoy's rate-limit service and /json:
// a request whose domain is configured there is decided by its descriptors
// (package envoy); one whose domain is a policy of the configuration file
// is decided as before; any other domain is OK with no limit. It is called
// once, before serving; an invalid directory is returned as an error with
// every problem.
func (s *Server) LoadEnvoyConfig(dir string, opts EnvoyOptions) error {
	if s.envoy.metrics != nil {
		return errors.New("server: the Envoy configuration is already loaded; reload it with ReloadEnvoyConfig")
	}
	cfg, err := envoy.Load(dir, opts.Load)
	if err != nil {
		return err
	}
	s.envoy.dir, s.envoy.opts = dir, opts
	s.envoy.metrics = newEnvoyMetrics(s.reg)
	s.envoy.metrics.loads.WithLabelValues().Inc()
	s.envoy.cfg.Store(cfg)
	s.logEnvoyNotes(cfg)
	return nil
}

// EnvoyConfig returns the Envoy configuration in use, or nil.
func (s *Server) EnvoyConfig() *envoy.Config { return s.envoy.cfg.Load() }

// Drain marks the server as going away: its health checks answer
// NOT_SERVING (and /healthcheck 500) while the requests in flight finish.
func (s *Server) Drain() { s.envoy.draining.Store(true) }

func (s *Server) logEnvoyNotes(cfg *envoy.Config) {
	for _, n := range cfg.Notes {
		s.log.Warn("envoy configuration: "+n, slog.String("dir", cfg.Dir))
	}
}

// ReloadEnvoyConfig reloads the directory and, when it is valid, swaps it
// in: each request is decided wholly under the old or the new files. An
// invalid directory is logged with every problem and returned; the files in
// use stay.
func (s *Server) ReloadEnvoyConfig() error {
	if s.envoy.metrics == nil {
		return errors.New("server: no Envoy configuration is loaded")
	}
	cfg, err := envoy.Load(s.envoy.dir, s.envoy.opts.Load)
	if err != nil {
		s.envoy.metrics.loadErrors.WithLabelValues().Inc()
		s.metrics.reloads.WithLabelValues("error").Inc()
		s.log.Error("Envoy configuration not reloaded; the previous one stays in use", slog.String("dir", s.envoy.dir), slog.Any("err", err))
		return err
	}
	s.envoy.cfg.Store(cfg)
	s.envoy.metrics.loads.WithLabelValues().Inc()
	s.metrics.reloads.WithLabelValues("ok").Inc()
	s.log.Info("Envoy configuration reloaded", slog.String("dir", s.envoy.dir), slog.Int("files", len(cfg.Files)), slog.Int("domains", len(cfg.Domains())))
	s.logEnvoyNotes(cfg)
	return nil
}

// WatchEnvoyConfig reloads the directory whenever a file in it changes,
// appears or goes (checked every interval; 0: never, only on reload), and
// on each value from reload, until ctx ends: as envoyproxy/ratelimit
// follows its runtime directory, Kubernetes config maps included.
func (s *Server) WatchEnvoyConfig(ctx context.Context, interval time.Duration, reload <-chan os.Signal) {
	watchChanges(ctx, interval, reload, func() []byte { return yamlfile.Sum(s.envoy.dir) }, func(signalled bool) {
		if !signalled {
			s.log.Info("the Envoy configuration changed; reloading", slog.String("dir", s.envoy.dir))
		}
		_ = s.ReloadEnvoyConfig()
	})
}

// envoyDomain reports whether a request for domain is the Envoy model's:
// the model is loaded, and the domain is configured in it or is not a
// policy of the configuration file.
func (s *Server) envoyDomain(st *state, domain string) (*envoy.Config, bool) {
	cfg := s.envoy.cfg.Load()
	if cfg == nil {
		return nil, false
	}
	if cfg.HasDomain(domain) || st.cfg.Policy(domain) == nil {
		return cfg, true
	}
	return nil, false
}

// decideEnvoy answers req with the Envoy model, counting its metrics.
func (s *Server) decideEnvoy(ctx context.Context, st *state, cfg *envoy.Config, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	res, err := cfg.Decide(ctx, st.lim, req, s.envoy.opts.Decide)
	m := s.envoy.metrics
	switch {
	case errors.Is(err, envoy.ErrBadRequest):
		m.errors.WithLabelValues("service_error").Inc()
		return nil, status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, envoy.ErrUnavailable):
		m.errors.WithLabelValues("redis_error").Inc()
		s.outage.Failed(ctx, outage.Failure{Msg: "store failed; decided by on_error", Tag: slog.String("api", "envoy"),
			Kind: outage.Domain, Name: req.GetDomain(), Err: err, Attrs: []slog.Attr{slog.Bool("allowed", false)}})
		return nil, status.Error(codes.Unavailable, "the store does not answer: "+err.Error())
	case err != nil:
		s.log.Error("deciding an Envoy request", slog.String("domain", req.GetDomain()), slog.Any("err", err))
		return nil, status.Error(codes.Internal, "internal error")
	}
	switch {
	case res.StoreErr != nil:
		s.outage.Failed(ctx, outage.Failure{Msg: "store failed; decided by on_error", Tag: slog.String("api", "envoy"),
			Kind: outage.Domain, Name: req.GetDomain(), Err: res.StoreErr, Attrs: []slog.Attr{slog.Bool("allowed", res.Decision.Allowed)}})
	case !res.Decision.Unlimited:
		s.outage.Answered(ctx)
	}
	if !res.Decision.Unlimited {
		s.metrics.decision(envoy.PolicyName(req.GetDomain()), &res.Decision)
	}
	m.count(req.GetDomain(), res.Descriptors)
	return res.Response, nil
}

// envoyMetrics are envoyproxy/ratelimit's Prometheus metrics, with the
// names and labels its statsd mapping gives them, beside sluice's own.
type envoyMetrics struct {
	totalHits, overLimit, nearLimit, withinLimit, shadowMode *prometheus.CounterVec // domain, key1, key2
	loads, loadErrors                                        *prometheus.CounterVec
	errors                                                   *prometheus.CounterVec // err_type
}

func newEnvoyMetrics(reg prometheus.Registerer) *envoyMetrics {
	vec := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	keys := []string{"domain", "key1", "key2"}
	m := &envoyMetrics{
		totalHits:   vec("ratelimit_service_rate_limit_total_hits", "Hits of each descriptor key, as envoyproxy/ratelimit counts them.", keys...),
		overLimit:   vec("ratelimit_service_rate_limit_over_limit", "Hits over the limit, by descriptor key.", keys...),
		nearLimit:   vec("ratelimit_service_rate_limit_near_limit", "Hits within the limit but past 80% of it, by descriptor key.", keys...),
		withinLimit: vec("ratelimit_service_rate_limit_within_limit", "Hits within the limit, by descriptor key.", keys...),
		shadowMode:  vec("ratelimit_service_rate_limit_shadow_mode", "Hits over the limit admitted by shadow_mode or quota_mode, by descriptor key.", keys...),
		loads:       vec("ratelimit_service_config_load_success", "Envoy configuration directory loads that succeeded."),
		loadErrors:  vec("ratelimit_service_config_load_error", "Envoy configuration directory loads that failed."),
		errors:      vec("ratelimit_service_should_rate_limit_error", "ShouldRateLimit calls that failed, by err_type (redis_error, service_error).", "err_type"),
	}
	reg.MustRegister(m.totalHits, m.overLimit, m.nearLimit, m.withinLimit, m.shadowMode, m.loads, m.loadErrors, m.errors)
	return m
}

// count counts a request's descriptors. A key "domain.a.b.c" is labelled
// key1 "a" and key2 "b.c" (key2 empty for a key of one level).
func (m *envoyMetrics) count(domain string, ds []envoy.DescriptorResult) {
	for _, d := range ds {
		if d.Stat == "" || d.Outcome == envoy.Unlimited {
			continue
		}
		rest := d.Stat[min(len(domain)+1, len(d.Stat)):]
		key1, key2 := rest, ""
		if i := indexDot(rest); i >= 0 {
			key1, key2 = rest[:i], rest[i+1:]
		}
		hits := float64(d.Hits)
		m.totalHits.WithLabelValues(domain, key1, key2).Add(hits)
		switch d.Outcome {
		case envoy.Over:
			m.overLimit.WithLabelValues(domain, key1, key2).Add(hits)
		case envoy.Shadowed:
			m.overLimit.WithLabelValues(domain, key1, key2).Add(hits)
			m.shadowMode.WithLabelValues(domain, key1, key2).Add(hits)
		case envoy.Within:
			m.withinLimit.WithLabelValues(domain, key1, key2).Add(hits)
			if d.Near {
				m.nearLimit.WithLabelValues(domain, key1, key2).Add(hits)
			}
		}
	}
}

func indexDot(s string) int {
	for i := 0; i < len(s); i++ {
		if s[i] == '.' {
			return i
		}
	}
	return -1
}
