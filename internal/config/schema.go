package config

import (
	"math"
	"net"
	"net/netip"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicerate/sluice"
)

// The schema of a configuration file, as written (docs/config.md). Each
// struct is a YAML mapping, each field a node[T] that the decoder
// (decode.go) reads by T: a string, an int64, a bool, a time.Duration, a
// sluice.Rate, a netip.Prefix, a list, a map of attribute names to strings,
// a pointer to a section or a list item's mapping. Its tags:
//
//   - yaml: its key, in the order messages list them;
//   - need: it is required, and this says how to add it;
//   - eg: an example of its value, for messages;
//   - what: what messages call it, when not its key;
//   - item: what messages call an item of its list or a value of its map;
//     for a list of mappings, the kind of item (policy, rule);
//   - form: the forms its strings take, of forms (below), such as name,
//     address or algorithm, separated by commas; of a map, its values';
//   - keys: the forms a map's keys take, attribute names: name unless set;
//   - bound: the bounds of a number or duration, one of bounds (below);
//   - nonempty: a map that must have at least one entry.
//
// A new field is one line here and, where the Config takes it, one in
// validate.go.

// node is a field as written in the file: V is its value, read by its type,
// and Node where it is, nil when the field is absent. what is what messages
// call it; ok reports whether it was read without a problem.
type node[T any] struct {
	V T
	*yaml.Node
	what string
	ok   bool
}

// wrapper is every node[T]: how the decoder fills one.
type wrapper interface {
	wrap(n *yaml.Node, what string) (reflect.Value, *bool)
}

// wrap records where f was read and what it is called, and returns its value
// to read and where to record whether that went without a problem.
func (f *node[T]) wrap(n *yaml.Node, what string) (reflect.Value, *bool) {
	f.Node, f.what = n, what
	return reflect.ValueOf(&f.V).Elem(), &f.ok
}

// fileYAML is the whole file.
type fileYAML struct {
	Store       node[*storeYAML]           `yaml:"store"`
	Policies    node[[]node[policyYAML]]   `yaml:"policies" item:"policy" eg:"- {name: api, limits: [{name: per-user, by: [user], limit: 100, window: 1m}]}"`
	Schedules   node[[]node[scheduleYAML]] `yaml:"schedules" item:"schedule" eg:"- {name: carrier, by: [carrier], rate: 4/s, max_delay: 2s}"`
	ForwardAuth node[*forwardAuthYAML]     `yaml:"forward_auth"`
	Envoy       node[*envoyYAML]           `yaml:"envoy"`
	TLS         node[*listenersYAML]       `yaml:"tls"`
}

// policyYAML is one entry of policies: a sluice.Policy.
type policyYAML struct {
	Name       node[string]           `yaml:"name" what:"policy name" form:"name" eg:"notify" need:"name: followed by a name such as notify"`
	Limits     node[[]node[ruleYAML]] `yaml:"limits" item:"rule" eg:"[{name: global, limit: 100, window: 30m}]" need:"limits: a list of rules such as [{name: global, limit: 100, window: 30m}]"`
	Penalize   node[bool]             `yaml:"penalize" eg:"true"`
	Shadow     node[bool]             `yaml:"shadow" eg:"true"`
	Attributes node[[]string]         `yaml:"attributes" item:"attribute name" form:"name" eg:"[user] or [tenant, user]"` // when set, every rule's by must be among them
	DenyCache  node[bool]             `yaml:"deny_cache" eg:"false"`                                                      // absent: true
}

