// Package config loads sluice's YAML configuration file: the store to use,
// the policies and schedules to serve, and how forward-auth derives a
// request's attributes. Everything is validated at load: unknown fields, bad
// durations or rates, zero limits, duplicate names and attributes that no
// request supplies are reported with the file, line and a way to fix them.
//
// The file's format is documented in docs/config.md.
package config

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/internal/edge"
	"github.com/sluicerate/sluice/internal/yamlfile"
)

// Config is a loaded, validated configuration file. It is a plain value,
// safe for concurrent reads; a reload builds a new Config rather than
// changing one in use.
type Config struct {
	// File is the file's name as given to Load or Parse.
	File string

	// Store is the store section; nil when the file has none, which means
	// the in-memory store.
	Store *Store

	// Policies are the file's policies, in file order. Each one passes
	// sluice.Policy.Validate.
	Policies []sluice.Policy

	// Schedules are the file's schedules, in file order. Each one passes
	// sluice.Schedule.Validate.
	Schedules []sluice.Schedule

	// ForwardAuth configures GET /v1/forward-auth.
	ForwardAuth ForwardAuth

	// Envoy, when set, says where sluice serve's envoyproxy/ratelimit
	// configuration comes from (serve.go); nil: files, if any.
	Envoy *Envoy

	// TLS is the TLS of sluice serve's listeners.
	TLS Listeners
}

// Store is the store section of a file.
type Store struct {
	// Redis configures the Redis store; nil means the in-memory store.
	Redis *Redis

	// Prefix starts every Redis key. Default "sluice".
	Prefix string

	// Layout is the version of the Redis keys' names: 0 for the newest
	// (2), 1 for the names of versions before it (redisstore.Layout).
	Layout int

	// Timeout bounds one store call; 0 means the store's default.
	Timeout time.Duration

	// OnError is the decision made when the store fails. Default
	// sluice.Deny.
	OnError sluice.OnError

	// Fallback (on_error: fallback) decides in this process's memory
	// while the store fails, every limit divided by FallbackShare (the
	// instances sharing the store; at least 1), runtime overrides
	// included (sluice.Config.Fallback).
	Fallback      bool
	FallbackShare int
}

// Redis is where the Redis store connects.
type Redis struct {
	// Addrs are host:port addresses: one server (standalone), cluster seeds
	// (cluster) or sentinels (sentinel). At least one.
	Addrs []string

	// Mode is "standalone" (default), "cluster" or "sentinel".
	Mode string

	// Username and Password authenticate (Redis ACL); empty for none.
	Username, Password string

	// DB selects a database on a standalone server. Default 0.
	DB int

	// MasterName names the master the sentinels watch; required in
	// sentinel mode.
	MasterName string

	// WaitForReplicas reports an admission only once every replica of the
	// master has it (redisstore.Config.WaitForReplicas): a Sentinel
	// failover then loses none. Standalone and sentinel modes.
	WaitForReplicas bool

	// ReplicaGrace, with WaitForReplicas, is how long a replica may be
	// missing before admissions stop waiting for it
	// (redisstore.Config.ReplicaGrace); 0: however long.
	ReplicaGrace time.Duration

	// TLS, when set, connects with TLS.
	TLS *TLS
}

// TLS configures a TLS connection to Redis. Relative paths are resolved
// against the configuration file's directory.
type TLS struct {
	// CA is a PEM file of the certificate authorities to trust; empty means
	// the system's.
	CA string

	// Cert and Key are a PEM client certificate and its key, for mutual
	// TLS; both or neither.
	Cert, Key string

	// ServerName overrides the name checked in the server's certificate.
	ServerName string

	// InsecureSkipVerify turns off certificate verification. Tests only.
	InsecureSkipVerify bool
}

