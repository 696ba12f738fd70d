package main

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/internal/deploy"
	"github.com/sluicerate/sluice/internal/envoy/xds"
	"github.com/sluicerate/sluice/internal/tlsfiles"
	"github.com/sluicerate/sluice/internal/tracing"
)

// settings resolves the flags over cfg, the configuration file (empty
// when none); log receives the TLS files' reloads.
func (d *deployFlags) settings(cfg *config.Config, log *slog.Logger) (*deploy.Settings, error) {
	s := &deploy.Settings{MetricsAddr: *d.metricsAddr, MetricsPath: *d.metricsPath, MaxInFlight: *d.maxInFlight, RequestTimeout: *d.requestTimeout,
		StoreTimeout: *d.storeTimeout}
	var err error
	for _, l := range []struct {
		flag, spec string
		file       *config.ListenerTLS
		to         **tls.Config
	}{{"http-tls", *d.httpTLS, cfg.TLS.HTTP, &s.HTTPTLS}, {"grpc-tls", *d.grpcTLS, cfg.TLS.GRPC, &s.GRPCTLS}, {"admin-tls", *d.adminTLS, cfg.TLS.Admin, &s.AdminTLS}} {
		if *l.to, err = listenerTLS(l.flag, l.spec, l.file, log); err != nil {
			return nil, err
		}
	}
	if *d.redisTLS != "" {
		m, err := spec("redis-tls", *d.redisTLS, "ca", "cert", "key", "skip-hostname")
		if err != nil {
			return nil, err
		}
		if s.RedisTLS, err = tlsfiles.NewClient(tlsfiles.Client{CA: m["ca"], Cert: m["cert"], Key: m["key"], SkipHostname: m["skip-hostname"] == "true", Log: log}); err != nil {
			return nil, fmt.Errorf("--redis-tls: %w", err)
		}
	}
	if s.XDS, s.XDSForce, err = d.xdsOptions(cfg, log); err != nil {
		return nil, err
	}
	if *d.tracing || *d.tracingEndpoint != "" {
		rate := *d.tracingRate
		if rate < 0 || rate > 1 {
			return nil, fmt.Errorf("--tracing-sampling-rate %v: give a share from 0 to 1", rate)
		}
		s.Tracing = &tracing.Config{ServiceName: d.env.serviceName, ServiceNamespace: d.env.namespace, ServiceInstanceID: d.env.instance,
			SamplingRate: &rate, Protocol: *d.tracingProtocol, Endpoint: *d.tracingEndpoint}
	}
	switch {
	case *d.maxInFlight < 0, *d.grpcMaxStreams < 0, *d.requestTimeout < 0, *d.storeTimeout < 0, *d.grpcMaxAge < 0, *d.grpcMaxAgeGrace < 0:
		return nil, fmt.Errorf("--max-in-flight, --grpc-max-streams, --request-timeout, --store-timeout and --grpc-max-connection-age(-grace) take 0 (none, or the default) or more")
	}
	if s.GRPCTLS != nil {
		s.GRPCOpts = append(s.GRPCOpts, grpc.Creds(credentials.NewTLS(s.GRPCTLS)))
	}
	if n := *d.grpcMaxStreams; n > 0 {
		s.GRPCOpts = append(s.GRPCOpts, grpc.MaxConcurrentStreams(uint32(n)))
	}
	if *d.grpcMaxAge > 0 {
		s.GRPCOpts = append(s.GRPCOpts, grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionAge: *d.grpcMaxAge, MaxConnectionAgeGrace: *d.grpcMaxAgeGrace}))
	}
	return s, nil
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
func (d *deployFlags) xdsOptions(cfg *config.Config, log *slog.Logger) (*xds.Options, bool, error) {
	var file config.XDS
	if cfg.Envoy != nil && cfg.Envoy.XDS != nil {
		file = *cfg.Envoy.XDS
	}
	server := first(*d.xds, file.Server)
	if server == "" {
		return nil, false, nil
	}
	if _, _, err := net.SplitHostPort(server); err != nil {
		return nil, false, fmt.Errorf("--envoy-xds %q: give the control plane's host:port, such as envoy-gateway:18001", server)
	}
	e := d.env
	o := &xds.Options{Server: server, NodeID: first(*d.xdsNode, file.NodeID), NodeMetadata: e.nodeMetadata, Headers: e.headers,
		ConnectRetry: first(e.connectRetry, file.ConnectRetry), MaxMessageSize: first(e.maxMessage, int(file.MaxMessageBytes)),
		Backoff: xds.Backoff{Initial: first(e.backoffInit, file.BackoffInitial), Max: first(e.backoffMax, file.BackoffMax),
			RandomFactor: e.backoffRandom, NoJitter: e.noJitter}}
	if o.NodeMetadata == nil {
		o.NodeMetadata = file.NodeMetadata
	}
	if o.Headers == nil {
		o.Headers = file.Headers
	}
	var c *tlsfiles.Client
	switch {
	case *d.xdsTLS == "system":
		c = &tlsfiles.Client{}
	case *d.xdsTLS != "":
		m, err := spec("envoy-xds-tls", *d.xdsTLS, "ca", "cert", "key", "server-name")
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
	return o, *d.xdsForce || file.ForceStart, nil
}

// first returns the first of vs that is not the zero value.
func first[T comparable](vs ...T) T {
	var zero T
	for _, v := range vs {
		if v != zero {
			return v
		}
	}
	return zero
}
