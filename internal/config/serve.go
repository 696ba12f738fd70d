package config

import "time"

// The sections sluice serve reads at start (a reload does not change
// them): where its envoyproxy/ratelimit configuration comes from, and its
// listeners' TLS.

// Envoy is the envoy section.
type Envoy struct {
	// XDS, when set, takes the envoyproxy/ratelimit configuration from an
	// xDS control plane instead of files (CONFIG_TYPE=GRPC_XDS_SOTW).
	XDS *XDS
}

// XDS is envoy.xds: a control plane serving RateLimitConfig resources, as
// Envoy Gateway's does. The zero value of every field but Server is
// envoyproxy/ratelimit's default.
type XDS struct {
	// Server is the control plane's host:port.
	Server string

	// NodeID is the node sluice says it is (default "default"), with
	// NodeMetadata; Headers go with every stream.
	NodeID       string
	NodeMetadata map[string]string
	Headers      map[string]string

	// ForceStart serves before the first version arrives, with no domain
	// (FORCE_START_WITHOUT_INITIAL_CONFIG); otherwise the server is not
	// ready until it has.
	ForceStart bool

	// TLS, when set, connects with TLS: the control plane's CA, the client
	// certificate and key, the name to check.
	TLS *TLS

	// ConnectRetry, BackoffInitial and BackoffMax space the attempts to
	// connect and to open a stream (package xds); MaxMessageBytes is the
	// largest response taken. 0: the defaults.
	ConnectRetry, BackoffInitial, BackoffMax time.Duration
	MaxMessageBytes                          int64
}

// Listeners is the tls section: the TLS of sluice serve's listeners; nil
// for one in plain text.
type Listeners struct {
	HTTP, GRPC, Admin *ListenerTLS
}

// ListenerTLS is one listener's TLS.
type ListenerTLS struct {
	// Cert and Key are the PEM files of the certificate chain and its key,
	// read again when they change.
	Cert, Key string

	// ClientCA, when set, is the PEM file of the authorities a client's
	// certificate must chain to (mutual TLS); ClientSAN, a name it must
	// hold.
	ClientCA, ClientSAN string
}

// envoy converts the envoy section.
func (d *decoder) envoy(f *envoyYAML) *Envoy {
	if f == nil {
		return nil
	}
	e := &Envoy{}
	if x := f.XDS.V; x != nil {
		e.XDS = &XDS{Server: x.Server.V, NodeID: x.NodeID.V, NodeMetadata: x.NodeMetadata.V, Headers: x.Headers.V,
			ForceStart: x.ForceStart.V, TLS: d.tls(x.TLS), ConnectRetry: x.ConnectRetry.V,
			BackoffInitial: x.BackoffInitial.V, BackoffMax: x.BackoffMax.V, MaxMessageBytes: x.MaxMessageBytes.V}
	}
	return e
}

// listeners converts the tls section.
func (d *decoder) listeners(f *listenersYAML) Listeners {
	if f == nil {
		return Listeners{}
	}
	return Listeners{HTTP: d.listener(f.HTTP), GRPC: d.listener(f.GRPC), Admin: d.listener(f.Admin)}
}

// listener converts one listener's TLS, its paths resolved from the file's
// directory.
func (d *decoder) listener(v node[*listenerTLSYAML]) *ListenerTLS {
	f := v.V
	if f == nil {
		return nil
	}
	l := &ListenerTLS{Cert: f.Cert.V, Key: f.Key.V, ClientCA: f.ClientCA.V, ClientSAN: f.ClientSAN.V}
	if l.ClientSAN != "" && l.ClientCA == "" {
		d.Errorf(f.ClientSAN.Node, "%s.client_san needs client_ca: the authorities that sign the certificate holding it", v.what)
	}
	d.files(v.what, pemFile{"cert", &l.Cert, f.Cert.Node}, pemFile{"key", &l.Key, f.Key.Node}, pemFile{"client_ca", &l.ClientCA, f.ClientCA.Node})
	return l
}
