package deploy

import (
	"cmp"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/internal/envoy"
	"github.com/sluicerate/sluice/internal/envoy/decide"
	"github.com/sluicerate/sluice/internal/envoy/rls"
	"github.com/sluicerate/sluice/internal/envoy/xds"
	"github.com/sluicerate/sluice/internal/tlsfiles"
	"github.com/sluicerate/sluice/internal/tracing"
)

// Resolve resolves the flags, the environment applied, over cfg, the
// configuration file (empty when none); log receives the TLS files'
// reloads.
func (f *Flags) Resolve(cfg *config.Config, log *slog.Logger) (*Settings, error) {
	s := &Settings{MetricsAddr: f.metricsAddr, MetricsPath: f.metricsPath, MaxInFlight: f.maxInFlight, RequestTimeout: f.requestTimeout,
		StoreTimeout: f.storeTimeout}
	var err error
	for _, l := range []struct {
		flag, spec string
		file       *config.ListenerTLS
		to         **tls.Config
	}{{"http-tls", f.httpTLS, cfg.TLS.HTTP, &s.HTTPTLS}, {"grpc-tls", f.grpcTLS, cfg.TLS.GRPC, &s.GRPCTLS}, {"admin-tls", f.adminTLS, cfg.TLS.Admin, &s.AdminTLS}} {
		if *l.to, err = listenerTLS(l.flag, l.spec, l.file, log); err != nil {
			return nil, err
		}
	}
	if f.redisTLS != "" {
		m, err := spec("redis-tls", f.redisTLS, "ca", "cert", "key", "skip-hostname")
		if err != nil {
			return nil, err
		}
		if s.RedisTLS, err = tlsfiles.NewClient(tlsfiles.Client{CA: m["ca"], Cert: m["cert"], Key: m["key"], SkipHostname: m["skip-hostname"] == "true", Log: log}); err != nil {
			return nil, fmt.Errorf("--redis-tls: %w", err)
		}
	}
	if s.XDS, s.XDSForce, err = f.xdsOptions(cfg, log); err != nil {
		return nil, err
	}
	if f.tracing || f.tracingEndpoint != "" {
		rate := f.tracingRate
		if rate < 0 || rate > 1 {
			return nil, fmt.Errorf("--tracing-sampling-rate %v: give a share from 0 to 1", rate)
		}
		s.Tracing = &tracing.Config{ServiceName: f.env.serviceName, ServiceNamespace: f.env.namespace, ServiceInstanceID: f.env.instance,
			SamplingRate: &rate, Protocol: f.tracingProtocol, Endpoint: f.tracingEndpoint}
	}
	if s.GRPCOpts, err = f.grpcOptions(s.GRPCTLS); err != nil {
		return nil, err
	}
	return s, nil
}

// grpcOptions are the gRPC server's options: its TLS and its bounds.
func (f *Flags) grpcOptions(c *tls.Config) ([]grpc.ServerOption, error) {
	switch {
	case f.maxInFlight < 0, f.grpcMaxStreams < 0, f.requestTimeout < 0, f.storeTimeout < 0, f.grpcMaxAge < 0, f.grpcMaxAgeGrace < 0:
		return nil, fmt.Errorf("--max-in-flight, --grpc-max-streams, --request-timeout, --store-timeout and --grpc-max-connection-age(-grace) take 0 (none, or the default) or more")
	}
	var opts []grpc.ServerOption
	if c != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(c)))
	}
	if n := f.grpcMaxStreams; n > 0 {
		opts = append(opts, grpc.MaxConcurrentStreams(uint32(n)))
	}
	if f.grpcMaxAge > 0 {
		opts = append(opts, grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionAge: f.grpcMaxAge, MaxConnectionAgeGrace: f.grpcMaxAgeGrace}))
	}
	return opts, nil
}

