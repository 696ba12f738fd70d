package deploy

import (
	"flag"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// serveFlags are the flags of sluice serve that the environment sets but
// serve declares itself, and the deploy flags, on one FlagSet.
type serveFlags struct {
	fs                                           *flag.FlagSet
	file, http, grpc, redis, logLevel, logFormat *string
	*Flags
}

func newServeFlags() *serveFlags {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &serveFlags{fs: fs,
		file: fs.String("config", "", ""), http: fs.String("http", ":8080", ""), grpc: fs.String("grpc", "", ""),
		redis: fs.String("redis", "", ""), logLevel: fs.String("log-level", "info", ""), logFormat: fs.String("log-format", "text", ""),
		Flags: AddFlags(fs)}
}

// parseEnv parses serve's command line args under env.
func parseEnv(t *testing.T, env map[string]string, args ...string) (*serveFlags, error) {
	t.Helper()
	c := newServeFlags()
	if err := c.fs.Parse(args); err != nil {
		return nil, err
	}
	return c, c.Apply(c.fs, func(k string) string { return env[k] }, *c.file)
}

// TestEnvoyEnv: envoyproxy/ratelimit's variables stand for the flags the
// command line leaves out.
func TestEnvoyEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"RUNTIME_ROOT": "/srv/runtime_data/current", "RUNTIME_SUBDIRECTORY": "ratelimit",
		"PORT": "8082", "GRPC_PORT": "8083", "LOG_LEVEL": "WARNING",
		"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis.local:6379", "REDIS_AUTH": "p@ss",
		"STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT": "false", "LIMIT_RESPONSE_HEADERS_ENABLED": "true",
	}
	c, err := parseEnv(t, env, "--grpc", ":9999")
	if err != nil {
		t.Fatal(err)
	}
	ef := c.Flags
	for _, c := range []struct{ name, got, want string }{
		{"envoy-config", ef.envoyDir, filepath.Join("/srv/runtime_data/current", "ratelimit", "config")},
		{"http", *c.http, ":8082"},
		{"grpc (given on the command line)", *c.grpc, ":9999"},
		{"log-level", *c.logLevel, "warn"},
		{"redis", *c.redis, "redis://:p%40ss@redis.local:6379"},
		{"envoy-counting", ef.counting, "per-descriptor"},
		{"envoy-headers", ef.headers, "x-ratelimit"},
		{"limit header name", ef.env.limitName, "RateLimit-Limit"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
}

func TestEnvoyRedisURL(t *testing.T) {
	t.Parallel()
	keys := map[string]string{"url": "REDIS_URL", "socket": "REDIS_SOCKET_TYPE", "type": "REDIS_TYPE", "auth": "REDIS_AUTH", "tls": "REDIS_TLS"}
	tests := []struct {
		env  map[string]string
		want string // or "error: ..." for a part of the error
	}{
		{map[string]string{"REDIS_URL": "localhost:6379"}, "redis://localhost:6379"},
		{map[string]string{"REDIS_URL": "redis://h:1/2"}, "redis://h:1/2"},
		{map[string]string{"REDIS_URL": "a:1,b:2,c:3", "REDIS_TYPE": "CLUSTER"}, "redis://a:1?mode=cluster&addr=b:2&addr=c:3"},
		{map[string]string{"REDIS_URL": "mymaster,s1:26379,s2:26379", "REDIS_TYPE": "sentinel", "REDIS_TLS": "true"}, "rediss://s1:26379?mode=sentinel&master=mymaster&addr=s2:26379"},
		{map[string]string{"REDIS_URL": "/var/run/redis.sock", "REDIS_SOCKET_TYPE": "unix"}, "error: sluice connects to Redis over TCP"},
		{map[string]string{"REDIS_URL": "a:1,b:2"}, "error: set REDIS_TYPE=cluster or sentinel"},
	}
	for _, tt := range tests {
		got, err := redisURL(func(k string) string { return tt.env[keys[k]] })
		if msg, isErr := strings.CutPrefix(tt.want, "error: "); isErr {
			if err == nil || !strings.Contains(err.Error(), msg) {
				t.Errorf("%v: %q, %v; want an error with %q", tt.env, got, err, msg)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%v: %q, %v; want %q", tt.env, got, err, tt.want)
		}
	}
}

// TestDeployEnv: Envoy Gateway's environment, and envoyproxy/ratelimit's
// names beside it, stand for the flags the command line leaves out.
func TestDeployEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"RUNTIME_ROOT": "/data", "RUNTIME_SUBDIRECTORY": "ratelimit", "RUNTIME_IGNOREDOTFILES": "true", "RUNTIME_WATCH_ROOT": "false",
		"LOG_LEVEL": "info", "USE_STATSD": "false",
		"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_SERVER_URL": "envoy-gateway:18001", "CONFIG_GRPC_XDS_NODE_ID": "envoy-ratelimit",
		"GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": "/certs/tls.crt", "GRPC_SERVER_TLS_KEY": "/certs/tls.key", "GRPC_SERVER_TLS_CA_CERT": "/certs/ca.crt",
		"CONFIG_GRPC_XDS_SERVER_USE_TLS": "true", "CONFIG_GRPC_XDS_CLIENT_TLS_CERT": "/certs/tls.crt", "CONFIG_GRPC_XDS_CLIENT_TLS_KEY": "/certs/tls.key",
		"CONFIG_GRPC_XDS_SERVER_TLS_CACERT": "/certs/ca.crt", "FORCE_START_WITHOUT_INITIAL_CONFIG": "true",
		"REDIS_SOCKET_TYPE": "tcp", "REDIS_URL": "redis:6379", "REDIS_TLS": "true", "REDIS_TLS_CLIENT_CERT": "/redis-certs/tls.crt", "REDIS_TLS_CLIENT_KEY": "/redis-certs/tls.key",
		"USE_PROMETHEUS": "true", "PROMETHEUS_ADDR": ":19001", "PROMETHEUS_MAPPER_YAML": "/etc/statsd-exporter/conf.yaml",
		"TRACING_ENABLED": "true", "TRACING_SERVICE_NAME": "envoy-ratelimit", "TRACING_SAMPLING_RATE": "0.5",
		"CONFIG_GRPC_XDS_NODE_METADATA": "zone=a,rack=b", "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS": "x-tenant:t1",
		"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL": "2s", "XDS_CLIENT_BACKOFF_JITTER": "false", "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES": "8388608",
		"MAX_CONCURRENT_REQUESTS": "500", "REQUEST_TIMEOUT": "2s", "REDIS_TIMEOUT": "3s", "GRPC_MAX_CONCURRENT_STREAMS": "100",
		"GRPC_MAX_CONNECTION_AGE": "24h", "GRPC_MAX_CONNECTION_AGE_GRACE": "1h",
		"RESPONSE_DYNAMIC_METADATA": "true", "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED": "true",
	}
	c, err := parseEnv(t, env, "--grpc-max-streams", "7")
	if err != nil {
		t.Fatal(err)
	}
	d := c.Flags
	for _, tt := range []struct{ name, got, want string }{
		{"envoy-config (RUNTIME_ROOT names no directory under xDS)", d.envoyDir, ""},
		{"envoy-xds", d.xds, "envoy-gateway:18001"},
		{"envoy-xds-node", d.xdsNode, "envoy-ratelimit"},
		{"envoy-xds-tls", d.xdsTLS, "ca=/certs/ca.crt,cert=/certs/tls.crt,key=/certs/tls.key"},
		{"grpc-tls", d.grpcTLS, "cert=/certs/tls.crt,key=/certs/tls.key,client-ca=/certs/ca.crt"},
		{"redis-tls", d.redisTLS, "cert=/redis-certs/tls.crt,key=/redis-certs/tls.key"},
		{"redis", *c.redis, "rediss://redis:6379"},
		{"metrics", d.metricsAddr, ":19001"},
		{"metrics-path", d.metricsPath, "/metrics"},
		{"tracing-protocol", d.tracingProtocol, "http"},
		{"request-timeout", d.requestTimeout.String(), "2s"},
		{"store-timeout", d.storeTimeout.String(), "3s"},
		{"grpc-max-connection-age", d.grpcMaxAge.String(), "24h0m0s"},
	} {
		if tt.got != tt.want {
			t.Errorf("%s = %q, want %q", tt.name, tt.got, tt.want)
		}
	}
	switch {
	case !d.xdsForce, !d.tracing, !d.dynMeta, !d.requireDomain, d.quota:
		t.Errorf("booleans: force %v, tracing %v, dynamic metadata %v, require domain %v, quota %v", d.xdsForce, d.tracing, d.dynMeta, d.requireDomain, d.quota)
	case d.tracingRate != 0.5, d.maxInFlight != 500, d.grpcMaxStreams != 7:
		t.Errorf("numbers: sampling %v, in flight %d, streams %d (the command line's 7)", d.tracingRate, d.maxInFlight, d.grpcMaxStreams)
	case d.env.nodeMetadata["rack"] != "b", d.env.headers["x-tenant"] != "t1", d.env.backoffInit != 2*time.Second, !d.env.noJitter, d.env.maxMessage != 8<<20:
		t.Errorf("environment only: %+v", d.env)
	case len(d.env.notes) != 1 || !strings.Contains(d.env.notes[0], "PROMETHEUS_MAPPER_YAML"):
		t.Errorf("notes %q", d.env.notes)
	}
}

