package main

import (
	"crypto/tls"
	"crypto/x509"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/sluicerate/sluice/internal/tlsfiles/tlsfilestest"
)

// poolOf is a pool of the one authority c.
func poolOf(c *x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c)
	return p
}

// controlPlaneCreds are the TLS credentials of a control plane as Envoy
// Gateway serves its xDS: its own certificate of ca, and client
// certificates of ca required.
func controlPlaneCreds(t *testing.T, ca *tlsfilestest.CA) grpc.ServerOption {
	t.Helper()
	return grpc.Creds(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{ca.Pair(t, 100, "127.0.0.1", "envoy-gateway")},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: poolOf(ca.Cert), MinVersion: tls.VersionTLS12}))
}
