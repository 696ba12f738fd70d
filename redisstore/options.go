package redisstore

import (
	"cmp"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// Mode is the Redis topology a Store connects to.
type Mode uint8

const (
	// Standalone is one Redis server (with replicas or not, the store only
	// talks to the one in Config.Addrs). The default.
	Standalone Mode = iota

	// Cluster is a Redis Cluster discovered from any of Config.Addrs; each
	// call goes to the master of its slot, and MOVED and ASK redirections
	// and slot changes are followed.
	Cluster

	// Sentinel is a master found through the sentinels at Config.Addrs
	// under Config.MasterName; the client follows failovers.
	Sentinel
)

// String returns the mode's name as ParseMode reads it.
func (m Mode) String() string {
	switch m {
	case Standalone:
		return "standalone"
	case Cluster:
		return "cluster"
	case Sentinel:
		return "sentinel"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// ParseMode returns the Mode named s: "standalone" (or ""), "cluster" or
// "sentinel".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "", "standalone":
		return Standalone, nil
	case "cluster":
		return Cluster, nil
	case "sentinel":
		return Sentinel, nil
	}
	return 0, fmt.Errorf("redisstore: unknown mode %q; use standalone, cluster or sentinel", s)
}

// Slots says how a Store groups a policy's keys into Redis Cluster hash
// tags, and so how many script calls a decision takes.
type Slots uint8

const (
	// SlotsAuto is SlotsPerRule on a Redis Cluster (Config.Mode Cluster, or
	// a rueidis cluster client given to NewFromClient) and SlotsShared
	// otherwise. The default.
	SlotsAuto Slots = iota

	// SlotsShared gives every key of a decision one hash tag: the policy
	// name and the values of the attributes that all its rules share. A
	// decision is one atomic script call, but a policy with a rule without
	// By (a global cap) keeps all its keys in one slot.
	SlotsShared

	// SlotsPerRule gives each rule's keys their own hash tag: the policy
	// name and the values of the rule's own By attributes. Per-user keys
	// spread over the cluster while a global cap has its own slot; a
	// decision over several tags is a reserve / commit / rollback sequence
	// of script calls (see the package documentation).
	SlotsPerRule
)

// ParseURL reads a Redis URL into the connection fields of a Config:
//
//	redis://[[user]:password@]host:port[/db][?addr=host:port...][&mode=cluster|sentinel][&master=name][&wait_for_replicas=true[&replica_grace=30s]]
//
// "rediss://" connects with TLS (server name from the host). Further
// addresses are given with addr= (cluster seeds, or sentinels); mode=
// selects the topology (default standalone) and master= (or master_set=)
// names a Sentinel master; wait_for_replicas= sets Config.WaitForReplicas
// and replica_grace= Config.ReplicaGrace.
func ParseURL(s string) (Config, error) {
	u, err := url.Parse(s)
	if err != nil {
		return Config{}, fmt.Errorf("redisstore: URL: %w", err)
	}
	var cfg Config
	switch u.Scheme {
	case "redis":
	case "rediss":
		cfg.TLS = &tls.Config{ServerName: u.Hostname(), MinVersion: tls.VersionTLS12}
	default:
		return Config{}, fmt.Errorf("redisstore: URL %q: scheme %q, want redis or rediss", redact(u), u.Scheme)
	}
	if u.Host != "" {
		host, port := u.Hostname(), u.Port()
		if port == "" {
			port = "6379"
		}
		if host == "" {
			host = "127.0.0.1"
		}
		cfg.Addrs = []string{net.JoinHostPort(host, port)}
	}
	if u.User != nil {
		cfg.Username = u.User.Username()
		cfg.Password, _ = u.User.Password()
	}
	if db := strings.Trim(u.Path, "/"); db != "" {
		if cfg.DB, err = strconv.Atoi(db); err != nil || cfg.DB < 0 {
			return Config{}, fmt.Errorf("redisstore: URL %q: database %q is not a number", redact(u), db)
		}
	}
	q := u.Query()
	cfg.Addrs = append(cfg.Addrs, q["addr"]...)
	if cfg.Mode, err = ParseMode(q.Get("mode")); err != nil {
		return Config{}, err
	}
	cfg.MasterName = q.Get("master")
	if cfg.MasterName == "" {
		cfg.MasterName = q.Get("master_set")
	}
	if cfg.MasterName != "" && q.Get("mode") == "" {
		cfg.Mode = Sentinel
	}
	if w := q.Get("wait_for_replicas"); w != "" {
		if cfg.WaitForReplicas, err = strconv.ParseBool(w); err != nil {
			return Config{}, fmt.Errorf("redisstore: URL %q: wait_for_replicas=%q; use true or false", redact(u), w)
		}
	}
	if g := q.Get("replica_grace"); g != "" {
		if cfg.ReplicaGrace, err = time.ParseDuration(g); err != nil || cfg.ReplicaGrace <= 0 {
			return Config{}, fmt.Errorf("redisstore: URL %q: replica_grace=%q; use a duration such as 30s", redact(u), g)
		}
	}
	return cfg, nil
}

// redact returns u without its password, for messages.
func redact(u *url.URL) string { return u.Redacted() }

// ClientOption returns the rueidis options New connects with for cfg's
// connection fields (URL, Mode, Addrs, MasterName, TLS, Username, Password,
// DB): for a caller that builds its own client for NewFromClient. Fields
// set in cfg override those of cfg.URL.
func ClientOption(cfg Config) (rueidis.ClientOption, error) {
	c, err := withURL(cfg)
	if err != nil {
		return rueidis.ClientOption{}, err
	}
	addrs := c.Addrs
	if len(addrs) == 0 {
		addrs = []string{"127.0.0.1:6379"}
	}
	opt := rueidis.ClientOption{
		InitAddress:  addrs,
		Username:     c.Username,
		Password:     c.Password,
		SelectDB:     c.DB,
		TLSConfig:    c.TLS,
		DisableCache: true, // every command is a script; nothing to cache
		// Every command goes through the pipeline queue, where a call
		// returns when its context ends and the connection stays open; a
		// call made alone would otherwise set its deadline on the
		// connection, which closes on timeout, and every call waits for
		// the new connection's handshake regardless of its context.
		AlwaysPipelining: true,
	}
	switch c.Mode {
	case Standalone:
	case Cluster:
		if c.DB != 0 {
			return opt, errors.New("redisstore: a Redis Cluster has only database 0")
		}
	case Sentinel:
		if c.MasterName == "" {
			return opt, errors.New("redisstore: Sentinel mode needs MasterName, the name the sentinels monitor the master under")
		}
		opt.Sentinel = rueidis.SentinelOption{
			MasterSet: c.MasterName,
			Username:  c.Username,
			Password:  c.Password,
			TLSConfig: c.TLS,
			// Besides following +switch-master, ask the sentinels for the
			// master now and then: a missed event would otherwise bind the
			// client to the old master, a replica once demoted, for good.
			TopologyRefreshInterval: sentinelRefresh,
		}
	default:
		return opt, fmt.Errorf("redisstore: unknown mode %v", c.Mode)
	}
	return opt, nil
}

// sentinelRefresh is how often a Sentinel client asks the sentinels for
// the master, besides following their +switch-master events.
const sentinelRefresh = time.Second

// withURL returns cfg with cfg.URL's fields (ParseURL) where cfg leaves
// them unset, and no URL: fields set in cfg override the URL's.
func withURL(cfg Config) (Config, error) {
	if cfg.URL == "" {
		return cfg, nil
	}
	u, err := ParseURL(cfg.URL)
	if err != nil {
		return cfg, err
	}
	c := cfg
	c.URL = ""
	if c.Mode == Standalone {
		c.Mode = u.Mode
	}
	if len(c.Addrs) == 0 {
		c.Addrs = u.Addrs
	}
	if c.TLS == nil {
		c.TLS = u.TLS
	}
	if c.DB == 0 {
		c.DB = u.DB
	}
	c.MasterName = cmp.Or(c.MasterName, u.MasterName)
	c.Username = cmp.Or(c.Username, u.Username)
	c.Password = cmp.Or(c.Password, u.Password)
	c.WaitForReplicas = c.WaitForReplicas || u.WaitForReplicas
	c.ReplicaGrace = cmp.Or(c.ReplicaGrace, u.ReplicaGrace)
	return c, nil
}
