package server

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicerate/sluice/memstore"
)

// BenchmarkDecideHandler measures one POST /v1/decide through the handler,
// without the network (benchHandler): decoding, deciding on the memory
// store, metrics and encoding. batch-10 is one call with a batch of ten
// requests.
func BenchmarkDecideHandler(b *testing.B) {
	h := benchServer(b, `
policies:
  - name: notify
    limits:
      - {name: global, limit: 1000000000, window: 1s}
      - {name: category, by: [category], limit: 1000000000, window: 1s}
`, nil).Handler()
	const one = `{"policy":"notify","attributes":{"category":"errors"},"cost":1}`
	for _, bench := range []struct{ name, body, want string }{
		{"single", one, `{"allowed":true,`},
		{"batch-10", "[" + strings.Repeat(one+",", 9) + one + "]", `[{"status":200,"decision":{"allowed":true,`},
	} {
		b.Run(bench.name, func(b *testing.B) {
			benchHandler(b, h, "/v1/decide", bench.body, func(first []byte) bool { return bytes.HasPrefix(first, []byte(bench.want)) })
		})
	}
}

// BenchmarkEnvoyJSONHandler measures one POST /json through the handler on
// the memory store, as BenchmarkDecideHandler measures /v1/decide: the
// bodies of the service benchmark's domains one (one descriptor) and two
// (two descriptors), decided by the Envoy model, and a request whose
// domain is a sluice policy, answered with the RateLimit headers.
func BenchmarkEnvoyJSONHandler(b *testing.B) {
	h := benchServer(b, `
policies:
  - name: notify
    limits:
      - {name: per-user, by: [user], limit: 1000000000, window: 1s}
`, map[string]string{
		"one.yaml": "domain: one\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: 1000000000}\n",
		"two.yaml": "domain: two\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: 1000000000}\n" +
			"  - key: route\n    descriptors:\n      - key: user\n        rate_limit: {unit: second, requests_per_unit: 1000000000}\n",
	}).Handler()
	for _, bench := range []struct{ name, body string }{
		{"one", `{"domain":"one","descriptors":[{"entries":[{"key":"user","value":"u42"}]}],"hitsAddend":1}`},
		{"two", `{"domain":"two","descriptors":[{"entries":[{"key":"user","value":"u42"}]},` +
			`{"entries":[{"key":"route","value":"r2"},{"key":"user","value":"u42"}]}],"hitsAddend":1}`},
		{"policy", `{"domain":"notify","descriptors":[{"entries":[{"key":"user","value":"u42"}]}]}`},
	} {
		b.Run(bench.name, func(b *testing.B) {
			benchHandler(b, h, "/json", bench.body, func(first []byte) bool {
				return bytes.HasPrefix(bytes.ReplaceAll(first, []byte(" "), nil), []byte(`{"overallCode":"OK"`))
			})
		})
	}
}

// benchServer returns a server of the configuration file text on the
// memory store, with the Envoy configuration files envoy (name: content)
// loaded when there are any.
func benchServer(b *testing.B, text string, envoy map[string]string) *Server {
	store := memstore.New(memstore.Config{})
	b.Cleanup(func() { store.Close() })
	srv := serverFor(b, store, text, Options{Logger: slog.New(slog.DiscardHandler)})
	if len(envoy) > 0 {
		loadEnvoy(b, srv, EnvoyOptions{}, envoy)
	}
	return srv
}

// benchHandler measures POST path with body through h. The request is
// built once and its body rewound for each call, and the response writer
// keeps the status and discards the body, so the figures are the
// server's, not net/http's or httptest's. The first answer must be a 200
// whose body ok accepts.
func benchHandler(b *testing.B, h http.Handler, path, body string, ok func(first []byte) bool) {
	raw := []byte(body)
	rd := bytes.NewReader(raw)
	r := httptest.NewRequest("POST", path, nil)
	r.Body, r.ContentLength = io.NopCloser(rd), int64(rd.Len())
	w := &discardWriter{header: http.Header{}}
	h.ServeHTTP(w, r)
	if w.code != 200 || !ok(w.first) {
		b.Fatalf("POST %s: %d %s", path, w.code, w.first)
	}
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(raw)
		clear(w.header)
		w.code = 0
		h.ServeHTTP(w, r)
		if w.code != 200 {
			b.Fatal(w.code)
		}
	}
}

// discardWriter is a ResponseWriter that keeps the status and the first
// body written, and discards the others.
type discardWriter struct {
	header http.Header
	code   int
	first  []byte
}

func (w *discardWriter) Header() http.Header  { return w.header }
func (w *discardWriter) WriteHeader(code int) { w.code = code }
func (w *discardWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	if w.first == nil {
		w.first = bytes.Clone(b)
	}
	return len(b), nil
}