// ruleYAML is one entry of a policy's limits: a sluice.Rule.
type ruleYAML struct {
	Name      node[string]               `yaml:"name" what:"rule name" form:"name" eg:"global" need:"name: followed by a name such as global or per-user"`
	By        node[[]string]             `yaml:"by" item:"attribute name" form:"name" eg:"[user] or [tenant, user]"`
	Limit     node[int64]                `yaml:"limit" bound:"limit" eg:"100"`   // required unless concurrency is given
	Window    node[time.Duration]        `yaml:"window" bound:"window" eg:"30m"` // required unless concurrency is given
	MinGap    node[time.Duration]        `yaml:"min_gap" eg:"100ms"`
	Optional  node[bool]                 `yaml:"optional" eg:"true"`                                                       // applies only when every by attribute is present
	Unless    node[[]string]             `yaml:"unless" item:"attribute name" form:"name" eg:"[user]"`                     // applies only when none of these is present
	Match     node[map[string]string]    `yaml:"match" item:"match value" nonempty:"" eg:"{plan: paid} or {path: /api/*}"` // applies only when the values match
	Overrides node[[]node[overrideYAML]] `yaml:"overrides" item:"override" eg:"[{match: {plan: paid}, limit: 1000}]"`
	Shadow    node[bool]                 `yaml:"shadow" eg:"true"`
	Algorithm node[string]               `yaml:"algorithm" form:"algorithm" eg:"gcra"` // log, gcra or sliding-counter
	Burst     node[int64]                `yaml:"burst" eg:"10"`                        // gcra's
	Spread    node[int64]                `yaml:"spread" eg:"6"`                        // sub-windows of a hot key
	SpreadBy  node[string]               `yaml:"spread_by" eg:"client"`                // the attribute that picks one
	Budget    node[time.Duration]        `yaml:"budget" eg:"1s"`                       // slices leased per process (docs/budgets.md)
	// A concurrency rule: at most this many leases alive at once, each
	// living lease unless released; it takes no limit or window.
	Concurrency node[int64]         `yaml:"concurrency" bound:"concurrency" eg:"4"`
	Lease       node[time.Duration] `yaml:"lease" bound:"lease" eg:"30s"`
	// A calendar quota: at most limit per period in a time zone, and the
	// totals of history periods kept per key. It takes no window.
	Period    node[string] `yaml:"period" form:"period" eg:"month"`
	Timezone  node[string] `yaml:"timezone" eg:"Europe/Berlin"`
	WeekStart node[string] `yaml:"week_start" form:"weekday" eg:"monday"`
	History   node[int64]  `yaml:"history" bound:"history" eg:"12"`
	// A credits rule: a balance per key that requests draw by their cost,
	// starting at credits, renewed by refill; it may pay for the overage
	// of the calendar quota it covers. It takes no limit or window.
	Credits node[int64]       `yaml:"credits" bound:"credits" eg:"500"`
	Refill  node[*refillYAML] `yaml:"refill"`
	Covers  node[string]      `yaml:"covers" form:"name" eg:"monthly"`
}

// refillYAML is a credits rule's refill: a sluice.Refill.
type refillYAML struct {
	To    node[int64]  `yaml:"to" bound:"refill" eg:"500"`
	Add   node[int64]  `yaml:"add" bound:"refill" eg:"100"`
	Every node[string] `yaml:"every" form:"period" eg:"month" need:"every: the period of the refill, such as month"`
}

// overrideYAML is one entry of a rule's overrides: a sluice.Override.
type overrideYAML struct {
	Match     node[map[string]string] `yaml:"match" item:"match value" nonempty:"" eg:"{plan: paid} or {path: /api/*}" need:"match: the attribute values it is for, such as {plan: paid}"`
	Limit     node[int64]             `yaml:"limit" bound:"override limit" eg:"1000"`
	Unlimited node[bool]              `yaml:"unlimited" eg:"true"`
}

// scheduleYAML is one entry of schedules: a sluice.Schedule.
type scheduleYAML struct {
	Name     node[string]        `yaml:"name" what:"schedule name" form:"name" eg:"carrier" need:"name: followed by a name such as carrier"`
	By       node[[]string]      `yaml:"by" item:"attribute name" form:"name" eg:"[carrier]"`
	Rate     node[sluice.Rate]   `yaml:"rate" eg:"4/s" need:"rate: followed by events per period, such as 4/s or 100/30m"`
	MaxDelay node[time.Duration] `yaml:"max_delay" eg:"2s"`
	MaxQueue node[int64]         `yaml:"max_queue" bound:"max_queue" eg:"100"`
}

// storeYAML is the store section: a Store.
type storeYAML struct {
	Redis   node[*redisYAML]    `yaml:"redis" what:"store.redis"`
	Prefix  node[string]        `yaml:"prefix" form:"prefix" eg:"sluice"`
	Timeout node[time.Duration] `yaml:"timeout" bound:"timeout" eg:"50ms"`
	OnError node[string]        `yaml:"on_error" form:"on_error" eg:"deny"`  // deny, allow or fallback
	Share   node[int64]         `yaml:"fallback_share" bound:"share" eg:"3"` // with on_error: fallback
	Layout  node[int64]         `yaml:"layout" bound:"layout" eg:"2"`        // the keys' layout: 1 or 2
}

