package config

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestParseServeSections: envoy.xds and tls, alone in a file, with paths
// resolved from the file's directory.
func TestParseServeSections(t *testing.T) {
	c, err := Parse("/etc/sluice/sluice.yaml", []byte(`envoy:
  xds:
    server: envoy-gateway:18001
    node_id: envoy-ratelimit
    node_metadata: {zone: a}
    headers: {X-Tenant: t1}
    force_start: true
    tls: {ca: /certs/ca.crt, cert: /certs/tls.crt, key: /certs/tls.key, server_name: envoy-gateway}
    connect_retry: 1s
    backoff_initial: 2s
    backoff_max: 20s
    max_message_bytes: 8388608
tls:
  grpc: {cert: tls.crt, key: tls.key, client_ca: ca.crt, client_san: envoy}
  admin: {cert: /a.crt, key: /a.key}
`))
	if err != nil {
		t.Fatal(err)
	}
	want := &XDS{Server: "envoy-gateway:18001", NodeID: "envoy-ratelimit", NodeMetadata: map[string]string{"zone": "a"},
		Headers: map[string]string{"X-Tenant": "t1"}, ForceStart: true,
		TLS:          &TLS{CA: "/certs/ca.crt", Cert: "/certs/tls.crt", Key: "/certs/tls.key", ServerName: "envoy-gateway"},
		ConnectRetry: time.Second, BackoffInitial: 2 * time.Second, BackoffMax: 20 * time.Second, MaxMessageBytes: 8 << 20}
	if c.Envoy == nil || !reflect.DeepEqual(c.Envoy.XDS, want) {
		t.Errorf("envoy.xds %+v, want %+v", c.Envoy, want)
	}
	wantTLS := Listeners{GRPC: &ListenerTLS{Cert: "/etc/sluice/tls.crt", Key: "/etc/sluice/tls.key", ClientCA: "/etc/sluice/ca.crt", ClientSAN: "envoy"},
		Admin: &ListenerTLS{Cert: "/a.crt", Key: "/a.key"}}
	if !reflect.DeepEqual(c.TLS, wantTLS) {
		t.Errorf("tls %+v, want %+v", c.TLS, wantTLS)
	}
}

func TestParseServeErrors(t *testing.T) {
	for _, tt := range []struct{ name, file, want string }{
		{"no server", "envoy:\n  xds:\n    node_id: x\n", "sluice.yaml:3:5: envoy.xds has no server; add server: the control plane's host:port"},
		{"bad server", "envoy:\n  xds:\n    server: nowhere\n", `server "nowhere" is not host:port`},
		{"bad header", "envoy:\n  xds:\n    server: a:1\n    headers: {\"bad header\": x}\n", `"bad header" is not valid`},
		{"half client pair", "envoy:\n  xds:\n    server: a:1\n    tls: {cert: a.crt}\n", "envoy.xds.tls needs both cert and key"},
		{"listener without key", "tls:\n  http: {cert: a.crt}\n", "tls.http has no key"},
		{"san without ca", "tls:\n  grpc: {cert: a, key: b, client_san: x}\n", "tls.grpc.client_san needs client_ca"},
		{"unknown listener", "tls:\n  https: {cert: a, key: b}\n", `unknown field "https" in tls; did you mean "http"?`},
		{"small message", "envoy:\n  xds:\n    server: a:1\n    max_message_bytes: 10\n", "max_message_bytes is 10; use a size in bytes from 1024"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Parse("sluice.yaml", []byte(tt.file)); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want it to contain %q", err, tt.want)
			}
		})
	}
}
