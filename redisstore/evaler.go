package redisstore

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/redis/rueidis"
)

// The road to Redis. A Store runs every script through its Evaler, with
// run; decide.lua, the hot one, goes through its decider, chosen when the
// store is made: over a rueidis client, a batcher that sends the decisions
// arriving together as one decide.lua call (batch.go), as a function where
// the server has functions (function.go); over any other
// client, the Evaler itself. lease.lua and finish.lua go through
// Store.runFunction: as functions over rueidis where the server has them,
// else as scripts.

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

// eval is one way to send a script: by SHA-1 (EVALSHA) or by source (EVAL).
type eval[R any] func(ctx context.Context, shaOrSource string, keys, args []string) (R, error)

// sender sends scripts whose replies are R: by SHA-1, and by source when
// Redis does not have the script.
type sender[R any] struct{ bySHA, bySource eval[R] }

// intSender sends scripts through ev, replying integers.
func intSender(ev Evaler) sender[[]int64] { return sender[[]int64]{ev.EvalSHA, ev.Eval} }

// eval runs sc by its SHA-1 and, when Redis does not have it, by its
// source, which loads it. NOSCRIPT means the script did not run, so running
// it again cannot count anything twice; any other error is returned as is.
// It is the one place that handles NOSCRIPT.
func (s sender[R]) eval(ctx context.Context, sc *script, keys, args []string) (R, error) {
	reply, err := s.bySHA(ctx, sc.sha1, keys, args)
	if errors.Is(err, ErrNoScript) {
		reply, err = s.bySource(ctx, sc.src, keys, args)
	}
	return reply, err
}

// run runs sc through ev.
func run(ctx context.Context, ev Evaler, sc *script, keys, args []string) ([]int64, error) {
	reply, err := intSender(ev).eval(ctx, sc, keys, args)
	if err != nil {
		return nil, fmt.Errorf("redisstore: running %s: %w", sc.name, err)
	}
	return reply, nil
}

// decider runs decide.lua: a Store's road for decisions. A decision is its
// keys and its shape (shapeOf); the reply is decide.lua's for it alone.
type decider interface {
	decide(ctx context.Context, keys []string, shape string) ([]int64, error)
}

// evalerDecider runs each decision as its own script call.
type evalerDecider struct{ ev Evaler }

func (d evalerDecider) decide(ctx context.Context, keys []string, shape string) ([]int64, error) {
	return intSender(d.ev).eval(ctx, decideScripts.forShape(shape), keys, singleArgs(shape))
}

// rueidisEvaler runs scripts over a rueidis client. Commands that are not
// read-only, such as EVALSHA and EVAL, are never retried by rueidis.
type rueidisEvaler struct {
	client rueidis.Client
	acks   *replicaAcks // with Config.WaitForReplicas, else nil
	fns    *functions   // whether decide.lua, lease.lua and finish.lua run as functions (function.go); nil: never
	slots  *slotReader  // over a Cluster: routes each call to its slot's master (shards.go); else nil
}

func (e rueidisEvaler) EvalSHA(ctx context.Context, sha1 string, keys, args []string) ([]int64, error) {
	return ints(e.raw(ctx, func() rueidis.Completed {
		return e.client.B().Evalsha().Sha1(sha1).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
	}))
}

func (e rueidisEvaler) Eval(ctx context.Context, script string, keys, args []string) ([]int64, error) {
	return ints(e.raw(ctx, func() rueidis.Completed {
		return e.client.B().Eval().Script(script).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
	}))
}

// raw sends the command build makes and returns its reply message, with
// NOSCRIPT as ErrNoScript. build may be called again to send the command to
// another node when a Cluster node redirects it (MOVED: it did not run
// there). With replica acknowledgements it waits for the replicas
// (replicas.go); over a Cluster it goes to the master the store's slot map
// names (shards.go).
func (e rueidisEvaler) raw(ctx context.Context, build func() rueidis.Completed) (rueidis.RedisMessage, error) {
	var msg rueidis.RedisMessage
	var err error
	switch {
	case e.acks != nil:
		msg, err = e.acks.do(ctx, build)
	case e.slots != nil:
		msg, err = e.slots.do(ctx, build)
	default:
		msg, err = e.client.Do(ctx, build()).ToMessage()
	}
	if err != nil {
		if rerr, ok := rueidis.IsRedisErr(err); ok && rerr.IsNoScript() {
			return msg, fmt.Errorf("%w: %v", ErrNoScript, err)
		}
		return msg, err
	}
	return msg, nil
}

func array(m rueidis.RedisMessage, err error) ([]rueidis.RedisMessage, error) {
	if err != nil {
		return nil, err
	}
	return m.ToArray()
}

// ints reads a reply that is an array of integers.
func ints(m rueidis.RedisMessage, err error) ([]int64, error) {
	values, err := array(m, err)
	if err != nil {
		return nil, err
	}
	out := make([]int64, len(values))
	for i := range values {
		if out[i], err = values[i].ToInt64(); err != nil {
			return nil, fmt.Errorf("reply element %d is not an integer: %w", i, err)
		}
	}
	return out, nil
}