// redisYAML is store.redis: a Redis.
type redisYAML struct {
	Addrs        node[[]string]      `yaml:"addrs" item:"address" form:"address" eg:"[\"10.0.0.1:6379\"]" need:"addrs: a list of host:port, such as [\"127.0.0.1:6379\"]"`
	Mode         node[string]        `yaml:"mode" form:"mode" eg:"cluster"` // standalone, cluster or sentinel
	Username     node[string]        `yaml:"username" eg:"sluice"`
	Password     node[string]        `yaml:"password" eg:"secret"`
	DB           node[int64]         `yaml:"db" bound:"db" eg:"0"`
	MasterName   node[string]        `yaml:"master_name" eg:"mymaster"`
	WaitReplicas node[bool]          `yaml:"wait_for_replicas" eg:"true"`          // redisstore.Config.WaitForReplicas
	ReplicaGrace node[time.Duration] `yaml:"replica_grace" bound:"grace" eg:"30s"` // redisstore.Config.ReplicaGrace
	TLS          node[*tlsYAML]      `yaml:"tls" what:"store.redis.tls"`
}

// tlsYAML is store.redis.tls: a TLS.
type tlsYAML struct {
	CA                 node[string] `yaml:"ca" eg:"ca.pem"`
	Cert               node[string] `yaml:"cert" eg:"client.pem"`
	Key                node[string] `yaml:"key" eg:"client-key.pem"`
	ServerName         node[string] `yaml:"server_name" eg:"redis.internal"`
	InsecureSkipVerify node[bool]   `yaml:"insecure_skip_verify" eg:"true"`
}

// envoyYAML is the envoy section: an Envoy.
type envoyYAML struct {
	XDS node[*xdsYAML] `yaml:"xds" what:"envoy.xds"`
}

// xdsYAML is envoy.xds: an XDS.
type xdsYAML struct {
	Server          node[string]            `yaml:"server" form:"address" eg:"envoy-gateway:18001" need:"server: the control plane's host:port, such as envoy-gateway:18001"`
	NodeID          node[string]            `yaml:"node_id" eg:"envoy-ratelimit"`
	NodeMetadata    node[map[string]string] `yaml:"node_metadata" item:"metadata value" eg:"{zone: a}"`
	Headers         node[map[string]string] `yaml:"headers" item:"header value" keys:"header" eg:"{X-Tenant: a}"`
	ForceStart      node[bool]              `yaml:"force_start" eg:"true"`
	TLS             node[*tlsYAML]          `yaml:"tls" what:"envoy.xds.tls"`
	ConnectRetry    node[time.Duration]     `yaml:"connect_retry" bound:"window" eg:"3s"`
	BackoffInitial  node[time.Duration]     `yaml:"backoff_initial" bound:"window" eg:"10s"`
	BackoffMax      node[time.Duration]     `yaml:"backoff_max" bound:"window" eg:"60s"`
	MaxMessageBytes node[int64]             `yaml:"max_message_bytes" bound:"message" eg:"4194304"`
}

// listenersYAML is the tls section: a Listeners.
type listenersYAML struct {
	HTTP  node[*listenerTLSYAML] `yaml:"http" what:"tls.http"`
	GRPC  node[*listenerTLSYAML] `yaml:"grpc" what:"tls.grpc"`
	Admin node[*listenerTLSYAML] `yaml:"admin" what:"tls.admin"`
}

// listenerTLSYAML is one listener's TLS: a ListenerTLS.
type listenerTLSYAML struct {
	Cert      node[string] `yaml:"cert" eg:"tls.crt" need:"cert: the PEM file of the listener's certificate chain"`
	Key       node[string] `yaml:"key" eg:"tls.key" need:"key: the PEM file of the certificate's key"`
	ClientCA  node[string] `yaml:"client_ca" eg:"ca.crt"`
	ClientSAN node[string] `yaml:"client_san" eg:"envoy.internal"`
}

// forwardAuthYAML is the forward_auth section: a ForwardAuth.
type forwardAuthYAML struct {
	TrustedProxies node[[]netip.Prefix]    `yaml:"trusted_proxies" item:"trusted proxy" eg:"[\"10.0.0.0/8\", \"127.0.0.1\"]"`
	Headers        node[map[string]string] `yaml:"headers" item:"header name" form:"header" keys:"name,not built-in" eg:"{user: X-User-Id}"` // attribute name: header name
}

// What a file may hold at most.
const (
	maxRules = 32 // rules in a policy: every decision checks them all
	maxAttrs = 32 // attributes in a by or attributes list
)