// ForwardAuth configures how GET /v1/forward-auth derives a request's
// attributes from the request a proxy forwards.
type ForwardAuth struct {
	// TrustedProxies are the addresses whose X-Forwarded-For is believed
	// when resolving the client's IP. Empty: the connection's peer is the
	// client.
	TrustedProxies []netip.Prefix

	// Headers maps attribute names to the request header that supplies
	// them, e.g. "user" -> "X-User-Id".
	Headers map[string]string
}

// Forward-auth's built-in attributes.
const (
	AttrIP     = "ip"     // the client's IP, resolved through trusted proxies
	AttrMethod = "method" // X-Forwarded-Method, or the request's method
	AttrHost   = "host"   // X-Forwarded-Host, or the request's host
	AttrPath   = "path"   // the path of X-Forwarded-Uri, or of the request
)

// builtinAttrs are forward-auth's built-in attributes, which no header may
// supply.
var builtinAttrs = []string{AttrIP, AttrMethod, AttrHost, AttrPath}

// ForwardAuthAttributes returns the attributes forward-auth supplies: the
// built-in ones and the configured headers'.
func (f *ForwardAuth) ForwardAuthAttributes() []string {
	attrs := slices.Clone(builtinAttrs)
	for a := range f.Headers {
		attrs = append(attrs, a)
	}
	slices.Sort(attrs[len(builtinAttrs):])
	return attrs
}

// Policy returns the policy named name, or nil when there is none.
func (c *Config) Policy(name string) *sluice.Policy {
	for i := range c.Policies {
		if c.Policies[i].Name == name {
			return &c.Policies[i]
		}
	}
	return nil
}

// Schedule returns the schedule named name, or nil when there is none.
func (c *Config) Schedule(name string) *sluice.Schedule {
	for i := range c.Schedules {
		if c.Schedules[i].Name == name {
			return &c.Schedules[i]
		}
	}
	return nil
}

// FindPolicy returns the policy named name, or an error that wraps
// edge.ErrUnknownPolicy and lists the file's policies.
func (c *Config) FindPolicy(name string) (*sluice.Policy, error) {
	return find(c, c.Policies, func(p *sluice.Policy) string { return p.Name }, name, "policies", edge.ErrUnknownPolicy)
}

// FindSchedule returns the schedule named name, or an error that wraps
// edge.ErrUnknownSchedule and lists the file's schedules.
func (c *Config) FindSchedule(name string) (*sluice.Schedule, error) {
	return find(c, c.Schedules, func(s *sluice.Schedule) string { return s.Name }, name, "schedules", edge.ErrUnknownSchedule)
}

// find returns the item of c's list named name, or unknown with the names
// of the list (what).
func find[T any](c *Config, list []T, nameOf func(*T) string, name, what string, unknown error) (*T, error) {
	var names []string
	for i := range list {
		if nameOf(&list[i]) == name {
			return &list[i], nil
		}
		names = append(names, nameOf(&list[i]))
	}
	return nil, fmt.Errorf("%w: %q is not in %s (%s: %s)", unknown, name, c.File, what, strings.Join(names, ", "))
}

// Load reads and parses the file at path.
func Load(path string) (*Config, error) {
	data, err := yamlfile.ReadFile(path)
	if _, bad := err.(ErrorList); err != nil && !bad {
		return nil, fmt.Errorf("config: %w", err)
	}
	if err != nil {
		return nil, err
	}
	return parse(path, data, true)
}

// Parse parses data, the contents of the file name. An invalid file returns
// an ErrorList holding every problem found.
func Parse(name string, data []byte) (*Config, error) {
	return parse(name, data, false)
}

// parse parses data, the contents of the file name; with disk, name is a
// file on disk, and the files it names (store.redis.tls) must be readable.
func parse(name string, data []byte, disk bool) (*Config, error) {
	if err := yamlfile.CheckSize(name, int64(len(data))); err != nil {
		return nil, err
	}
	d := &decoder{File: yamlfile.File{Name: name}, disk: disk}
	c := d.decode(data)
	if len(d.Errs) > 0 {
		return nil, d.Errs
	}
	return c, nil
}
