package deploy

import (
	"flag"
	"slices"
	"strings"
)

// A Var is a row of the table: an environment variable of
// envoyproxy/ratelimit's (or of Envoy Gateway's), the flag of sluice serve
// it stands for when the command line leaves that flag out, what an unset
// variable means, how its value is read and where it goes, and what sluice
// does with it. A row with no variable declares a flag no variable stands
// for; a row with no flag sets what only the environment sets.
type Var struct {
	Env     string // the variable
	Flag    string // the flag it stands for, without its dashes
	Default string // what an unset variable means: its parser takes it, or the flag's default, the file or the library says the same
	When    string // read only then: "VAR" (a true boolean), "VAR=VALUE" or "VAR!=VALUE"
	Note    string // what sluice does with it (docs/envoy.md lists it)

	// declare, on the row that declares Flag, defines it with usage (for
	// serve) or checkUsage (for check, when it has the flag too).
	declare           func(fs *flag.FlagSet, name, usage string)
	usage, checkUsage string

	// parse reads the variable's value (maybe empty) and puts it where it
	// goes; nil: the variable is read by another's row or as it is.
	parse parser
}

// Table is the table of the deploy flags and envoyproxy/ratelimit's
// environment, in the order they are applied.
func Table() []Var { return (&Flags{}).table() }

const xdsOn = "CONFIG_TYPE=GRPC_XDS_SOTW"

// table is the table bound to f's fields: the process and the Envoy
// model's rows, then the control plane's, then the listeners' and bounds'.
func (f *Flags) table() []Var {
	return slices.Concat(f.serviceRows(), f.xdsRows(), f.listenerRows())
}

