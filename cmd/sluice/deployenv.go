package main

import (
	"cmp"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// applyDeployEnv gives the deploy flags the command line leaves out the
// values of envoyproxy/ratelimit's environment variables, and of Envoy
// Gateway's name for one, so that the deployments that start that service
// start sluice unchanged:
//
//	RESPONSE_DYNAMIC_METADATA, QUOTA_MODE                  --envoy-dynamic-metadata, --envoy-quota-mode
//	HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED                --envoy-require-domain
//	CONFIG_TYPE=GRPC_XDS_SOTW, CONFIG_GRPC_XDS_SERVER_URL  --envoy-xds (default localhost:18000)
//	CONFIG_GRPC_XDS_NODE_ID                                --envoy-xds-node
//	CONFIG_GRPC_XDS_SERVER_USE_TLS, _CLIENT_TLS_CERT,
//	_CLIENT_TLS_KEY, _SERVER_TLS_CACERT, _SERVER_TLS_SAN   --envoy-xds-tls
//	FORCE_START_WITHOUT_INITIAL_CONFIG                     --envoy-xds-force-start
//	GRPC_SERVER_USE_TLS, GRPC_SERVER_TLS_CERT, _KEY,
//	GRPC_SERVER_TLS_CA_CERT (Envoy Gateway's) or
//	GRPC_CLIENT_TLS_CACERT, GRPC_CLIENT_TLS_SAN            --grpc-tls
//	REDIS_TLS_CACERT, REDIS_TLS_CLIENT_CERT, _KEY,
//	REDIS_TLS_SKIP_HOSTNAME_VERIFICATION                   --redis-tls
//	USE_PROMETHEUS, PROMETHEUS_ADDR (default :9090),
//	PROMETHEUS_PATH                                        --metrics, --metrics-path
//	TRACING_ENABLED, TRACING_EXPORTER_PROTOCOL,
//	TRACING_SAMPLING_RATE                                  --tracing, --tracing-protocol, --tracing-sampling-rate
//	MAX_CONCURRENT_REQUESTS, REQUEST_TIMEOUT               --max-in-flight, --request-timeout
//	REDIS_TIMEOUT                                          --store-timeout
//	GRPC_MAX_CONCURRENT_STREAMS                            --grpc-max-streams
//	GRPC_MAX_CONNECTION_AGE, GRPC_MAX_CONNECTION_AGE_GRACE --grpc-max-connection-age, ...-grace
//
// and, with no flag: CONFIG_GRPC_XDS_NODE_METADATA,
// CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS,
// CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL, XDS_CLIENT_BACKOFF_*,
// XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES, TRACING_SERVICE_NAME,
// TRACING_SERVICE_NAMESPACE and TRACING_SERVICE_INSTANCE_ID; the
// OpenTelemetry exporter reads OTEL_EXPORTER_OTLP_ENDPOINT and its kin
// itself. USE_STATSD, PROMETHEUS_MAPPER_YAML, RUNTIME_IGNOREDOTFILES and
// RUNTIME_WATCH_ROOT are taken and noted where sluice does otherwise.
func applyDeployEnv(fs *flag.FlagSet, d *deployFlags, getenv func(string) string) error {
	given := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { given[fl.Name] = true })
	a := &envApplier{fs: fs, given: given, getenv: getenv}
	a.boolean("RESPONSE_DYNAMIC_METADATA", "envoy-dynamic-metadata")
	a.boolean("QUOTA_MODE", "envoy-quota-mode")
	a.boolean("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", "envoy-require-domain")
	switch ct := strings.ToUpper(getenv("CONFIG_TYPE")); ct {
	case "", "FILE":
	case "GRPC_XDS_SOTW":
		a.xds(&d.env)
	default:
		a.fail(fmt.Errorf("CONFIG_TYPE=%q: use FILE (RUNTIME_ROOT's files) or GRPC_XDS_SOTW (an xDS control plane)", ct))
	}
	a.grpcTLS()
	a.redisTLS()
	if a.on("USE_PROMETHEUS") {
		a.set("metrics", cmp.Or(getenv("PROMETHEUS_ADDR"), ":9090"))
		a.set("metrics-path", getenv("PROMETHEUS_PATH"))
	}
	if m := getenv("PROMETHEUS_MAPPER_YAML"); m != "" {
		d.env.notes = append(d.env.notes, "PROMETHEUS_MAPPER_YAML="+m+" is not read: sluice's metrics carry the names and labels envoyproxy/ratelimit's default mapping gives its statistics (docs/envoy.md, Metrics)")
	}
	if a.on("USE_STATSD") {
		d.env.notes = append(d.env.notes, "USE_STATSD=true: sluice sends no statsd; its metrics are Prometheus's, on --metrics (USE_PROMETHEUS) and /metrics")
	}
	if v := getenv("RUNTIME_IGNOREDOTFILES"); v != "" && !a.on("RUNTIME_IGNOREDOTFILES") {
		d.env.notes = append(d.env.notes, "RUNTIME_IGNOREDOTFILES=false: sluice always skips the names that start with '.' in the configuration directory")
	}
	a.boolean("TRACING_ENABLED", "tracing")
	a.set("tracing-protocol", strings.ToLower(getenv("TRACING_EXPORTER_PROTOCOL")))
	a.set("tracing-sampling-rate", getenv("TRACING_SAMPLING_RATE"))
	d.env.serviceName, d.env.namespace, d.env.instance = getenv("TRACING_SERVICE_NAME"), getenv("TRACING_SERVICE_NAMESPACE"), getenv("TRACING_SERVICE_INSTANCE_ID")
	a.set("max-in-flight", getenv("MAX_CONCURRENT_REQUESTS"))
	a.set("request-timeout", getenv("REQUEST_TIMEOUT"))
	a.set("store-timeout", getenv("REDIS_TIMEOUT"))
	a.set("grpc-max-streams", getenv("GRPC_MAX_CONCURRENT_STREAMS"))
	a.set("grpc-max-connection-age", getenv("GRPC_MAX_CONNECTION_AGE"))
	a.set("grpc-max-connection-age-grace", getenv("GRPC_MAX_CONNECTION_AGE_GRACE"))
	return a.err
}

