package redisstore

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicerate/sluice/store"
)

// Config configures a Store. The zero value is the default: a standalone
// Redis on 127.0.0.1:6379, keys under "sluice", time from Redis.
type Config struct {
	// URL, when set, gives the connection fields in one string (see
	// ParseURL); fields set in the Config as well override the URL's.
	// Used by New only.
	URL string

	// Mode is the topology: Standalone (the default), Cluster or Sentinel.
	// Used by New only.
	Mode Mode

	// Addrs are the addresses (host:port) of the Redis server, of several
	// cluster nodes to discover the cluster from (Cluster), or of the
	// sentinels (Sentinel). Default ["127.0.0.1:6379"]. Used by New only.
	Addrs []string

	// MasterName is the name the sentinels monitor the master under.
	// Required in Sentinel mode. Used by New only.
	MasterName string

	// TLS, when set, is the TLS configuration of every connection (to the
	// sentinels too); default nil: plain TCP. Used by New only.
	TLS *tls.Config

	// Username and Password authenticate with AUTH; default none. A
	// Password without a Username authenticates as the default user. Used
	// by New only.
	Username string
	Password string

	// DB is the database number SELECTed on every connection. Default 0.
	// Used by New only.
	DB int

	// Prefix starts every key the store writes, before ':'. Default
	// "sluice". It must not contain '{' or '}', which would change the
	// keys' cluster slot.
	Prefix string

	// Clock, when set, gives the time of every decision instead of Redis's
	// TIME. Default nil: Redis's clock, so every process that shares the
	// server shares one clock and application clocks do not matter. Set it
	// only in tests (the conformance suite drives a manual clock); keys
	// still expire on Redis's clock.
	Clock func() time.Time

	// Slots says how a policy's keys are grouped into hash tags: SlotsAuto
	// (the default) is SlotsPerRule on a Redis Cluster and SlotsShared
	// otherwise. See the package documentation.
	Slots Slots

	// Layout is the version of the keys' names: LayoutCurrent (the
	// default) for the newest, Layout2; Layout1 for the names of earlier
	// versions of sluice, during a rolling upgrade from them. A store never
	// reads or writes a key of another layout. See docs/design.md, Upgrades.
	Layout Layout

	// WaitForReplicas makes every script call wait until its writes are on
	// every replica its master has had since it became master (WAIT), and
	// fail with ErrNotReplicated, decided by the Limiter's failure policy,
	// when they are not: a failover that promotes a replica without
	// waiting for the master (SENTINEL FAILOVER, a Cluster's CLUSTER
	// FAILOVER TAKEOVER or FORCE) then loses no reported admission. It
	// costs a round trip to the replicas per call, and a replica that
	// leaves for good stops admissions until it is back, or for
	// ReplicaGrace. Over a Cluster each master's replicas count for its own
	// slots, and a call goes to the master the store's slot map names. Over
	// rueidis (New, NewFromClient). See docs/failure-modes.md.
	WaitForReplicas bool

	// ReplicaGrace, with WaitForReplicas, is how long a replica may be
	// missing from the master before calls stop waiting for it: a replica
	// taken away for good then stops admissions for this long instead of
	// until the process makes a new store. A failover after the grace can
	// lose the admissions made without the missing replica, as without
	// WaitForReplicas. 0, the default: calls wait for every replica the
	// master has had, however long one is missing.
	ReplicaGrace time.Duration
}

// defaultPrefix is Config.Prefix's default.
const defaultPrefix = "sluice"

// Store is a sluice.Store kept in Redis: each rule's window is a sorted set,
// and one Lua script decides every rule of a request atomically on the
// server, so any number of processes can share the windows.
//
// A Store is safe for concurrent use. Create one with New, NewFromClient or
// NewFromEvaler; the zero value is not usable.
type Store struct {
	ev      Evaler         // every script call
	decider decider        // decide.lua's calls: batched over rueidis, else ev
	client  rueidis.Client // nil for a store made by NewFromEvaler
	acks    *replicaAcks   // with Config.WaitForReplicas, else nil
	slots   *slotReader    // over a Cluster: the master of each slot, for Shard; else nil
	names   namer          // the keys' names: prefix, hash tags, layout
	clock   func() time.Time
	close   func() // closes the client if the store created it
	closed  atomic.Bool
}

var _ store.Store = (*Store)(nil)

