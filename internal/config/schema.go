package config

import (
	"net/netip"
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
//   - form: the form its strings take, one of validate.go's forms (name,
//     address, algorithm...); of a map, its values'. Map keys are attribute
//     names;
//   - nonempty: a map that must have at least one entry.
//
// Numbers and durations with bounds are in validate.go's bounds, by key. A
// new field is one line here and, where the Config takes it, one in
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

// fileYAML is the whole file.
type fileYAML struct {
	Store       node[*storeYAML]           `yaml:"store"`
	Policies    node[[]node[policyYAML]]   `yaml:"policies" item:"policy" eg:"- {name: api, limits: [{name: per-user, by: [user], limit: 100, window: 1m}]}"`
	Schedules   node[[]node[scheduleYAML]] `yaml:"schedules" item:"schedule" eg:"- {name: carrier, by: [carrier], rate: 4/s, max_delay: 2s}"`
	ForwardAuth node[*forwardAuthYAML]     `yaml:"forward_auth"`
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
	Limit     node[int64]                `yaml:"limit" eg:"100" need:"limit: followed by the most cost per window, such as 100"`
	Window    node[time.Duration]        `yaml:"window" eg:"30m" need:"window: followed by a duration such as 30m"`
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
}

// overrideYAML is one entry of a rule's overrides: a sluice.Override.
type overrideYAML struct {
	Match     node[map[string]string] `yaml:"match" item:"match value" nonempty:"" eg:"{plan: paid} or {path: /api/*}" need:"match: the attribute values it is for, such as {plan: paid}"`
	Limit     node[int64]             `yaml:"limit" eg:"1000"`
	Unlimited node[bool]              `yaml:"unlimited" eg:"true"`
}

// scheduleYAML is one entry of schedules: a sluice.Schedule.
type scheduleYAML struct {
	Name     node[string]        `yaml:"name" what:"schedule name" form:"name" eg:"carrier" need:"name: followed by a name such as carrier"`
	By       node[[]string]      `yaml:"by" item:"attribute name" form:"name" eg:"[carrier]"`
	Rate     node[sluice.Rate]   `yaml:"rate" eg:"4/s" need:"rate: followed by events per period, such as 4/s or 100/30m"`
	MaxDelay node[time.Duration] `yaml:"max_delay" eg:"2s"`
	MaxQueue node[int64]         `yaml:"max_queue" eg:"100"`
}

// storeYAML is the store section: a Store.
type storeYAML struct {
	Redis   node[*redisYAML]    `yaml:"redis" what:"store.redis"`
	Prefix  node[string]        `yaml:"prefix" form:"prefix" eg:"sluice"`
	Timeout node[time.Duration] `yaml:"timeout" eg:"50ms"`
	OnError node[string]        `yaml:"on_error" form:"on_error" eg:"deny"` // deny or allow
	Layout  node[int64]         `yaml:"layout" eg:"2"`                      // the keys' layout: 1 or 2
}

// redisYAML is store.redis: a Redis.
type redisYAML struct {
	Addrs      node[[]string] `yaml:"addrs" item:"address" form:"address" eg:"[\"10.0.0.1:6379\"]" need:"addrs: a list of host:port, such as [\"127.0.0.1:6379\"]"`
	Mode       node[string]   `yaml:"mode" form:"mode" eg:"cluster"` // standalone, cluster or sentinel
	Username   node[string]   `yaml:"username" eg:"sluice"`
	Password   node[string]   `yaml:"password" eg:"secret"`
	DB         node[int64]    `yaml:"db" eg:"0"`
	MasterName node[string]   `yaml:"master_name" eg:"mymaster"`
	TLS        node[*tlsYAML] `yaml:"tls" what:"store.redis.tls"`
}

// tlsYAML is store.redis.tls: a TLS.
type tlsYAML struct {
	CA                 node[string] `yaml:"ca" eg:"ca.pem"`
	Cert               node[string] `yaml:"cert" eg:"client.pem"`
	Key                node[string] `yaml:"key" eg:"client-key.pem"`
	ServerName         node[string] `yaml:"server_name" eg:"redis.internal"`
	InsecureSkipVerify node[bool]   `yaml:"insecure_skip_verify" eg:"true"`
}

// forwardAuthYAML is the forward_auth section: a ForwardAuth.
type forwardAuthYAML struct {
	TrustedProxies node[[]netip.Prefix]    `yaml:"trusted_proxies" item:"trusted proxy" eg:"[\"10.0.0.0/8\", \"127.0.0.1\"]"`
	Headers        node[map[string]string] `yaml:"headers" item:"header name" form:"header" eg:"{user: X-User-Id}"` // attribute name: header name
}
