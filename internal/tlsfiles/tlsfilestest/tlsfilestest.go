// Package tlsfilestest makes certificate authorities and certificates for
// tests, and writes them as a Kubernetes secret volume does: the files
// behind a ..data symbolic link that each update swaps at once.
package tlsfilestest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority.
type CA struct {
	Cert *x509.Certificate
	PEM  []byte
	key  *ecdsa.PrivateKey
}

// NewCA returns a new authority named name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &CA{Cert: cert, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: key}
}

// Issue returns a certificate for hosts (DNS names or IP addresses), for
// servers and clients alike, with serial, and its key, both PEM.
func (ca *CA) Issue(t testing.TB, serial int64, hosts ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial),
		Subject:      pkix.Name{CommonName: fmt.Sprint(hosts)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

// Pair is Issue's certificate and key, parsed.
func (ca *CA) Pair(t testing.TB, serial int64, hosts ...string) tls.Certificate {
	t.Helper()
	c, k := ca.Issue(t, serial, hosts...)
	kp, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

// ServerVolume returns a secret volume in dir holding a certificate of ca
// for hosts with serial, as tls.crt and tls.key, and ca's as ca.crt: what
// Envoy Gateway mounts at /certs.
func (ca *CA) ServerVolume(t testing.TB, dir string, serial int64, hosts ...string) *SecretVolume {
	t.Helper()
	v := NewSecretVolume(dir)
	crt, key := ca.Issue(t, serial, hosts...)
	v.Write(t, map[string][]byte{"tls.crt": crt, "tls.key": key, "ca.crt": ca.PEM})
	return v
}

// SecretVolume is a directory laid out as Kubernetes mounts a secret: each
// file a link to ..data/file, ..data a link to a directory of this
// version's files, swapped by one rename.
type SecretVolume struct {
	Dir string
	n   int
}

// NewSecretVolume returns an empty volume in dir.
func NewSecretVolume(dir string) *SecretVolume { return &SecretVolume{Dir: dir} }

// Path returns the path of the file name in the volume.
func (v *SecretVolume) Path(name string) string { return filepath.Join(v.Dir, name) }

// Write makes files the volume's contents at once, as the kubelet does: a
// new version's directory, ..data swapped to it by a rename, the previous
// version removed.
func (v *SecretVolume) Write(t testing.TB, files map[string][]byte) {
	t.Helper()
	v.n++
	version := fmt.Sprintf("..%d_%d", time.Now().UnixNano(), v.n)
	if err := os.MkdirAll(filepath.Join(v.Dir, version), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(v.Dir, version, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old, _ := os.Readlink(filepath.Join(v.Dir, "..data"))
	tmp := filepath.Join(v.Dir, "..data_tmp")
	if err := os.Symlink(version, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(v.Dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for name := range files {
		link := filepath.Join(v.Dir, name)
		if _, err := os.Lstat(link); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(v.Dir, old)); err != nil {
			t.Fatal(err)
		}
	}
}