// serviceRows are the rows of the process, the store and the Envoy model.
func (f *Flags) serviceRows() []Var {
	return []Var{
		{Env: "RUNTIME_ROOT", Flag: "envoy-config", When: "CONFIG_TYPE!=GRPC_XDS_SOTW", parse: part("root"), declare: stringFlag(&f.envoyDir, ""),
			usage:      "serve this `directory` of envoyproxy/ratelimit configuration files (its *.yaml files, as they are) on Envoy's rate-limit service and /json",
			checkUsage: "validate this `directory` of envoyproxy/ratelimit configuration files (its *.yaml files), or decide a request against it with --domain",
			Note:       "`--envoy-config ROOT/SUB/APP`: every `*.yaml` and `*.yml` below it, dot files skipped, watched"},
		{Env: "RUNTIME_SUBDIRECTORY", Flag: "envoy-config", When: "CONFIG_TYPE!=GRPC_XDS_SOTW", parse: part("sub"), Note: "the SUB of `--envoy-config`"},
		{Env: "RUNTIME_APPDIRECTORY", Flag: "envoy-config", Default: "config", When: "CONFIG_TYPE!=GRPC_XDS_SOTW", parse: part("app"), Note: "the APP of `--envoy-config`"},
		{Env: "RUNTIME_WATCH_ROOT", Note: "accepted: sluice always watches the directory"},
		{Env: "RUNTIME_IGNOREDOTFILES", parse: noteUnless("RUNTIME_IGNOREDOTFILES=false: sluice always skips the names that start with '.' in the configuration directory"),
			Note: "accepted: sluice always skips dot files (`false` is noted at start)"},
		{Env: "HOST", Flag: "http", parse: part("host"), Note: "the HOST of `--http HOST:PORT`"},
		{Env: "PORT", Flag: "http", parse: part("port"), Note: "`--http HOST:PORT` (default `:8080`)"},
		{Env: "GRPC_HOST", Flag: "grpc", parse: part("host"), Note: "the HOST of `--grpc HOST:PORT`"},
		{Env: "GRPC_PORT", Flag: "grpc", parse: part("port"), Note: "`--grpc HOST:PORT` (default `:8081` with `--envoy-config` or `--envoy-xds`)"},
		{Env: "LOG_LEVEL", Flag: "log-level", parse: set(logLevel), Note: "`trace` is debug, `warning` warn, `fatal` and `panic` error"},
		{Env: "LOG_FORMAT", Flag: "log-format", parse: set(strings.ToLower), Note: "`text` or `json`"},

		{Env: "REDIS_URL", Flag: "redis", parse: part("url"), Note: "`host:port`; a comma-separated list for a cluster; `master,host:port,...` for Sentinel; or a `redis://` URL"},
		{Env: "REDIS_SOCKET_TYPE", Flag: "redis", Default: "tcp", parse: part("socket"), Note: "`tcp` only: sluice connects to Redis over TCP"},
		{Env: "REDIS_TYPE", Flag: "redis", Default: "single", parse: part("type"), Note: "`single`, `cluster` or `sentinel`"},
		{Env: "REDIS_AUTH", Flag: "redis", parse: part("auth"), Note: "`password` or `user:password`, in the URL"},
		{Env: "REDIS_TLS", Flag: "redis", Default: "false", parse: part("tls"), Note: "`true`: `rediss://`"},
		{Env: "REDIS_TLS_CACERT", Flag: "redis-tls", parse: part("ca"), declare: stringFlag(&f.redisTLS, ""),
			usage: "Redis's TLS files for a rediss:// URL: `[ca=FILE][,cert=FILE,key=FILE][,skip-hostname]` (REDIS_TLS_CACERT, REDIS_TLS_CLIENT_CERT, _KEY, REDIS_TLS_SKIP_HOSTNAME_VERIFICATION)",
			Note:  "`--redis-tls ca=F`"},
		{Env: "REDIS_TLS_CLIENT_CERT", Flag: "redis-tls", parse: part("cert"), Note: "`--redis-tls cert=F`"},
		{Env: "REDIS_TLS_CLIENT_KEY", Flag: "redis-tls", parse: part("key"), Note: "`--redis-tls key=F`"},
		{Env: "REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", Flag: "redis-tls", Default: "false", parse: flagPart("skip-hostname"), Note: "`--redis-tls skip-hostname`"},
		{Env: "REDIS_TIMEOUT", Flag: "store-timeout", parse: set(nil), declare: durationFlag(&f.storeTimeout),
			usage: "give each store call at most this `long` unless the file's store.timeout says (REDIS_TIMEOUT; 0: 50ms)",
			Note:  "default 50 ms, [difference 24](#every-difference)"},

		{Env: "SHADOW_MODE", Flag: "envoy-shadow-mode", parse: setBool, Note: "answer `OK` to every request, reporting the limits still", declare: boolFlag(&f.shadow),
			usage: "answer OK to every request whatever its limits say, reporting them still (SHADOW_MODE)"},
		{Env: "STOP_CACHE_KEY_INCREMENT_WHEN_OVERLIMIT", Flag: "envoy-counting", parse: perDescriptorUnless, declare: stringFlag(&f.counting, "all-or-nothing"),
			usage:      "what a request's hits count in: all-or-nothing (every matched limit or none) or per-descriptor (envoyproxy/ratelimit's: every matched limit, over or not)",
			checkUsage: "what a request's hits count in: all-or-nothing (every matched limit or none) or per-descriptor (envoyproxy/ratelimit's: every matched limit, over or not)",
			Note:       "`false`: `--envoy-counting per-descriptor`"},
		{Env: "MERGE_DOMAIN_CONFIG", Flag: "envoy-merge-domains", parse: setBool, declare: boolFlag(&f.merge),
			usage: "let several files configure one domain (MERGE_DOMAIN_CONFIG)", checkUsage: "let several files configure one domain (MERGE_DOMAIN_CONFIG)",
			Note: "several files may configure one domain"},
		{Env: "SLUICE_CALENDAR_UNITS", Flag: "envoy-calendar-units", parse: setBool, declare: boolFlag(&f.calendar),
			usage:      "count the units day, week, month and year as calendar periods in UTC, reset at their start, instead of sliding windows of 1, 7, 30 and 365 days (SLUICE_CALENDAR_UNITS)",
			checkUsage: "count the units day, week, month and year as calendar periods in UTC, reset at their start, instead of sliding windows of 1, 7, 30 and 365 days (SLUICE_CALENDAR_UNITS)",
			Note:       "sluice's own: `true` counts `day`, `week` (from Monday), `month` and `year` as calendar periods in UTC, each reset at its start; unset, a sliding window of 1, 7, 30 or 365 days as envoyproxy/ratelimit's"},
		{Env: "LIMIT_RESPONSE_HEADERS_ENABLED", Flag: "envoy-headers", parse: gate, declare: stringFlag(&f.headers, ""),
			usage: "response headers for Envoy to add: ratelimit (IETF RateLimit), x-ratelimit (x-ratelimit-limit, -remaining, -reset), or both, comma-separated (default none)",
			Note:  "`true`: `--envoy-headers x-ratelimit` with the names below"},
		{Env: "LIMIT_LIMIT_HEADER", Flag: "envoy-headers", Default: "RateLimit-Limit", When: "LIMIT_RESPONSE_HEADERS_ENABLED", parse: part("limit"), Note: "the limit's header"},
		{Env: "LIMIT_REMAINING_HEADER", Flag: "envoy-headers", Default: "RateLimit-Remaining", When: "LIMIT_RESPONSE_HEADERS_ENABLED", parse: part("remaining"), Note: "the remaining's header"},
		{Env: "LIMIT_RESET_HEADER", Flag: "envoy-headers", Default: "RateLimit-Reset", When: "LIMIT_RESPONSE_HEADERS_ENABLED", parse: part("reset"), Note: "the reset's header"},
		{Env: "RESPONSE_DYNAMIC_METADATA", Flag: "envoy-dynamic-metadata", parse: setBool, Note: "send the request and the passing descriptors' metadata as dynamic metadata", declare: boolFlag(&f.dynMeta),
			usage: "send each answer's dynamic metadata: the request and the metadata of the descriptors that passed (RESPONSE_DYNAMIC_METADATA)"},
		{Env: "QUOTA_MODE", Flag: "envoy-quota-mode", parse: setBool, Note: "every descriptor in quota mode: `OVER_LIMIT` only when all are over", declare: boolFlag(&f.quota),
			usage: "put every descriptor in quota_mode: OVER_LIMIT only when all of a request's are over (QUOTA_MODE)"},
		{Env: "HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", Flag: "envoy-require-domain", parse: setBool, Note: "unready while the Envoy configuration has no domain", declare: boolFlag(&f.requireDomain),
			usage: "be unready while the Envoy configuration has no domain (HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED)"},
	}
}

