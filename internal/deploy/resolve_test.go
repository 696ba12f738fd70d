package deploy

import (
	"strings"
	"testing"
	"time"

	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/internal/envoy/decide"
)

// TestResolve: the command line and the environment come before the
// configuration file's envoy.xds section, which fills what they leave out.
func TestResolve(t *testing.T) {
	t.Parallel()
	env := map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL": "2s",
		"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT": "false", "QUOTA_MODE": "true", "MAX_CONCURRENT_REQUESTS": "9"}
	c, err := parseEnv(t, env, "--envoy-xds", "cp:18001")
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config.Config{Envoy: &config.Envoy{XDS: &config.XDS{Server: "file:1", NodeID: "from-file", NodeMetadata: map[string]string{"zone": "a"},
		BackoffInitial: time.Minute, BackoffMax: 5 * time.Minute, ForceStart: true}}}
	s, err := c.Resolve(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	x := s.XDS
	switch {
	case x == nil:
		t.Fatal("no xDS options")
	case x.Server != "cp:18001", x.NodeID != "from-file", x.NodeMetadata["zone"] != "a":
		t.Errorf("server %q (the command line's cp:18001), node %q and metadata %v (the file's)", x.Server, x.NodeID, x.NodeMetadata)
	case x.Backoff.Initial != 2*time.Second, x.Backoff.Max != 5*time.Minute, !s.XDSForce:
		t.Errorf("backoff %v (the environment's 2s), max %v (the file's 5m), force start %v (the file's)", x.Backoff.Initial, x.Backoff.Max, s.XDSForce)
	case s.MaxInFlight != 9, s.HTTPTLS != nil, s.Tracing != nil:
		t.Errorf("in flight %d, HTTP TLS %v, tracing %v", s.MaxInFlight, s.HTTPTLS, s.Tracing)
	}
	o, err := c.EnvoyOptions()
	if err != nil || o.Decide.Counting != decide.PerDescriptor || !o.Decide.QuotaMode {
		t.Errorf("Envoy options %+v, %v: want per-descriptor counting and quota mode", o.Decide, err)
	}
}

// TestResolveErrors: flags that cannot be served are errors naming them.
func TestResolveErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--envoy-xds", "no-port"}, `--envoy-xds "no-port": give the control plane's host:port`},
		{[]string{"--config", "f", "--tracing", "--tracing-sampling-rate", "2"}, "--tracing-sampling-rate 2: give a share from 0 to 1"},
		{[]string{"--config", "f", "--max-in-flight", "-1"}, "take 0 (none, or the default) or more"},
		{[]string{"--config", "f", "--http-tls", "cert=a,kee=b"}, `--http-tls: unknown key "kee"`},
		{[]string{"--config", "f", "--redis-tls", "skip"}, `--redis-tls: unknown key "skip"`},
	} {
		c, err := parseEnv(t, nil, tt.args...)
		if err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		if _, err := c.Resolve(&config.Config{}, nil); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: error %v, want it to contain %q", tt.args, err, tt.want)
		}
	}
	c, err := parseEnv(t, nil, "--config", "f", "--envoy-counting", "some")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.EnvoyOptions(); err == nil || !strings.Contains(err.Error(), "use all-or-nothing or per-descriptor") {
		t.Errorf("--envoy-counting some: %v", err)
	}
}
