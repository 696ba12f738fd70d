// Package goredis runs a redisstore.Store over a go-redis v9 client, for
// programs that already hold one. The store is the same as redisstore's own:
// the same scripts, keys and semantics; only the client differs.
//
// go-redis sends a command again after some network errors, up to the
// client's MaxRetries times (3 by default). If a script ran but its reply was
// lost, sending it again records the request twice: the windows then count
// one event too many, which errs toward denying, never toward admitting too
// much. Create the client with MaxRetries: -1 to rule that out.
package goredis

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
	"github.com/sluicerate/sluice/redisstore"
)

// New returns a redisstore.Store that runs its scripts over client, a
// *redis.Client, *redis.ClusterClient, *redis.Ring or any other
// redis.UniversalClient. cfg's connection fields are ignored. The store's
// Close leaves the client open.
func New(client redis.UniversalClient, cfg redisstore.Config) (*redisstore.Store, error) {
	if client == nil {
		return nil, errors.New("redisstore/goredis: nil client")
	}
	return redisstore.NewFromEvaler(NewEvaler(client), cfg)
}

// NewEvaler returns a redisstore.Evaler over client, for
// redisstore.NewFromEvaler. New uses it.
func NewEvaler(client redis.UniversalClient) redisstore.Evaler {
	return evaler{client: client}
}

// evaler implements redisstore.Evaler over a go-redis client.
type evaler struct {
	client redis.UniversalClient
}

func (e evaler) EvalSHA(ctx context.Context, sha1 string, keys, args []string) ([]int64, error) {
	return ints(e.client.EvalSha(ctx, sha1, keys, anys(args)...))
}

func (e evaler) Eval(ctx context.Context, script string, keys, args []string) ([]int64, error) {
	return ints(e.client.Eval(ctx, script, keys, anys(args)...))
}

func ints(cmd *redis.Cmd) ([]int64, error) {
	if err := cmd.Err(); err != nil {
		if redis.HasErrorPrefix(err, "NOSCRIPT") {
			return nil, fmt.Errorf("%w: %v", redisstore.ErrNoScript, err)
		}
		return nil, err
	}
	values, ok := cmd.Val().([]any)
	if !ok {
		return nil, fmt.Errorf("reply is a %T, not an array", cmd.Val())
	}
	out := make([]int64, len(values))
	for i, v := range values {
		n, ok := v.(int64)
		if !ok {
			return nil, fmt.Errorf("reply element %d is a %T, not an integer", i, v)
		}
		out[i] = n
	}
	return out, nil
}

func anys(args []string) []any {
	out := make([]any, len(args))
	for i, a := range args {
		out[i] = a
	}
	return out
}