// EnvoyOptions are the options of the envoyproxy/ratelimit model: loading
// its files (or the control plane's resources), deciding, readiness.
func (f *Flags) EnvoyOptions() (rls.Options, error) {
	o := rls.Options{Load: envoy.LoadOptions{MergeDomains: f.merge, CalendarUnits: f.calendar}, RequireDomain: f.requireDomain}
	switch f.counting {
	case "all-or-nothing":
	case "per-descriptor":
		o.Decide.Counting = decide.PerDescriptor
	default:
		return o, fmt.Errorf("--envoy-counting %q: use all-or-nothing or per-descriptor", f.counting)
	}
	h := &o.Decide.Headers
	for _, name := range strings.Split(f.headers, ",") {
		switch strings.TrimSpace(strings.ToLower(name)) {
		case "", "none":
		case "ratelimit":
			h.RateLimit = true
		case "x-ratelimit":
			h.XRateLimit = true
		case "both":
			h.RateLimit, h.XRateLimit = true, true
		default:
			return o, fmt.Errorf("--envoy-headers %q: use ratelimit, x-ratelimit or both", name)
		}
	}
	h.LimitName, h.RemainingName, h.ResetName = f.env.limitName, f.env.remainingName, f.env.resetName
	o.Decide.ShadowMode, o.Decide.DynamicMetadata, o.Decide.QuotaMode = f.shadow, f.dynMeta, f.quota
	return o, nil
}

// listenerTLS is a listener's TLS from its flag's spec, else from the
// file's section; nil for plain text.
func listenerTLS(flagName, s string, file *config.ListenerTLS, log *slog.Logger) (*tls.Config, error) {
	var l tlsfiles.Server
	switch {
	case s != "":
		m, err := spec(flagName, s, "cert", "key", "client-ca", "client-san")
		if err != nil {
			return nil, err
		}
		l = tlsfiles.Server{Cert: m["cert"], Key: m["key"], ClientCA: m["client-ca"], ClientSAN: m["client-san"]}
	case file != nil:
		l = tlsfiles.Server{Cert: file.Cert, Key: file.Key, ClientCA: file.ClientCA, ClientSAN: file.ClientSAN}
	default:
		return nil, nil
	}
	l.Log = log
	cfg, err := tlsfiles.ServerConfig(l)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", flagName, err)
	}
	return cfg, nil
}

// xdsOptions is the xDS client's configuration, nil when the Envoy
// configuration does not come from a control plane, and whether to serve
// before its first version.
func (f *Flags) xdsOptions(cfg *config.Config, log *slog.Logger) (*xds.Options, bool, error) {
	var file config.XDS
	if cfg.Envoy != nil && cfg.Envoy.XDS != nil {
		file = *cfg.Envoy.XDS
	}
	server := cmp.Or(f.xds, file.Server)
	if server == "" {
		return nil, false, nil
	}
	if _, _, err := net.SplitHostPort(server); err != nil {
		return nil, false, fmt.Errorf("--envoy-xds %q: give the control plane's host:port, such as envoy-gateway:18001", server)
	}
	e := f.env
	o := &xds.Options{Server: server, NodeID: cmp.Or(f.xdsNode, file.NodeID), NodeMetadata: e.nodeMetadata, Headers: e.headers,
		ConnectRetry: cmp.Or(e.connectRetry, file.ConnectRetry), MaxMessageSize: cmp.Or(e.maxMessage, int(file.MaxMessageBytes)),
		Backoff: xds.Backoff{Initial: cmp.Or(e.backoffInit, file.BackoffInitial), Max: cmp.Or(e.backoffMax, file.BackoffMax),
			RandomFactor: e.backoffRandom, NoJitter: e.noJitter}}
	if o.NodeMetadata == nil {
		o.NodeMetadata = file.NodeMetadata
	}
	if o.Headers == nil {
		o.Headers = file.Headers
	}
	var c *tlsfiles.Client
	switch {
	case f.xdsTLS == "system":
		c = &tlsfiles.Client{}
	case f.xdsTLS != "":
		m, err := spec("envoy-xds-tls", f.xdsTLS, "ca", "cert", "key", "server-name")
		if err != nil {
			return nil, false, err
		}
		c = &tlsfiles.Client{CA: m["ca"], Cert: m["cert"], Key: m["key"], ServerName: m["server-name"]}
	case file.TLS != nil:
		c = &tlsfiles.Client{CA: file.TLS.CA, Cert: file.TLS.Cert, Key: file.TLS.Key, ServerName: file.TLS.ServerName, SkipHostname: file.TLS.InsecureSkipVerify}
	}
	if c != nil {
		c.Log = log
		files, err := tlsfiles.NewClient(*c)
		if err != nil {
			return nil, false, fmt.Errorf("--envoy-xds-tls: %w", err)
		}
		o.TLS = files
	}
	return o, f.xdsForce || file.ForceStart, nil
}
