package tlsfiles

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"os"
	"sync"
)

// watched is a value read from files, read again when one of them changes.
type watched[T any] struct {
	paths []string
	what  string
	read  func() (T, error)
	log   *slog.Logger

	mu    sync.Mutex
	seen  []os.FileInfo // as the files were when cur was read
	cur   T
	since string // the error of the last attempt that failed, logged once
}

// load reads the value; at start, a failure is the caller's error.
func (w *watched[T]) load() error {
	seen, err := w.stat()
	if err != nil {
		return err
	}
	v, err := w.read()
	if err != nil {
		return err
	}
	w.cur, w.seen = v, seen
	return nil
}

// get returns the value, read again when a file changed since it was
// read; when reading fails, the previous value.
func (w *watched[T]) get() T {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen, err := w.stat()
	if err == nil && w.same(seen) {
		return w.cur
	}
	if err == nil {
		var v T
		if v, err = w.read(); err == nil {
			w.cur, w.seen, w.since = v, seen, ""
			w.log.Info("TLS "+w.what+" read again after its files changed", slog.Any("files", w.paths))
			return w.cur
		}
	}
	if msg := err.Error(); msg != w.since {
		w.since = msg
		w.log.Warn("TLS "+w.what+" changed but cannot be read; the previous one stays in use until it can", slog.Any("files", w.paths), slog.Any("err", err))
	}
	return w.cur
}

// stat returns the files' information (through symbolic links).
func (w *watched[T]) stat() ([]os.FileInfo, error) {
	infos := make([]os.FileInfo, len(w.paths))
	for i, p := range w.paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("tlsfiles: %w", err)
		}
		infos[i] = fi
	}
	return infos, nil
}

// same reports whether the files are those last read, unchanged.
func (w *watched[T]) same(infos []os.FileInfo) bool {
	for i, fi := range infos {
		old := w.seen[i]
		if !os.SameFile(old, fi) || !old.ModTime().Equal(fi.ModTime()) || old.Size() != fi.Size() {
			return false
		}
	}
	return true
}

// keyPair is a certificate and its key.
type keyPair = watched[*tls.Certificate]

func newKeyPair(cert, key string, log *slog.Logger) (*keyPair, error) {
	kp := &keyPair{paths: []string{cert, key}, what: "certificate", log: log, read: func() (*tls.Certificate, error) {
		c, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("tlsfiles: certificate %s and key %s: %w", cert, key, err)
		}
		return &c, nil
	}}
	return kp, kp.load()
}

// pool is a file of certificate authorities.
type pool = watched[*x509.CertPool]

func newPool(path string, log *slog.Logger) (*pool, error) {
	p := &pool{paths: []string{path}, what: "certificate authorities", log: log, read: func() (*x509.CertPool, error) {
		pem, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("tlsfiles: %w", err)
		}
		cp := x509.NewCertPool()
		if !cp.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("tlsfiles: %s holds no PEM certificate; give the authorities' certificates", path)
		}
		return cp, nil
	}}
	return p, p.load()
}
