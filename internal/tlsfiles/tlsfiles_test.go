package tlsfiles_test

import (
	"bufio"
	"crypto/tls"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluicerate/sluice/internal/tlsfiles"
	"github.com/sluicerate/sluice/internal/tlsfiles/tlsfilestest"
)

// echo serves cfg on a loopback listener, echoing lines back.
func echo(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	l, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return l.Addr().String()
}

// roundTrip sends a line on c and reads it back.
func roundTrip(t *testing.T, c *tls.Conn) {
	t.Helper()
	if _, err := c.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "ping\n" {
		t.Fatalf("echo: %q, %v", line, err)
	}
}

// dial connects with cfg and returns the connection, or the handshake's error.
func dial(addr string, cfg *tls.Config) (*tls.Conn, error) {
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	if err := c.Handshake(); err != nil {
		c.Close()
		return nil, err
	}
	// A server that refuses the client's certificate says so after the
	// client's side of the handshake is done: read to see it.
	if _, err := c.Write([]byte("x\n")); err != nil {
		c.Close()
		return nil, err
	}
	if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// TestServerRotation: a listener with client verification refuses a client
// without a certificate, or with one of another authority, at the
// handshake; it answers one of its authority; and when the secret volume's
// files are swapped it presents the new certificate from the next
// handshake on, while a connection made before keeps working.
func TestServerRotation(t *testing.T) {
	ca := tlsfilestest.NewCA(t, "ca")
	vol := ca.ServerVolume(t, t.TempDir(), 1, "127.0.0.1")
	cfg, err := tlsfiles.ServerConfig(tlsfiles.Server{Cert: vol.Path("tls.crt"), Key: vol.Path("tls.key"), ClientCA: vol.Path("ca.crt")})
	if err != nil {
		t.Fatal(err)
	}
	addr := echo(t, cfg)
	client := func(certs ...tls.Certificate) *tls.Config {
		cf, err := tlsfiles.NewClient(tlsfiles.Client{CA: vol.Path("ca.crt")})
		if err != nil {
			t.Fatal(err)
		}
		cfg := cf.Config()
		cfg.Certificates = certs
		return cfg
	}
	if _, err := dial(addr, client()); err == nil {
		t.Fatal("a client without a certificate was answered")
	}
	other := tlsfilestest.NewCA(t, "other")
	if _, err := dial(addr, client(other.Pair(t, 7, "client"))); err == nil {
		t.Fatal("a client with another authority's certificate was answered")
	}
	mine := ca.Pair(t, 8, "client")
	before, err := dial(addr, client(mine))
	if err != nil {
		t.Fatalf("a client of the authority: %v", err)
	}
	defer before.Close()
	if got := before.ConnectionState().PeerCertificates[0].SerialNumber.Int64(); got != 1 {
		t.Fatalf("serial %d, want 1", got)
	}

	crt2, key2 := ca.Issue(t, 2, "127.0.0.1")
	vol.Write(t, map[string][]byte{"tls.crt": crt2, "tls.key": key2, "ca.crt": ca.PEM})
	after, err := dial(addr, client(mine))
	if err != nil {
		t.Fatal(err)
	}
	defer after.Close()
	if got := after.ConnectionState().PeerCertificates[0].SerialNumber.Int64(); got != 2 {
		t.Errorf("after the swap, serial %d, want 2", got)
	}
	roundTrip(t, before) // the connection made before the swap still works

	// A rotation half done (a certificate without its key) leaves the
	// previous pair in use.
	vol.Write(t, map[string][]byte{"tls.crt": []byte("not a certificate"), "tls.key": key2, "ca.crt": ca.PEM})
	c, err := dial(addr, client(mine))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.ConnectionState().PeerCertificates[0].SerialNumber.Int64(); got != 2 {
		t.Errorf("after a broken swap, serial %d, want 2, the last good one", got)
	}
}

// TestClientSAN: with a client SAN, a client certificate of the authority
// that does not name it is refused.
func TestClientSAN(t *testing.T) {
	ca := tlsfilestest.NewCA(t, "ca")
	dir := t.TempDir()
	crt, key := ca.Issue(t, 1, "127.0.0.1")
	write(t, dir, map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": ca.PEM})
	cfg, err := tlsfiles.ServerConfig(tlsfiles.Server{Cert: filepath.Join(dir, "tls.crt"), Key: filepath.Join(dir, "tls.key"),
		ClientCA: filepath.Join(dir, "ca.crt"), ClientSAN: "envoy.internal"})
	if err != nil {
		t.Fatal(err)
	}
	addr := echo(t, cfg)
	cf, err := tlsfiles.NewClient(tlsfiles.Client{CA: filepath.Join(dir, "ca.crt")})
	if err != nil {
		t.Fatal(err)
	}
	ccfg := cf.Config()
	ccfg.Certificates = []tls.Certificate{ca.Pair(t, 2, "someone.else")}
	if _, err := dial(addr, ccfg); err == nil {
		t.Error("a client certificate without the SAN was answered")
	}
	ccfg.Certificates = []tls.Certificate{ca.Pair(t, 3, "envoy.internal")}
	c, err := dial(addr, ccfg)
	if err != nil {
		t.Fatalf("a client certificate with the SAN: %v", err)
	}
	c.Close()
}

func write(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestClientRotation: a client trusts the authorities of its CA file as the
// file is at each handshake, presents its certificate as its files are,
// and checks the server's name unless told not to.
func TestClientRotation(t *testing.T) {
	ca1, ca2 := tlsfilestest.NewCA(t, "one"), tlsfilestest.NewCA(t, "two")
	srv := func(ca *tlsfilestest.CA, host string) string {
		kp := ca.Pair(t, 5, host)
		return echo(t, &tls.Config{Certificates: []tls.Certificate{kp}, ClientAuth: tls.RequireAnyClientCert})
	}
	vol := tlsfilestest.NewSecretVolume(t.TempDir())
	crt, key := ca1.Issue(t, 9, "client")
	vol.Write(t, map[string][]byte{"ca.crt": ca1.PEM, "tls.crt": crt, "tls.key": key})
	cf, err := tlsfiles.NewClient(tlsfiles.Client{CA: vol.Path("ca.crt"), Cert: vol.Path("tls.crt"), Key: vol.Path("tls.key")})
	if err != nil {
		t.Fatal(err)
	}
	one, two := srv(ca1, "127.0.0.1"), srv(ca2, "127.0.0.1")
	if c, err := dial(one, cf.Config()); err != nil {
		t.Fatalf("a server of the authority: %v", err)
	} else {
		c.Close()
	}
	if _, err := dial(two, cf.Config()); err == nil {
		t.Fatal("a server of another authority was trusted")
	}
	vol.Write(t, map[string][]byte{"ca.crt": ca2.PEM, "tls.crt": crt, "tls.key": key})
	if c, err := dial(two, cf.Config()); err != nil {
		t.Errorf("after the CA file changed, the new authority's server: %v", err)
	} else {
		c.Close()
	}

	misnamed := srv(ca2, "elsewhere.example")
	if _, err := dial(misnamed, cf.Config()); err == nil || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Errorf("a server certificate for another name: %v, want it refused", err)
	}
	skipFiles, err := tlsfiles.NewClient(tlsfiles.Client{CA: vol.Path("ca.crt"), SkipHostname: true})
	if err != nil {
		t.Fatal(err)
	}
	skip := skipFiles.Config()
	skip.Certificates = []tls.Certificate{ca2.Pair(t, 10, "client")}
	if c, err := dial(misnamed, skip); err != nil {
		t.Errorf("SkipHostname, a server certificate for another name: %v, want it trusted", err)
	} else {
		c.Close()
	}
}

// TestConfigErrors: missing files and half pairs are errors at start.
func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		name string
		err  func() error
		want string
	}{
		{"no key", func() error { _, err := tlsfiles.ServerConfig(tlsfiles.Server{Cert: "a"}); return err }, "needs a certificate and its key"},
		{"missing file", func() error {
			_, err := tlsfiles.ServerConfig(tlsfiles.Server{Cert: filepath.Join(dir, "x.crt"), Key: filepath.Join(dir, "x.key")})
			return err
		}, "x.crt"},
		{"half client pair", func() error { _, err := tlsfiles.NewClient(tlsfiles.Client{Cert: "a"}); return err }, "give both files or neither"},
		{"SAN without CA", func() error {
			_, err := tlsfiles.ServerConfig(tlsfiles.Server{Cert: "a", Key: "b", ClientSAN: "x"})
			return err
		}, "needs the client CA"},
		{"CA without certificates", func() error {
			write(t, dir, map[string][]byte{"empty.crt": []byte("nothing")})
			_, err := tlsfiles.NewClient(tlsfiles.Client{CA: filepath.Join(dir, "empty.crt")})
			return err
		}, "holds no PEM certificate"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.err(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want it to contain %q", err, tt.want)
			}
		})
	}
}