// New connects to Redis as cfg says and returns a Store over the
// connection. It returns an error when no address answers. Close closes the
// connection.
func New(cfg Config) (*Store, error) {
	cfg, err := withURL(cfg)
	if err != nil {
		return nil, err
	}
	opt, err := ClientOption(cfg)
	if err != nil {
		return nil, err
	}
	client, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, fmt.Errorf("redisstore: connecting to %s: %w", strings.Join(opt.InitAddress, ","), err)
	}
	if cfg.Slots == SlotsAuto && cfg.Mode == Cluster {
		cfg.Slots = SlotsPerRule
	}
	s, err := NewFromClient(client, cfg)
	if err != nil {
		client.Close()
		return nil, err
	}
	s.close = client.Close
	return s, nil
}

// NewFromClient returns a Store over a rueidis client the caller holds.
// cfg's connection fields (Addrs, Username, Password, DB) are ignored. Close
// leaves the client open.
func NewFromClient(client rueidis.Client, cfg Config) (*Store, error) {
	if client == nil {
		return nil, errors.New("redisstore: nil client")
	}
	if cfg.Slots == SlotsAuto && client.Mode() == rueidis.ClientModeCluster {
		cfg.Slots = SlotsPerRule
	}
	ev := rueidisEvaler{client: client, fns: &functions{}}
	s, err := newStore(ev, cfg)
	if err != nil {
		return nil, err
	}
	s.client = client
	if client.Mode() == rueidis.ClientModeCluster {
		s.slots = newSlotReader(client)
		ev.slots = s.slots // every call to the master the store's slot map names
	}
	if cfg.WaitForReplicas {
		if ev.acks, err = newReplicaAcks(client, s.slots, cfg.ReplicaGrace); err != nil {
			s.slots.close()
			return nil, err
		}
		s.acks = ev.acks
	}
	s.ev = ev
	if s.slots != nil {
		s.decider = &masterBatchers{ev: ev, slots: s.slots}
	} else {
		s.decider = newBatcher(ev)
	}
	return s, nil
}

// NewFromEvaler returns a Store that runs its scripts through ev: the way to
// use a Redis client other than rueidis (package redisstore/goredis does it
// for go-redis). cfg's connection fields are ignored.
func NewFromEvaler(ev Evaler, cfg Config) (*Store, error) {
	if ev == nil {
		return nil, errors.New("redisstore: nil Evaler")
	}
	if cfg.WaitForReplicas {
		return nil, errors.New("redisstore: WaitForReplicas needs a rueidis client (New or NewFromClient)")
	}
	return newStore(ev, cfg)
}

// newStore checks cfg's store fields and returns a Store over ev.
func newStore(ev Evaler, cfg Config) (*Store, error) {
	prefix := cfg.Prefix
	if prefix == "" {
		prefix = defaultPrefix
	}
	if strings.ContainsAny(prefix, "{}") {
		return nil, fmt.Errorf("redisstore: prefix %q contains '{' or '}'; keys' hash tags are derived by the store", prefix)
	}
	if cfg.Slots > SlotsPerRule {
		return nil, fmt.Errorf("redisstore: unknown Slots %d", cfg.Slots)
	}
	if cfg.ReplicaGrace < 0 || cfg.ReplicaGrace > 0 && !cfg.WaitForReplicas {
		return nil, fmt.Errorf("redisstore: ReplicaGrace %v; it is a duration above 0 for WaitForReplicas, or 0", cfg.ReplicaGrace)
	}
	if cfg.Layout > Layout2 {
		return nil, fmt.Errorf("redisstore: unknown key layout %d; this version writes layout 1 or 2 (0 for the newest, 2)", cfg.Layout)
	}
	names := namer{prefix: prefix, perRule: cfg.Slots == SlotsPerRule, layout: cfg.Layout}
	if names.layout == LayoutCurrent {
		names.layout = Layout2
	}
	return &Store{ev: ev, decider: evalerDecider{ev}, names: names, clock: cfg.Clock}, nil
}

// Close stops the store: later calls return store.ErrClosed. It closes
// the connection if New opened it.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.acks != nil {
		s.acks.close()
	}
	s.slots.close()
	if s.close != nil {
		s.close()
	}
	return nil
}

// Keys returns the Redis key of each window of req, in order: the keys
// Decide reads and writes. sluice.Limiter.Resolve gives the request of a policy
// and attributes.
func (s *Store) Keys(req *store.Request) []string {
	return s.names.plan(req).keys
}
