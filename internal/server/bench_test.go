package server

import (
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/memstore"
)

// BenchmarkDecideHandler measures one POST /v1/decide through the handler,
// without the network: decoding, deciding on the memory store, metrics and
// encoding.
func BenchmarkDecideHandler(b *testing.B) {
	cfg, err := config.Parse("bench.yaml", []byte(`
policies:
  - name: notify
    limits:
      - {name: global, limit: 1000000000, window: 1s}
      - {name: category, by: [category], limit: 1000000000, window: 1s}
`))
	if err != nil {
		b.Fatal(err)
	}
	store := memstore.New(memstore.Config{})
	defer store.Close()
	srv, err := New(store, cfg, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	h := srv.Handler()
	const body = `{"policy":"notify","attributes":{"category":"errors"},"cost":1}`
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest("POST", "/v1/decide", strings.NewReader(body))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 200 {
			b.Fatal(w.Code, w.Body)
		}
	}
}
