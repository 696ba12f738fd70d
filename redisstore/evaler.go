package redisstore

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"

	"github.com/redis/rueidis"
)

// Evaler is what a Store needs from a Redis client: running a Lua script by
// its SHA-1 and, when Redis does not know the script, by its source. New and
// NewFromClient use one over rueidis; package redisstore/goredis adapts a
// go-redis client. Implementations must be safe for concurrent use and must
// never send a command again after its reply was lost: a script that ran but
// whose reply did not arrive would record its request twice.
type Evaler interface {
	// EvalSHA runs EVALSHA with the script's SHA-1, keys and args, and
	// returns the reply, which for every script of this package is an array
	// of integers. When Redis answers NOSCRIPT it returns an error that wraps
	// ErrNoScript.
	EvalSHA(ctx context.Context, sha1 string, keys, args []string) ([]int64, error)

	// Eval runs EVAL with the script's source, keys and args, which also
	// loads the script into Redis's script cache.
	Eval(ctx context.Context, script string, keys, args []string) ([]int64, error)
}

// ErrNoScript reports that Redis does not have a script in its script cache
// (a NOSCRIPT error): after a restart, a failover or SCRIPT FLUSH.
var ErrNoScript = errors.New("redisstore: NOSCRIPT: the script is not loaded")

// script is one of the package's Lua scripts with its SHA-1.
type script struct {
	name string
	src  string
	sha1 string
}

func newScript(name, src string) *script {
	sum := sha1.Sum([]byte(src))
	return &script{name: name, src: src, sha1: hex.EncodeToString(sum[:])}
}

// run runs sc with EVALSHA and, if Redis does not have it, with EVAL, which
// loads it. NOSCRIPT means the script did not run, so running it again
// cannot count anything twice; any other error is returned as is.
func run(ctx context.Context, ev Evaler, sc *script, keys, args []string) ([]int64, error) {
	reply, err := ev.EvalSHA(ctx, sc.sha1, keys, args)
	if errors.Is(err, ErrNoScript) {
		reply, err = ev.Eval(ctx, sc.src, keys, args)
	}
	if err != nil {
		return nil, fmt.Errorf("redisstore: running %s: %w", sc.name, err)
	}
	return reply, nil
}

// rueidisEvaler runs scripts over a rueidis client. Commands that are not
// read-only, such as EVALSHA and EVAL, are never retried by rueidis. With
// batchers, decide.lua calls go through them (see batch.go).
type rueidisEvaler struct {
	client rueidis.Client
	batch  *batcher      // one server: any decisions may share a batch
	slots  *slotBatchers // a Cluster: decisions of one hash slot may
}

// newRueidisEvaler returns the Evaler of a Store over client: it batches
// decisions, on a Redis Cluster those whose keys lie in one hash slot.
func newRueidisEvaler(client rueidis.Client) rueidisEvaler {
	e := rueidisEvaler{client: client}
	if client.Mode() == rueidis.ClientModeCluster {
		e.slots = &slotBatchers{client: client}
	} else {
		e.batch = newBatcher(client)
	}
	return e
}

func (e rueidisEvaler) EvalSHA(ctx context.Context, sha1 string, keys, args []string) ([]int64, error) {
	if sha1 == decideScript.sha1 && len(keys) > 0 {
		switch {
		case e.batch != nil:
			return e.batch.decide(ctx, keys, args)
		case e.slots != nil:
			return e.slots.of(keys[0]).decide(ctx, keys, args)
		}
	}
	cmd := e.client.B().Evalsha().Sha1(sha1).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
	return intsReply(e.client.Do(ctx, cmd))
}

func (e rueidisEvaler) Eval(ctx context.Context, script string, keys, args []string) ([]int64, error) {
	cmd := e.client.B().Eval().Script(script).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
	return intsReply(e.client.Do(ctx, cmd))
}

// slotBatchers are a Cluster client's batchers, one per hash slot that a
// decision went to. A script's keys must lie in one slot, and every key of a
// decision does (its keys share a hash tag: see keys.go and crossslot.go),
// so the decisions of one slot can share a batch.
type slotBatchers struct {
	client rueidis.Client
	m      sync.Map // hash slot (uint16) -> *batcher
}

// of returns the batcher of key's hash slot.
func (s *slotBatchers) of(key string) *batcher {
	cmd := s.client.B().Exists().Key(key).Build()
	slot := cmd.Slot() // rueidis's CRC16 of the key's hash tag
	if b, ok := s.m.Load(slot); ok {
		return b.(*batcher)
	}
	b, _ := s.m.LoadOrStore(slot, newBatcher(s.client))
	return b.(*batcher)
}

func intsReply(res rueidis.RedisResult) ([]int64, error) {
	if err := res.Error(); err != nil {
		if rerr, ok := rueidis.IsRedisErr(err); ok && rerr.IsNoScript() {
			return nil, fmt.Errorf("%w: %v", ErrNoScript, err)
		}
		return nil, err
	}
	m, err := res.ToMessage()
	if err != nil {
		return nil, err
	}
	return ints(&m)
}
