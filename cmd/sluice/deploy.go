package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// deployFlags are the flags of serve for where envoyproxy/ratelimit runs
// (Envoy Gateway, say): the configuration from an xDS control plane, TLS
// on every listener and client, the metrics listener, tracing and the
// server's self-protection. Each has an environment variable of
// envoyproxy/ratelimit's (or of Envoy Gateway's) that stands for it when
// the command line leaves it out (applyDeployEnv); the configuration
// file's envoy and tls sections come after both.
type deployFlags struct {
	dynMeta, quota, requireDomain *bool

	xds, xdsNode, xdsTLS *string
	xdsForce             *bool

	httpTLS, grpcTLS, adminTLS, redisTLS *string

	metricsAddr, metricsPath *string

	tracing                          *bool
	tracingEndpoint, tracingProtocol *string
	tracingRate                      *float64

	maxInFlight, grpcMaxStreams  *int
	requestTimeout, storeTimeout *time.Duration
	grpcMaxAge, grpcMaxAgeGrace  *time.Duration

	// What only the environment sets.
	env deployEnv
}

// deployEnv is what only envoyproxy/ratelimit's environment sets.
type deployEnv struct {
	nodeMetadata, headers                 map[string]string
	connectRetry, backoffInit, backoffMax time.Duration
	backoffRandom                         float64
	noJitter                              bool
	maxMessage                            int
	serviceName, namespace, instance      string

	// notes are what the environment asks for that sluice takes but does
	// otherwise, logged at start.
	notes []string
}

func addDeployFlags(fs *flag.FlagSet) *deployFlags {
	return &deployFlags{
		dynMeta:       fs.Bool("envoy-dynamic-metadata", false, "send each answer's dynamic metadata: the request and the metadata of the descriptors that passed (RESPONSE_DYNAMIC_METADATA)"),
		quota:         fs.Bool("envoy-quota-mode", false, "put every descriptor in quota_mode: OVER_LIMIT only when all of a request's are over (QUOTA_MODE)"),
		requireDomain: fs.Bool("envoy-require-domain", false, "be unready while the Envoy configuration has no domain (HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED)"),

		xds:      fs.String("envoy-xds", "", "take the Envoy configuration from the xDS control plane at this `host:port` (CONFIG_TYPE=GRPC_XDS_SOTW, CONFIG_GRPC_XDS_SERVER_URL) instead of files"),
		xdsNode:  fs.String("envoy-xds-node", "", "the node `id` to give the control plane (CONFIG_GRPC_XDS_NODE_ID; default \"default\")"),
		xdsTLS:   fs.String("envoy-xds-tls", "", "connect to the control plane with TLS: `ca=FILE[,cert=FILE,key=FILE][,server-name=NAME]`, or \"system\" for the system's authorities (CONFIG_GRPC_XDS_SERVER_USE_TLS and the files beside it)"),
		xdsForce: fs.Bool("envoy-xds-force-start", false, "serve before the control plane's first version, every domain unknown (FORCE_START_WITHOUT_INITIAL_CONFIG); otherwise be unready until it"),

		httpTLS:  fs.String("http-tls", "", "serve HTTP with TLS: `cert=FILE,key=FILE[,client-ca=FILE][,client-san=NAME]` (client-ca: require client certificates of those authorities)"),
		grpcTLS:  fs.String("grpc-tls", "", "serve gRPC with TLS: `cert=FILE,key=FILE[,client-ca=FILE][,client-san=NAME]` (GRPC_SERVER_USE_TLS, GRPC_SERVER_TLS_CERT, _KEY, GRPC_SERVER_TLS_CA_CERT or GRPC_CLIENT_TLS_CACERT, GRPC_CLIENT_TLS_SAN)"),
		adminTLS: fs.String("admin-tls", "", "serve the admin view with TLS: `cert=FILE,key=FILE[,client-ca=FILE][,client-san=NAME]`"),
		redisTLS: fs.String("redis-tls", "", "Redis's TLS files for a rediss:// URL: `[ca=FILE][,cert=FILE,key=FILE][,skip-hostname]` (REDIS_TLS_CACERT, REDIS_TLS_CLIENT_CERT, _KEY, REDIS_TLS_SKIP_HOSTNAME_VERIFICATION)"),

		metricsAddr: fs.String("metrics", "", "also serve /metrics on this `address` (USE_PROMETHEUS, PROMETHEUS_ADDR)"),
		metricsPath: fs.String("metrics-path", "/metrics", "the `path` of --metrics (PROMETHEUS_PATH)"),

		tracing:         fs.Bool("tracing", false, "export a span per Envoy answer and per store call over OTLP (TRACING_ENABLED); the collector from OTEL_EXPORTER_OTLP_ENDPOINT unless --tracing-endpoint"),
		tracingEndpoint: fs.String("tracing-endpoint", "", "the OTLP collector's `URL`, such as http://otel-collector:4318"),
		tracingProtocol: fs.String("tracing-protocol", "http", "OTLP's `transport`: http or grpc (TRACING_EXPORTER_PROTOCOL)"),
		tracingRate:     fs.Float64("tracing-sampling-rate", 1, "the `share` of traces kept when the caller does not say, 0 to 1 (TRACING_SAMPLING_RATE)"),

		maxInFlight:     fs.Int("max-in-flight", 0, "take at most `N` requests at once over gRPC and HTTP; refuse the others at once (MAX_CONCURRENT_REQUESTS; 0: no bound)"),
		requestTimeout:  fs.Duration("request-timeout", 0, "give each request at most this `long` (REQUEST_TIMEOUT; 0: no bound)"),
		storeTimeout:    fs.Duration("store-timeout", 0, "give each store call at most this `long` unless the file's store.timeout says (REDIS_TIMEOUT; 0: 50ms)"),
		grpcMaxStreams:  fs.Int("grpc-max-streams", 0, "at most `N` concurrent gRPC streams per connection (GRPC_MAX_CONCURRENT_STREAMS; 0: gRPC's default)"),
		grpcMaxAge:      fs.Duration("grpc-max-connection-age", 0, "close a gRPC connection this `long` after it opened, so clients spread over new servers (GRPC_MAX_CONNECTION_AGE; 0: never)"),
		grpcMaxAgeGrace: fs.Duration("grpc-max-connection-age-grace", 0, "then give its calls this `long` to finish (GRPC_MAX_CONNECTION_AGE_GRACE)"),
	}
}

// spec parses a flag's comma-separated key=value list, whose keys must be
// among valid; a bare key is "true".
func spec(flagName, s string, valid ...string) (map[string]string, error) {
	out := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			v = "true"
		}
		known := false
		for _, name := range valid {
			known = known || name == k
		}
		if !known {
			return nil, fmt.Errorf("--%s: unknown key %q in %q; use %s", flagName, k, s, strings.Join(valid, ", "))
		}
		out[k] = v
	}
	return out, nil
}

// envMap parses envoyproxy/ratelimit's maps: "k1:v1,k2:v2", or with '='
// (its node metadata).
func envMap(name, s string, sep string) (map[string]string, error) {
	if s == "" {
		return nil, nil
	}
	out := map[string]string{}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(part, sep)
		if !ok || k == "" {
			return nil, fmt.Errorf("%s=%q: write it as key%svalue,key2%svalue2", name, s, sep, sep)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out, nil
}

// parseBool is strconv.ParseBool with the variable's name in its error.
func parseBool(name, v string) (bool, error) {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s=%q: use true or false", name, v)
	}
	return b, nil
}