// xdsRows are the rows of the xDS control plane's client.
func (f *Flags) xdsRows() []Var {
	e := &f.env
	return []Var{
		{Env: "CONFIG_TYPE", Flag: "envoy-xds", Default: "FILE", parse: configType, Note: "`FILE` (`RUNTIME_ROOT`'s files) or `GRPC_XDS_SOTW` (an xDS control plane; `RUNTIME_ROOT` is not read then)"},
		{Env: "CONFIG_GRPC_XDS_SERVER_URL", Flag: "envoy-xds", Default: "localhost:18000", When: xdsOn, parse: setOr, Note: "the control plane's `host:port`", declare: stringFlag(&f.xds, ""),
			usage: "take the Envoy configuration from the xDS control plane at this `host:port` (CONFIG_TYPE=GRPC_XDS_SOTW, CONFIG_GRPC_XDS_SERVER_URL) instead of files"},
		{Env: "CONFIG_GRPC_XDS_NODE_ID", Flag: "envoy-xds-node", Default: "default", When: xdsOn, parse: set(nil), Note: "the node id given to the control plane; also the file's `envoy.xds`", declare: stringFlag(&f.xdsNode, ""),
			usage: "the node `id` to give the control plane (CONFIG_GRPC_XDS_NODE_ID; default \"default\")"},
		{Env: "CONFIG_GRPC_XDS_SERVER_USE_TLS", Flag: "envoy-xds-tls", When: xdsOn, parse: gate, declare: stringFlag(&f.xdsTLS, ""),
			usage: "connect to the control plane with TLS: `ca=FILE[,cert=FILE,key=FILE][,server-name=NAME]`, or \"system\" for the system's authorities (CONFIG_GRPC_XDS_SERVER_USE_TLS and the files beside it)",
			Note:  "`true`: `--envoy-xds-tls` with the files below, or `system` for the system's authorities and no client certificate"},
		{Env: "CONFIG_GRPC_XDS_SERVER_TLS_CACERT", Flag: "envoy-xds-tls", When: "CONFIG_GRPC_XDS_SERVER_USE_TLS", parse: part("ca"), Note: "`--envoy-xds-tls ca=F`"},
		{Env: "CONFIG_GRPC_XDS_CLIENT_TLS_CERT", Flag: "envoy-xds-tls", When: "CONFIG_GRPC_XDS_SERVER_USE_TLS", parse: part("cert"), Note: "`--envoy-xds-tls cert=F`"},
		{Env: "CONFIG_GRPC_XDS_CLIENT_TLS_KEY", Flag: "envoy-xds-tls", When: "CONFIG_GRPC_XDS_SERVER_USE_TLS", parse: part("key"), Note: "`--envoy-xds-tls key=F`"},
		{Env: "CONFIG_GRPC_XDS_SERVER_TLS_SAN", Flag: "envoy-xds-tls", When: "CONFIG_GRPC_XDS_SERVER_USE_TLS", parse: part("server-name"), Note: "`--envoy-xds-tls server-name=N`"},
		{Env: "FORCE_START_WITHOUT_INITIAL_CONFIG", Flag: "envoy-xds-force-start", When: xdsOn, parse: setBool, Note: "serve before the control plane's first version, every domain unknown; otherwise unready until it", declare: boolFlag(&f.xdsForce),
			usage: "serve before the control plane's first version, every domain unknown (FORCE_START_WITHOUT_INITIAL_CONFIG); otherwise be unready until it"},
		{Env: "CONFIG_GRPC_XDS_NODE_METADATA", When: xdsOn, parse: toMap(&e.nodeMetadata, "="), Note: "`k=v,...`; also the configuration file's `envoy.xds` ([config.md](config.md))"},
		{Env: "CONFIG_GRPC_XDS_CLIENT_ADDITIONAL_HEADERS", When: xdsOn, parse: toMap(&e.headers, ":"), Note: "`k:v,...`; also the file's `envoy.xds`"},
		{Env: "CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", Default: "3s", When: xdsOn, parse: toDuration(&e.connectRetry), Note: "also the file's `envoy.xds`"},
		{Env: "XDS_CLIENT_BACKOFF_INITIAL_INTERVAL", Default: "10s", When: xdsOn, parse: toDuration(&e.backoffInit), Note: "also the file's `envoy.xds`"},
		{Env: "XDS_CLIENT_BACKOFF_MAX_INTERVAL", Default: "60s", When: xdsOn, parse: toDuration(&e.backoffMax), Note: "also the file's `envoy.xds`"},
		{Env: "XDS_CLIENT_BACKOFF_RANDOM_FACTOR", Default: "0.5", When: xdsOn, parse: toShare(&e.backoffRandom), Note: "from 0 to 1"},
		{Env: "XDS_CLIENT_BACKOFF_JITTER", Default: "true", When: xdsOn, parse: toNot(&e.noJitter), Note: "`false`: no jitter"},
		{Env: "XDS_CLIENT_MAX_MSG_SIZE_IN_BYTES", When: xdsOn, parse: toSize(&e.maxMessage), Note: "also the file's `envoy.xds`"},
	}
}

