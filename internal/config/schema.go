package config

import (
	"net/netip"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/sluicerate/sluice"
)

// The schema of a configuration file, as written (docs/config.md). Each
// struct is a YAML mapping: a field's yaml tag is its key, in the order
// messages list them, and a need tag makes it required, saying how to add
// it. Every field is a node[T], the value as written, so that validation
// (validate.go) reports each problem where it is and says how to fix it.
//
// A new field is one line here and one in validate.go.

// node is a value of type T as written in the file: its YAML node, nil when
// the field is absent. The decoder's methods that read one take it by type,
// so a duration is never read as a number.
type node[T any] struct{ *yaml.Node }

// fileYAML is the whole file.
type fileYAML struct {
	Store       node[storeYAML]       `yaml:"store"`
	Policies    node[[]policyYAML]    `yaml:"policies"`
	Schedules   node[[]scheduleYAML]  `yaml:"schedules"`
	ForwardAuth node[forwardAuthYAML] `yaml:"forward_auth"`
}

// policyYAML is one entry of policies: a sluice.Policy.
type policyYAML struct {
	Name       node[string]     `yaml:"name" need:"name: followed by a name such as notify"`
	Limits     node[[]ruleYAML] `yaml:"limits" need:"limits: a list of rules such as [{name: global, limit: 100, window: 30m}]"`
	Penalize   node[bool]       `yaml:"penalize"`
	Shadow     node[bool]       `yaml:"shadow"`
	Attributes node[[]string]   `yaml:"attributes"` // when set, every rule's by must be among them
}

// ruleYAML is one entry of a policy's limits: a sluice.Rule.
type ruleYAML struct {
	Name      node[string]            `yaml:"name" need:"name: followed by a name such as global or per-user"`
	By        node[[]string]          `yaml:"by"`
	Limit     node[int64]             `yaml:"limit" need:"limit: followed by the most cost per window, such as 100"`
	Window    node[time.Duration]     `yaml:"window" need:"window: followed by a duration such as 30m"`
	MinGap    node[time.Duration]     `yaml:"min_gap"`
	Optional  node[bool]              `yaml:"optional"` // applies only when every by attribute is present
	Unless    node[[]string]          `yaml:"unless"`   // applies only when none of these is present
	Match     node[map[string]string] `yaml:"match"`    // applies only when the values match
	Overrides node[[]overrideYAML]    `yaml:"overrides"`
	Shadow    node[bool]              `yaml:"shadow"`
	Algorithm node[string]            `yaml:"algorithm"` // log, gcra or sliding-counter
	Burst     node[int64]             `yaml:"burst"`     // gcra's
	Spread    node[int64]             `yaml:"spread"`    // sub-windows of a hot key
	SpreadBy  node[string]            `yaml:"spread_by"` // the attribute that picks one
}

// overrideYAML is one entry of a rule's overrides: a sluice.Override.
type overrideYAML struct {
	Match     node[map[string]string] `yaml:"match" need:"match: the attribute values it is for, such as {plan: paid}"`
	Limit     node[int64]             `yaml:"limit"`
	Unlimited node[bool]              `yaml:"unlimited"`
}

// scheduleYAML is one entry of schedules: a sluice.Schedule.
type scheduleYAML struct {
	Name     node[string]        `yaml:"name" need:"name: followed by a name such as carrier"`
	By       node[[]string]      `yaml:"by"`
	Rate     node[sluice.Rate]   `yaml:"rate" need:"rate: followed by events per period, such as 4/s or 100/30m"`
	MaxDelay node[time.Duration] `yaml:"max_delay"`
	MaxQueue node[int64]         `yaml:"max_queue"`
}

// storeYAML is the store section: a Store.
type storeYAML struct {
	Redis   node[redisYAML]     `yaml:"redis"`
	Prefix  node[string]        `yaml:"prefix"`
	Timeout node[time.Duration] `yaml:"timeout"`
	OnError node[string]        `yaml:"on_error"` // deny or allow
}

// redisYAML is store.redis: a Redis.
type redisYAML struct {
	Addrs      node[[]string] `yaml:"addrs" need:"addrs: a list of host:port, such as [\"127.0.0.1:6379\"]"`
	Mode       node[string]   `yaml:"mode"` // standalone, cluster or sentinel
	Username   node[string]   `yaml:"username"`
	Password   node[string]   `yaml:"password"`
	DB         node[int64]    `yaml:"db"`
	MasterName node[string]   `yaml:"master_name"`
	TLS        node[tlsYAML]  `yaml:"tls"`
}

// tlsYAML is store.redis.tls: a TLS.
type tlsYAML struct {
	CA                 node[string] `yaml:"ca"`
	Cert               node[string] `yaml:"cert"`
	Key                node[string] `yaml:"key"`
	ServerName         node[string] `yaml:"server_name"`
	InsecureSkipVerify node[bool]   `yaml:"insecure_skip_verify"`
}

// forwardAuthYAML is the forward_auth section: a ForwardAuth.
type forwardAuthYAML struct {
	TrustedProxies node[[]netip.Prefix]    `yaml:"trusted_proxies"`
	Headers        node[map[string]string] `yaml:"headers"` // attribute name: header name
}