// TestDeployEnvErrors: what cannot be served is said at start.
func TestDeployEnvErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"config type", map[string]string{"CONFIG_TYPE": "GRPC_XDS_DELTA"}, nil, `CONFIG_TYPE="GRPC_XDS_DELTA": use FILE`},
		{"two client CAs", map[string]string{"GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": "a", "GRPC_SERVER_TLS_KEY": "b",
			"GRPC_SERVER_TLS_CA_CERT": "c", "GRPC_CLIENT_TLS_CACERT": "d"}, []string{"--envoy-xds", "h:1"}, "name two files"},
		{"TLS without a key", map[string]string{"GRPC_SERVER_USE_TLS": "true", "GRPC_SERVER_TLS_CERT": "a"}, []string{"--envoy-xds", "h:1"},
			"needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY"},
		{"bad boolean", map[string]string{"FORCE_START_WITHOUT_INITIAL_CONFIG": "yes please", "CONFIG_TYPE": "GRPC_XDS_SOTW"}, nil, `FORCE_START_WITHOUT_INITIAL_CONFIG="yes please"`},
		{"bad headers", map[string]string{"CONFIG_TYPE": "GRPC_XDS_SOTW", "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS": "x-tenant"}, nil, "key:value"},
		{"files and xDS", nil, []string{"--envoy-config", "/d", "--envoy-xds", "h:1"}, "give one"},
		{"nothing to serve", nil, nil, "--config FILE, --envoy-config DIR or --envoy-xds HOST:PORT is required"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := parseEnv(t, tt.env, tt.args...); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want it to contain %q", err, tt.want)
			}
		})
	}
	// A key of a flag's list that is not one.
	if _, err := spec("grpc-tls", "cert=a,kee=b", "cert", "key"); err == nil || !strings.Contains(err.Error(), `unknown key "kee"`) {
		t.Errorf("spec: %v", err)
	}
}