// listenerRows are the rows of the listeners' TLS, metrics, tracing and
// the server's bounds.
func (f *Flags) listenerRows() []Var {
	e := &f.env
	return []Var{
		{Env: "GRPC_SERVER_USE_TLS", Flag: "grpc-tls", parse: gate, declare: stringFlag(&f.grpcTLS, ""),
			usage: "serve gRPC with TLS: `cert=FILE,key=FILE[,client-ca=FILE][,client-san=NAME]` (GRPC_SERVER_USE_TLS, GRPC_SERVER_TLS_CERT, _KEY, GRPC_SERVER_TLS_CA_CERT or GRPC_CLIENT_TLS_CACERT, GRPC_CLIENT_TLS_SAN)",
			Note:  "`true`: `--grpc-tls` with the files below"},
		{Env: "GRPC_SERVER_TLS_CERT", Flag: "grpc-tls", When: "GRPC_SERVER_USE_TLS", parse: part("cert"), Note: "`--grpc-tls cert=F`"},
		{Env: "GRPC_SERVER_TLS_KEY", Flag: "grpc-tls", When: "GRPC_SERVER_USE_TLS", parse: part("key"), Note: "`--grpc-tls key=F`"},
		{Env: "GRPC_SERVER_TLS_CA_CERT", Flag: "grpc-tls", When: "GRPC_SERVER_USE_TLS", parse: part("client-ca"), Note: "Envoy Gateway's name: `--grpc-tls client-ca=F`"},
		{Env: "GRPC_CLIENT_TLS_CACERT", Flag: "grpc-tls", When: "GRPC_SERVER_USE_TLS", parse: part("client-ca"), Note: "envoyproxy/ratelimit's name: `--grpc-tls client-ca=F`"},
		{Env: "GRPC_CLIENT_TLS_SAN", Flag: "grpc-tls", When: "GRPC_SERVER_USE_TLS", parse: part("client-san"), Note: "`--grpc-tls client-san=N`"},
		{Flag: "http-tls", declare: stringFlag(&f.httpTLS, ""),
			usage: "serve HTTP with TLS: `cert=FILE,key=FILE[,client-ca=FILE][,client-san=NAME]` (client-ca: require client certificates of those authorities)"},
		{Flag: "admin-tls", declare: stringFlag(&f.adminTLS, ""),
			usage: "serve the admin view with TLS: `cert=FILE,key=FILE[,client-ca=FILE][,client-san=NAME]`"},

		{Env: "USE_PROMETHEUS", Flag: "metrics", parse: gate, declare: stringFlag(&f.metricsAddr, ""),
			usage: "also serve /metrics on this `address` (USE_PROMETHEUS, PROMETHEUS_ADDR)", Note: "`true`: `--metrics ADDR`"},
		{Env: "PROMETHEUS_ADDR", Flag: "metrics", Default: ":9090", When: "USE_PROMETHEUS", parse: part("addr"), Note: "the ADDR of `--metrics`"},
		{Env: "PROMETHEUS_PATH", Flag: "metrics-path", Default: "/metrics", When: "USE_PROMETHEUS", parse: set(nil), Note: "the path of `--metrics`", declare: stringFlag(&f.metricsPath, "/metrics"),
			usage: "the `path` of --metrics (PROMETHEUS_PATH)"},
		{Env: "PROMETHEUS_MAPPER_YAML", parse: noteIfSet(" is not read: sluice's metrics carry the names and labels envoyproxy/ratelimit's default mapping gives its statistics (docs/envoy.md, Metrics)"),
			Note: "accepted, not read (noted at start): the metrics have the default mapping's names"},
		{Env: "USE_STATSD", parse: noteIfTrue("USE_STATSD=true: sluice sends no statsd; its metrics are Prometheus's, on --metrics (USE_PROMETHEUS) and /metrics"),
			Note: "accepted; `true` is noted at start: sluice sends no statsd"},

		{Env: "TRACING_ENABLED", Flag: "tracing", parse: setBool, Note: "a span per Envoy answer and per store call, over OTLP", declare: boolFlag(&f.tracing),
			usage: "export a span per Envoy answer and per store call over OTLP (TRACING_ENABLED); the collector from OTEL_EXPORTER_OTLP_ENDPOINT unless --tracing-endpoint"},
		{Flag: "tracing-endpoint", declare: stringFlag(&f.tracingEndpoint, ""),
			usage: "the OTLP collector's `URL`, such as http://otel-collector:4318"},
		{Env: "OTEL_EXPORTER_OTLP_ENDPOINT", Flag: "tracing-endpoint", Note: "read by the OpenTelemetry exporter as it is, with the other `OTEL_EXPORTER_OTLP_*`"},
		{Env: "TRACING_EXPORTER_PROTOCOL", Flag: "tracing-protocol", Default: "http", parse: set(strings.ToLower), Note: "`http` or `grpc`", declare: stringFlag(&f.tracingProtocol, "http"),
			usage: "OTLP's `transport`: http or grpc (TRACING_EXPORTER_PROTOCOL)"},
		{Env: "TRACING_SAMPLING_RATE", Flag: "tracing-sampling-rate", Default: "1", parse: set(nil), Note: "the share of traces kept when the caller does not say, 0 to 1", declare: floatFlag(&f.tracingRate, 1),
			usage: "the `share` of traces kept when the caller does not say, 0 to 1 (TRACING_SAMPLING_RATE)"},
		{Env: "TRACING_SERVICE_NAME", Default: "RateLimit", parse: to(&e.serviceName), Note: "the spans' service"},
		{Env: "TRACING_SERVICE_NAMESPACE", parse: to(&e.namespace), Note: "the spans' service namespace"},
		{Env: "TRACING_SERVICE_INSTANCE_ID", parse: to(&e.instance), Note: "the spans' service instance (default: random)"},

		{Env: "MAX_CONCURRENT_REQUESTS", Flag: "max-in-flight", parse: set(nil), Note: "at most N requests at once over gRPC and HTTP; the others refused at once (0: no bound)", declare: intFlag(&f.maxInFlight),
			usage: "take at most `N` requests at once over gRPC and HTTP; refuse the others at once (MAX_CONCURRENT_REQUESTS; 0: no bound)"},
		{Env: "REQUEST_TIMEOUT", Flag: "request-timeout", parse: set(nil), Note: "each request's longest time (0: no bound)", declare: durationFlag(&f.requestTimeout),
			usage: "give each request at most this `long` (REQUEST_TIMEOUT; 0: no bound)"},
		{Env: "GRPC_MAX_CONCURRENT_STREAMS", Flag: "grpc-max-streams", parse: set(nil), Note: "concurrent gRPC streams per connection (0: gRPC's default)", declare: intFlag(&f.grpcMaxStreams),
			usage: "at most `N` concurrent gRPC streams per connection (GRPC_MAX_CONCURRENT_STREAMS; 0: gRPC's default)"},
		{Env: "GRPC_MAX_CONNECTION_AGE", Flag: "grpc-max-connection-age", parse: set(nil), Note: "close a gRPC connection this long after it opened (0: never)", declare: durationFlag(&f.grpcMaxAge),
			usage: "close a gRPC connection this `long` after it opened, so clients spread over new servers (GRPC_MAX_CONNECTION_AGE; 0: never)"},
		{Env: "GRPC_MAX_CONNECTION_AGE_GRACE", Flag: "grpc-max-connection-age-grace", parse: set(nil), Note: "then give its calls this long to finish", declare: durationFlag(&f.grpcMaxAgeGrace),
			usage: "then give its calls this `long` to finish (GRPC_MAX_CONNECTION_AGE_GRACE)"},
	}
}
