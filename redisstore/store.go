package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicerate/sluice"
)

// Config configures a Store. The zero value is the default: a standalone
// Redis on 127.0.0.1:6379, keys under "sluice", time from Redis.
type Config struct {
	// Addrs are the addresses (host:port) of the Redis server. Default
	// ["127.0.0.1:6379"]. Used by New only.
	Addrs []string

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
	ev     Evaler
	prefix string
	clock  func() time.Time
	close  func() // closes the client if the store created it
	closed atomic.Bool
}

var _ sluice.Store = (*Store)(nil)

// decideScript is the script that decides, peeks and records.
var decideScript = newScript("decide.lua", decideLua)

// New connects to Redis as cfg says and returns a Store over the
// connection. It returns an error when no address answers. Close closes the
// connection.
func New(cfg Config) (*Store, error) {
	addrs := cfg.Addrs
	if len(addrs) == 0 {
		addrs = []string{"127.0.0.1:6379"}
	}
	client, err := rueidis.NewClient(rueidis.ClientOption{
		InitAddress:  addrs,
		Username:     cfg.Username,
		Password:     cfg.Password,
		SelectDB:     cfg.DB,
		DisableCache: true, // every command is a script; nothing to cache
	})
	if err != nil {
		return nil, fmt.Errorf("redisstore: connecting to %s: %w", strings.Join(addrs, ","), err)
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
	return NewFromEvaler(rueidisEvaler{client: client}, cfg)
}

// NewFromEvaler returns a Store that runs its scripts through ev: the way to
// use a Redis client other than rueidis (package redisstore/goredis does it
// for go-redis). cfg's connection fields are ignored.
func NewFromEvaler(ev Evaler, cfg Config) (*Store, error) {
	if ev == nil {
		return nil, errors.New("redisstore: nil Evaler")
	}
	prefix := cfg.Prefix
	if prefix == "" {
		prefix = defaultPrefix
	}
	if strings.ContainsAny(prefix, "{}") {
		return nil, fmt.Errorf("redisstore: prefix %q contains '{' or '}'; keys' hash tags are derived by the store", prefix)
	}
	return &Store{ev: ev, prefix: prefix, clock: cfg.Clock}, nil
}

// Close stops the store: later calls return sluice.ErrStoreClosed. It closes
// the connection if New opened it.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	if s.close != nil {
		s.close()
	}
	return nil
}

// Keys returns the Redis key that holds each rule's window of p for attrs,
// in policy order: the keys Decide reads and writes. It returns an error for
// an invalid policy or a missing attribute.
func (s *Store) Keys(p *sluice.Policy, attrs map[string]string) ([]string, error) {
	req := sluice.Request{Policy: p, Attributes: attrs, Cost: 1}
	if err := req.Validate(); err != nil {
		return nil, err
	}
	return keys(s.prefix, p, attrs), nil
}

// Decide implements sluice.Store: one round trip runs decide.lua, which
// checks every rule and records the request in all of them or none, on the
// Redis server's clock (or Config.Clock).
//
// An error from Redis, a lost connection or a context that ends first is
// returned as an error; the request may or may not have been recorded, and
// it is never sent again.
func (s *Store) Decide(ctx context.Context, req *sluice.Request) (sluice.Decision, error) {
	if s.closed.Load() {
		return sluice.Decision{}, sluice.ErrStoreClosed
	}
	if err := req.Validate(); err != nil {
		return sluice.Decision{}, err
	}
	if err := ctx.Err(); err != nil {
		return sluice.Decision{}, err
	}
	return s.decide(ctx, req)
}