// nameRE is what policy, rule, schedule and attribute names may look like:
// they appear in store keys, metric labels and URLs.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// forms are the forms a string may have to take (its field's form tag): a
// test, and the message, given what the string is and the string, of one
// that fails it.
var forms = map[string]struct {
	ok  func(string) bool
	msg string
}{
	"name":      {nameRE.MatchString, "%s %q is not a valid name; names are 1 to 64 letters, digits, '-', '_' or '.', starting with a letter or digit"},
	"address":   {isAddress, "%s %q is not host:port; write it as 10.0.0.1:6379 or redis.internal:6379"},
	"header":    {regexp.MustCompile(`^[-_0-9A-Za-z]{1,128}$`).MatchString, "%s %q is not valid; use letters, digits and '-', such as X-User-Id"},
	"prefix":    {regexp.MustCompile(`^[^{} \t\r\n]{1,64}$`).MatchString, "%s %q is not valid; use 1 to 64 characters without braces or spaces, such as sluice or myapp:sluice"},
	"algorithm": {oneOf("log", "gcra", "sliding-counter"), "%s is %q; use log (the default), gcra or sliding-counter"},
	"period":    {oneOf("day", "week", "month", "year"), "%s is %q; use day, week, month or year"},
	"weekday":   {oneOf(weekdays[:]...), "%s is %q; use monday, tuesday, wednesday, thursday, friday, saturday or sunday"},
	"mode":      {oneOf("standalone", "cluster", "sentinel"), "%s is %q; use standalone, cluster or sentinel"},
	"on_error":  {oneOf("deny", "allow", "fallback"), "%s is %q; use deny (fail closed, the default), allow (fail open) or fallback (decide in this process's memory)"},
	"not built-in": {func(s string) bool { return !slices.Contains(builtinAttrs, s) },
		"attribute %[2]q is built into forward-auth; pick another name for the header"},
}

// weekdays are the days of the week by time.Weekday.
var weekdays = [...]string{"sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"}

// oneOf returns a test of whether a string is one of valid.
func oneOf(valid ...string) func(string) bool {
	return func(s string) bool { return slices.Contains(valid, s) }
}

// isAddress reports whether s is host:port, the port from 1 to 65535.
func isAddress(s string) bool {
	host, port, err := net.SplitHostPort(s)
	p, perr := strconv.ParseUint(port, 10, 16)
	return err == nil && perr == nil && host != "" && p > 0
}

// bounds are the ranges a number or duration may have to fall in (its
// field's bound tag): a value out of [lo, hi] is reported with the fix. A limit
// stays below 2^53 so that counts stay exact in a Redis double; a store call
// takes milliseconds.
var bounds = map[string]struct {
	lo, hi int64
	fix    string
}{
	"limit":          {0, sluice.MaxCost, "a limit must be at least 0 and at most 2^53 (0 blocks every request the rule applies to; to watch a limit without enforcing it, set shadow: true)"},
	"override limit": {0, sluice.MaxCost, "a limit must be at least 0 and at most 2^53 (0 blocks the requests the override matches; unlimited: true lifts the limit)"},
	"window":         {1, math.MaxInt64, "it must be longer than zero, such as 1s or 30m"},
	"concurrency":    {1, sluice.MaxCost, "give the most leases alive at once, at least 1, such as 4"},
	"history":        {0, sluice.MaxHistory, "keep 0 to 1000 periods, such as 12 for a year of months"},
	"credits":        {0, sluice.MaxCost, "give the balance a key starts with, 0 to 2^53"},
	"refill":         {1, sluice.MaxCost, "give 1 to 2^53, or leave it out"},
	"lease":          {int64(time.Millisecond), math.MaxInt64, "a lease lives at least 1ms; give how long a holder may keep it unless it releases it, such as 30s"},
	"max_queue":      {0, math.MaxInt64, "use 0 for no bound or a positive number"},
	"db":             {0, 1 << 20, "use a database number such as 0"},
	"timeout":        {1, int64(time.Minute), "a store call takes milliseconds: use one longer than zero and not longer than a minute, such as 50ms"},
	"grace":          {1, math.MaxInt64, "use a duration longer than zero, such as 30s, or leave it out to wait for a missing replica however long"},
	"message":        {1 << 10, 1 << 30, "use a size in bytes from 1024 to 2^30, such as 4194304 (4 MiB, gRPC's default)"},
	"share":          {1, 1 << 16, "use the number of instances that share the store, such as 3: each decides on its share of every limit while the store is down"},
	"layout":         {1, 2, "use 2, the newest (the default), or 1, the key names of versions before it, while a rolling upgrade runs both (docs/design.md, Upgrades)"},
}
