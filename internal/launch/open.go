package launch

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/redis/rueidis"

	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/internal/tlsfiles"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/redisstore"
	"github.com/sluicerate/sluice/store"
)

// Dial is how OpenWith connects to Redis. Its zero value is Open's: the
// URL's own TLS, and a Redis that does not answer is an error.
type Dial struct {
	// TLS, for a rediss:// URL (--redis-tls), are the files of its TLS
	// configuration, read again when they change; nil: the URL's.
	TLS *tlsfiles.ClientFiles

	// Waitable opens a standalone Redis that does not answer all the
	// same, its error in Store.Unreachable: its calls fail until it
	// answers, and its client connects then (sluice serve starts unready).
	Waitable bool
}

// Open opens Redis at url when it is set, else the Redis of the file's
// store section, else the in-memory store. The file's prefix applies to
// both Redis cases. cfg may be nil.
func Open(cfg *config.Config, url string) (*Store, error) {
	return OpenWith(cfg, url, Dial{})
}

// OpenStore is Open as the store alone and the function that closes it
// (quota.Where.Open's).
func OpenStore(cfg *config.Config, url string) (store.Store, func(), error) {
	st, err := Open(cfg, url)
	if err != nil {
		return nil, nil, err
	}
	return st.Store, func() { st.Close() }, nil
}

// OpenWith is Open connecting to Redis as d says.
func OpenWith(cfg *config.Config, url string, d Dial) (*Store, error) {
	rcfg, where, files, err := redisConfig(cfg, url, d.TLS)
	if err != nil {
		return nil, err
	}
	if where == "" {
		return &Store{Store: memstore.New(memstore.Config{}), Where: "the in-memory store"}, nil
	}
	opt, err := redisstore.ClientOption(rcfg)
	if err != nil {
		return nil, err
	}
	if files != nil {
		useTLSFiles(&opt, files)
	}
	client, unreachable := dialRedis(opt, rcfg.Mode, d.Waitable)
	if client == nil {
		return nil, fmt.Errorf("connecting to %s: %w", where, unreachable)
	}
	rs, err := redisstore.NewFromClient(client, rcfg)
	if err != nil {
		client.Close()
		return nil, err
	}
	return &Store{Store: rs, Redis: rs, Client: client, Where: where,
		ping: rs.Warm, closeClient: client.Close, Unreachable: unreachable}, nil
}

// redisConfig returns the Redis store's configuration of url, else of the
// file's store section, its description and the TLS files to dial with;
// "" for the description when the store is in memory.
func redisConfig(cfg *config.Config, url string, urlTLS *tlsfiles.ClientFiles) (redisstore.Config, string, *tlsfiles.ClientFiles, error) {
	var (
		rcfg  redisstore.Config
		files *tlsfiles.ClientFiles
		err   error
	)
	switch {
	case url != "":
		if rcfg, err = redisstore.ParseURL(url); err != nil {
			return rcfg, "", nil, fmt.Errorf("--redis: %v; write it as redis://[user:password@]host:port[/db][?addr=host:port&mode=cluster|sentinel&master=name&wait_for_replicas=true&replica_grace=30s]", err)
		}
		if urlTLS != nil && rcfg.TLS == nil {
			return rcfg, "", nil, fmt.Errorf("--redis-tls: the Redis URL %s is not rediss://; connect with TLS by rediss:// (REDIS_TLS=true)", rcfg.Addrs[0])
		}
		files = urlTLS
	case cfg != nil && cfg.Store != nil && cfg.Store.Redis != nil:
		r := cfg.Store.Redis
		mode, err := redisstore.ParseMode(r.Mode)
		if err != nil {
			return rcfg, "", nil, fmt.Errorf("store.redis.mode: %w", err)
		}
		rcfg = redisstore.Config{Mode: mode, Addrs: r.Addrs, MasterName: r.MasterName,
			Username: r.Username, Password: r.Password, DB: r.DB, WaitForReplicas: r.WaitForReplicas, ReplicaGrace: r.ReplicaGrace}
		if r.TLS != nil {
			if rcfg.TLS, files, err = tlsConfig(r.TLS); err != nil {
				return rcfg, "", nil, err
			}
		}
	default:
		return rcfg, "", nil, nil
	}
	rcfg.Prefix = "sluice"
	if cfg != nil && cfg.Store != nil {
		rcfg.Prefix = cmp.Or(cfg.Store.Prefix, rcfg.Prefix)
		rcfg.Layout = redisstore.Layout(cfg.Store.Layout)
	}
	where := fmt.Sprintf("Redis (%s) at %s", rcfg.Mode, strings.Join(rcfg.Addrs, ","))
	return rcfg, where, files, nil
}

// dialRedis returns a client of opt, or nil and why not. With waitable, a
// standalone Redis that refuses the first connection still gets a client,
// with the error: rueidis's single-node client connects on its next call.
// Only a network error is waited for (a refused connection, a name not
// resolved yet), not a refused password. Cluster and Sentinel clients need
// their nodes to learn the topology.
func dialRedis(opt rueidis.ClientOption, mode redisstore.Mode, waitable bool) (rueidis.Client, error) {
	client, err := rueidis.NewClient(opt)
	var netErr net.Error
	if err == nil || !waitable || mode != redisstore.Standalone || !errors.As(err, &netErr) {
		return client, err
	}
	opt.ForceSingleClient = true // a client even though its connection failed
	if c, _ := rueidis.NewClient(opt); c != nil {
		return c, err
	}
	return nil, err
}

// tlsConfig builds the TLS configuration of a Redis connection: its files,
// read again when they change; with insecure_skip_verify, a configuration
// that verifies nothing (tests only), read once.
func tlsConfig(t *config.TLS) (*tls.Config, *tlsfiles.ClientFiles, error) {
	if !t.InsecureSkipVerify {
		files, err := tlsfiles.NewClient(tlsfiles.Client{CA: t.CA, Cert: t.Cert, Key: t.Key, ServerName: t.ServerName})
		if err != nil {
			return nil, nil, fmt.Errorf("store.redis.tls: %w", err)
		}
		return files.Config(), files, nil
	}
	tc := &tls.Config{ServerName: t.ServerName, InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}
	if t.Cert != "" {
		cert, err := tls.LoadX509KeyPair(t.Cert, t.Key)
		if err != nil {
			return nil, nil, fmt.Errorf("store.redis.tls: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil, nil
}

// useTLSFiles makes every connection of opt, to Redis servers and
// sentinels alike, take its TLS configuration from files at the dial: the
// server's name is the node's host unless the files name one.
func useTLSFiles(opt *rueidis.ClientOption, files *tlsfiles.ClientFiles) {
	opt.TLSConfig = files.Config()
	if opt.Sentinel.MasterSet != "" {
		opt.Sentinel.TLSConfig = opt.TLSConfig
	}
	opt.DialCtxFn = func(ctx context.Context, dst string, dialer *net.Dialer, _ *tls.Config) (net.Conn, error) {
		cfg := files.Config()
		if cfg.ServerName == "" {
			cfg.ServerName, _, _ = net.SplitHostPort(dst)
		}
		return (&tls.Dialer{NetDialer: dialer, Config: cfg}).DialContext(ctx, "tcp", dst)
	}
}
