package main

import (
	"io"
	"path/filepath"
	"strings"
	"testing"
)

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
	fs := newFlagSet("serve", io.Discard)
	http := fs.String("http", ":8080", "")
	grpc := fs.String("grpc", "", "")
	level := fs.String("log-level", "info", "")
	fs.String("log-format", "text", "")
	redis := fs.String("redis", "", "")
	ef := addEnvoyFlags(fs, true)
	if err := fs.Parse([]string{"--grpc", ":9999"}); err != nil {
		t.Fatal(err)
	}
	if err := applyEnvoyEnv(fs, ef, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, got, want string }{
		{"envoy-config", *ef.dir, filepath.Join("/srv/runtime_data/current", "ratelimit", "config")},
		{"http", *http, ":8082"},
		{"grpc (given on the command line)", *grpc, ":9999"},
		{"log-level", *level, "warn"},
		{"redis", *redis, "redis://:p%40ss@redis.local:6379"},
		{"envoy-counting", *ef.counting, "per-descriptor"},
		{"envoy-headers", *ef.headers, "x-ratelimit"},
		{"limit header name", ef.limitName, "RateLimit-Limit"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
}

func TestEnvoyRedisURL(t *testing.T) {
	t.Parallel()
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
		got, err := envoyRedisURL(tt.env["REDIS_URL"], func(k string) string { return tt.env[k] })
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