// envApplier sets flags from variables, keeping the first error.
type envApplier struct {
	fs     *flag.FlagSet
	given  map[string]bool
	getenv func(string) string
	err    error
}

func (a *envApplier) fail(err error) {
	if a.err == nil {
		a.err = err
	}
}

// set sets the flag name to value unless the command line gave it or value
// is empty.
func (a *envApplier) set(name, value string) {
	if a.given[name] || value == "" {
		return
	}
	if err := a.fs.Set(name, value); err != nil {
		a.fail(fmt.Errorf("--%s from the environment: %v", name, err))
	}
}

// on reports whether the variable name is true; a value that is not a
// boolean is an error.
func (a *envApplier) on(name string) bool {
	v := a.getenv(name)
	if v == "" {
		return false
	}
	b, err := parseBool(name, v)
	a.fail(err)
	return b
}

// boolean sets the boolean flag name from the variable env, when set.
func (a *envApplier) boolean(env, name string) {
	if v := a.getenv(env); v != "" {
		if b, err := parseBool(env, v); err != nil {
			a.fail(err)
		} else {
			a.set(name, strconv.FormatBool(b))
		}
	}
}

// xds takes the xDS client's variables.
func (a *envApplier) xds(env *deployEnv) {
	get := a.getenv
	a.set("envoy-xds", cmp.Or(get("CONFIG_GRPC_XDS_SERVER_URL"), "localhost:18000"))
	a.set("envoy-xds-node", get("CONFIG_GRPC_XDS_NODE_ID"))
	if a.on("CONFIG_GRPC_XDS_SERVER_USE_TLS") {
		parts := keyValues("ca", get("CONFIG_GRPC_XDS_SERVER_TLS_CACERT"), "cert", get("CONFIG_GRPC_XDS_CLIENT_TLS_CERT"),
			"key", get("CONFIG_GRPC_XDS_CLIENT_TLS_KEY"), "server-name", get("CONFIG_GRPC_XDS_SERVER_TLS_SAN"))
		a.set("envoy-xds-tls", cmp.Or(parts, "system"))
	}
	a.boolean("FORCE_START_WITHOUT_INITIAL_CONFIG", "envoy-xds-force-start")
	var err error
	if env.nodeMetadata, err = envMap("CONFIG_GRPC_XDS_NODE_METADATA", get("CONFIG_GRPC_XDS_NODE_METADATA"), "="); err != nil {
		a.fail(err)
	}
	if env.headers, err = envMap("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", get("CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS"), ":"); err != nil {
		a.fail(err)
	}
	for _, dv := range []struct {
		name string
		to   *time.Duration
	}{{"CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", &env.connectRetry}, {"XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", &env.backoffInit},
		{"XDS_CLIENT_BACKOFF_MAX_INTERVAL", &env.backoffMax}} {
		if v := get(dv.name); v != "" {
			if *dv.to, err = time.ParseDuration(v); err != nil || *dv.to <= 0 {
				a.fail(fmt.Errorf("%s=%q: give a duration longer than zero, such as 3s", dv.name, v))
			}
		}
	}
	if v := get("XDS_CLIENT_BACKOFF_RANDOM_FACTOR"); v != "" {
		if env.backoffRandom, err = strconv.ParseFloat(v, 64); err != nil || env.backoffRandom < 0 || env.backoffRandom > 1 {
			a.fail(fmt.Errorf("XDS_CLIENT_BACKOFF_RANDOM_FACTOR=%q: give a number from 0 to 1, such as 0.5", v))
		}
	}
	if v := get("XDS_CLIENT_BACKOFF_JITTER"); v != "" {
		env.noJitter = !a.on("XDS_CLIENT_BACKOFF_JITTER")
	}
	if v := get("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES"); v != "" {
		if env.maxMessage, err = strconv.Atoi(v); err != nil || env.maxMessage < 0 {
			a.fail(fmt.Errorf("XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES=%q: give a size in bytes, such as 4194304", v))
		}
	}
}

