package launch

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicerate/sluice/internal/config"
)

// syncBuffer is a log destination safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

const testPolicies = `
policies:
  - name: notify
    limits:
      - {name: global, limit: 2, window: 1m}
`

// testOptions are the options of a server on the in-memory store, on a
// free loopback port, logging to logs.
func testOptions(t *testing.T, logs *syncBuffer) Options {
	t.Helper()
	cfg, err := config.Parse("sluice.yaml", []byte(testPolicies))
	if err != nil {
		t.Fatal(err)
	}
	return Options{Log: slog.New(slog.NewTextHandler(logs, nil)), Config: cfg, HTTPAddr: "127.0.0.1:0", Grace: 5 * time.Second,
		OutageInterval: time.Second, MaxOverrides: 10, OverridePoll: time.Second}
}

// TestServe starts a server on the in-memory store, decides over its HTTP
// listener, and stops it: Serve returns nil when its context ends, after
// logging that it serves and that it stopped.
func TestServe(t *testing.T) {
	var logs syncBuffer
	s, err := Start(context.Background(), testOptions(t, &logs))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx) }()
	url := "http://" + s.hl.Addr().String()
	for i, want := range []string{`"allowed":true`, `"allowed":true`, `"allowed":false`} {
		res, err := http.Post(url+"/v1/decide", "application/json", strings.NewReader(`{"policy":"notify"}`))
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		_, _ = b.ReadFrom(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || !strings.Contains(b.String(), want) {
			t.Errorf("decision %d = %d %s, want 200 and %s", i+1, res.StatusCode, b.String(), want)
		}
	}
	cancel()
	if err := <-served; err != nil {
		t.Errorf("Serve = %v after its context ended, want nil", err)
	}
	for _, msg := range []string{`msg="sluice serving"`, "store=\"the in-memory store\"", "policies=1", `msg="sluice stopped"`} {
		if !strings.Contains(logs.String(), msg) {
			t.Errorf("the logs lack %s:\n%s", msg, logs.String())
		}
	}
}

// TestStartAdminTaken: an admin address given with --admin that is taken
// is an error; the default one taken leaves the server without its admin
// view, saying so.
func TestStartAdminTaken(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	var logs syncBuffer
	opts := testOptions(t, &logs)
	opts.Admin = Admin{Addr: taken.Addr().String(), Explicit: true}
	if s, err := Start(context.Background(), opts); err == nil || !strings.Contains(err.Error(), "--admin") {
		if s != nil {
			s.Close()
		}
		t.Fatalf("Start on a taken --admin address = %v, want an error naming --admin", err)
	}
	opts.Admin.Explicit = false
	s, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("Start on a taken default admin address = %v, want a server without its admin view", err)
	}
	defer s.Close()
	if s.al != nil || !strings.Contains(logs.String(), "the admin view is off") {
		t.Errorf("admin listener %v; logs:\n%s\nwant none, and the logs saying the view is off", s.al, logs.String())
	}
}

// TestStartEnvoyDirRefused: an Envoy directory that cannot be loaded is
// an error of Start that names the flag.
func TestStartEnvoyDirRefused(t *testing.T) {
	var logs syncBuffer
	opts := testOptions(t, &logs)
	opts.EnvoyDir = t.TempDir() + "/missing"
	opts.GRPCAddr = "127.0.0.1:0"
	s, err := Start(context.Background(), opts)
	if err == nil || !strings.Contains(err.Error(), "--envoy-config "+opts.EnvoyDir) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("Start with a missing Envoy directory = %v, want an error naming --envoy-config", err)
	}
}
