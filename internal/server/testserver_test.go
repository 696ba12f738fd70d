package server

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/internal/servertest"
	"github.com/sluicerate/sluice/internal/wire"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/store"
)

// testConfig is the configuration most of the package's tests serve.
const testConfig = servertest.Config

// edgeEnvoy is an Envoy configuration file: domain edge, 2 requests a
// minute per user.
const edgeEnvoy = "domain: edge\ndescriptors:\n  - key: user\n    rate_limit: {unit: minute, requests_per_unit: 2}\n"

// testServer is a Server and its handler, with the log it writes to.
type testServer struct {
	t    *testing.T
	srv  *Server
	h    http.Handler
	log  *bytes.Buffer
	grpc *grpc.ClientConn // conn's
}

// parseConfig parses the configuration file's text, failing tb on an error.
func parseConfig(tb testing.TB, file string) *config.Config {
	tb.Helper()
	cfg, err := config.Parse("test.yaml", []byte(file))
	if err != nil {
		tb.Fatal(err)
	}
	return cfg
}

// serverFor returns a Server of the configuration file over st with opts.
func serverFor(tb testing.TB, st store.Store, file string, opts Options) *Server {
	tb.Helper()
	srv, err := New(st, parseConfig(tb, file), opts)
	if err != nil {
		tb.Fatal(err)
	}
	return srv
}

// testServerFor returns a testServer of the configuration file over st with
// opts; its log is empty unless the caller points opts.Logger at it.
func testServerFor(t *testing.T, st store.Store, file string, opts Options) *testServer {
	t.Helper()
	srv := serverFor(t, st, file, opts)
	return &testServer{t: t, srv: srv, h: srv.Handler(), log: &bytes.Buffer{}}
}

// newTestServer returns a testServer of the configuration file over a
// memory store with a frozen clock, logging JSON to ts.log.
func newTestServer(t *testing.T, file string) *testServer {
	t.Helper()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	st := memstore.New(memstore.Config{Clock: func() time.Time { return t0 }})
	t.Cleanup(func() { st.Close() })
	var buf bytes.Buffer
	ts := testServerFor(t, st, file, Options{Logger: slog.New(slog.NewJSONHandler(&buf, nil)), MaxBodyBytes: 1024})
	ts.log = &buf
	return ts
}

// loadEnvoy writes files (name: content) to a new directory and loads it
// as srv's Envoy configuration with opts.
func loadEnvoy(tb testing.TB, srv *Server, opts EnvoyOptions, files map[string]string) {
	tb.Helper()
	dir := tb.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			tb.Fatal(err)
		}
	}
	if err := srv.LoadEnvoyConfig(dir, opts); err != nil {
		tb.Fatal(err)
	}
}

// do sends a request and returns the response.
func (ts *testServer) do(method, path, body string, header ...string) *httptest.ResponseRecorder {
	ts.t.Helper()
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.RemoteAddr = "127.0.0.1:5555"
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	ts.h.ServeHTTP(w, r)
	return w
}

// decide posts body to path and decodes a 200 decision.
func (ts *testServer) decide(path, body string) wire.DecisionJSON {
	ts.t.Helper()
	w := ts.do("POST", path, body)
	if w.Code != 200 {
		ts.t.Fatalf("POST %s %s = %d %s", path, body, w.Code, w.Body)
	}
	var d wire.DecisionJSON
	if err := json.Unmarshal(w.Body.Bytes(), &d); err != nil {
		ts.t.Fatal(err)
	}
	return d
}
