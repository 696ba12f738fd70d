package redisstore

import (
	"context"

	"github.com/redis/rueidis"
)

// NewRueidisEvaler exposes the rueidis Evaler to the external tests.
func NewRueidisEvaler(c rueidis.Client) Evaler { return rueidisEvaler{client: c} }

// DecideBatch sends decide.lua's requests, keys[i] and args[i] each, as one
// batch, and returns each request's reply and error.
func DecideBatch(c rueidis.Client, keys, args [][]string) ([][]int64, []error) {
	calls := make([]*batchCall, len(keys))
	for i := range calls {
		calls[i] = &batchCall{ctx: context.Background(), keys: keys[i], args: args[i]}
	}
	newBatcher(c).exec(calls)
	replies, errs := make([][]int64, len(calls)), make([]error, len(calls))
	for i, c := range calls {
		replies[i], errs[i] = c.reply, c.err
	}
	return replies, errs
}