// grpcTLS takes the gRPC listener's TLS variables: Envoy Gateway names the
// authorities of the client certificates GRPC_SERVER_TLS_CA_CERT,
// envoyproxy/ratelimit GRPC_CLIENT_TLS_CACERT.
func (a *envApplier) grpcTLS() {
	if !a.on("GRPC_SERVER_USE_TLS") {
		return
	}
	get := a.getenv
	cert, key := get("GRPC_SERVER_TLS_CERT"), get("GRPC_SERVER_TLS_KEY")
	if cert == "" || key == "" {
		a.fail(fmt.Errorf("GRPC_SERVER_USE_TLS=true needs GRPC_SERVER_TLS_CERT and GRPC_SERVER_TLS_KEY: the server's certificate and its key"))
		return
	}
	eg, upstream := get("GRPC_SERVER_TLS_CA_CERT"), get("GRPC_CLIENT_TLS_CACERT")
	if eg != "" && upstream != "" && eg != upstream {
		a.fail(fmt.Errorf("GRPC_SERVER_TLS_CA_CERT=%q and GRPC_CLIENT_TLS_CACERT=%q name two files for the client certificates' authorities; keep one", eg, upstream))
		return
	}
	a.set("grpc-tls", keyValues("cert", cert, "key", key, "client-ca", cmp.Or(eg, upstream), "client-san", get("GRPC_CLIENT_TLS_SAN")))
}

// redisTLS takes Redis's TLS files.
func (a *envApplier) redisTLS() {
	get := a.getenv
	parts := keyValues("ca", get("REDIS_TLS_CACERT"), "cert", get("REDIS_TLS_CLIENT_CERT"), "key", get("REDIS_TLS_CLIENT_KEY"))
	if a.on("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION") {
		parts = strings.TrimPrefix(parts+",skip-hostname", ",")
	}
	a.set("redis-tls", parts)
}

// keyValues joins the pairs of kv whose value is set as "k=v,k2=v2".
func keyValues(kv ...string) string {
	var parts []string
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			parts = append(parts, kv[i]+"="+kv[i+1])
		}
	}
	return strings.Join(parts, ",")
}
