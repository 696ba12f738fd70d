// Package tlsfiles makes the TLS configurations of sluice serve's
// listeners (HTTP, gRPC, admin) and clients (the xDS control plane, Redis)
// from PEM files, and reads the files again when they change: cert-manager
// and Kubernetes secret volumes rotate certificates in place (a secret
// volume swaps a ..data symbolic link), and a listener or client made here
// presents and trusts the new ones from its next handshake on, with no
// restart and no connection dropped.
//
// Every handshake looks at the files (a stat of each, no read) and reads
// them again only when one is another file, or has another size or
// modification time, than when last read. A file that cannot be read or
// parsed then (a rotation half done) leaves the previous certificate in
// use, and is tried again at the next handshake; at start, it is an error.
package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
)

// Server configures a listener's TLS.
type Server struct {
	// Cert and Key are the PEM files of the server's certificate chain and
	// its key. Required.
	Cert, Key string

	// ClientCA, when set, is a PEM file of the authorities a client's
	// certificate must chain to: a client without such a certificate is
	// refused at the handshake (mutual TLS). Empty: clients present none.
	ClientCA string

	// ClientSAN, when set with ClientCA, is a name (DNS name or IP
	// address) the client's certificate must hold.
	ClientSAN string

	// Log receives a line for each reload and each file that could not be
	// read. Default: discard.
	Log *slog.Logger
}

// Client configures a client's TLS.
type Client struct {
	// CA, when set, is a PEM file of the authorities the server's
	// certificate must chain to; empty: the system's.
	CA string

	// Cert and Key, when set, are the PEM files of the client's own
	// certificate and key, presented when the server asks (mutual TLS).
	// Both or neither.
	Cert, Key string

	// ServerName, when set, is the name the server's certificate must
	// hold, instead of the host the client dials.
	ServerName string

	// SkipHostname verifies the server's chain but not its name.
	SkipHostname bool

	// Log receives a line for each reload and each file that could not be
	// read. Default: discard.
	Log *slog.Logger
}

// ServerConfig returns the TLS configuration of a listener. It fails when
// a file cannot be read, or holds no certificate or key.
func ServerConfig(s Server) (*tls.Config, error) {
	if s.Cert == "" || s.Key == "" {
		return nil, errors.New("tlsfiles: a TLS listener needs a certificate and its key; give both files")
	}
	if s.ClientSAN != "" && s.ClientCA == "" {
		return nil, errors.New("tlsfiles: a client SAN to check needs the client CA to verify the certificate that holds it")
	}
	kp, err := newKeyPair(s.Cert, s.Key, logger(s.Log))
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return kp.get(), nil }}
	if s.ClientCA == "" {
		return cfg, nil
	}
	ca, err := newPool(s.ClientCA, logger(s.Log))
	if err != nil {
		return nil, err
	}
	// The chain is verified here, against the authorities of the file as
	// it is now, rather than by crypto/tls against a pool fixed in the
	// configuration; the configuration stays one object, which gRPC and
	// net/http add their protocols to.
	cfg.ClientAuth = tls.RequireAnyClientCert
	cfg.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
		leaf, err := verify(raw, ca.get(), x509.ExtKeyUsageClientAuth)
		if err != nil {
			return fmt.Errorf("tlsfiles: the client's certificate: %w", err)
		}
		if s.ClientSAN != "" {
			if err := leaf.VerifyHostname(s.ClientSAN); err != nil {
				return fmt.Errorf("tlsfiles: the client's certificate does not name %q: %w", s.ClientSAN, err)
			}
		}
		return nil
	}
	return cfg, nil
}

// ClientFiles is a client's TLS configuration from its files. It is safe
// for concurrent use.
type ClientFiles struct {
	c  Client
	kp *keyPair
	ca *pool
}

// NewClient returns the client configuration of c. It fails when a file
// cannot be read, or holds no certificate or key.
func NewClient(c Client) (*ClientFiles, error) {
	if (c.Cert == "") != (c.Key == "") {
		return nil, errors.New("tlsfiles: a client certificate needs its key, and a key its certificate; give both files or neither")
	}
	cf := &ClientFiles{c: c}
	var err error
	if c.Cert != "" {
		if cf.kp, err = newKeyPair(c.Cert, c.Key, logger(c.Log)); err != nil {
			return nil, err
		}
	}
	if c.CA != "" {
		if cf.ca, err = newPool(c.CA, logger(c.Log)); err != nil {
			return nil, err
		}
	}
	return cf, nil
}

// Config returns the configuration of a connection made now: the
// authorities and the certificate as the files hold them (the certificate
// read again at the handshake, if it changed since). A client takes one
// per connection it makes (a dial function, gRPC credentials).
func (cf *ClientFiles) Config() *tls.Config {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: cf.c.ServerName}
	if cf.kp != nil {
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cf.kp.get(), nil }
	}
	if cf.ca != nil {
		cfg.RootCAs = cf.ca.get()
	}
	if cf.c.SkipHostname {
		// The chain is verified here, its name not at all.
		roots := cfg.RootCAs
		cfg.InsecureSkipVerify = true
		cfg.VerifyPeerCertificate = func(raw [][]byte, _ [][]*x509.Certificate) error {
			if _, err := verify(raw, roots, x509.ExtKeyUsageServerAuth); err != nil {
				return fmt.Errorf("tlsfiles: the server's certificate: %w", err)
			}
			return nil
		}
	}
	return cfg
}

// verify checks that the chain raw (leaf first) chains to roots (the
// system's when nil) for usage, and returns its leaf.
func verify(raw [][]byte, roots *x509.CertPool, usage x509.ExtKeyUsage) (*x509.Certificate, error) {
	if len(raw) == 0 {
		return nil, errors.New("none presented")
	}
	certs := make([]*x509.Certificate, len(raw))
	for i, b := range raw {
		c, err := x509.ParseCertificate(b)
		if err != nil {
			return nil, err
		}
		certs[i] = c
	}
	opts := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{usage}}
	for _, c := range certs[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := certs[0].Verify(opts); err != nil {
		return nil, err
	}
	return certs[0], nil
}

func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
