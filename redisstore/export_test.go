package redisstore

import (
	"context"
	"strconv"

	"github.com/redis/rueidis"
	"github.com/sluicerate/sluice/store"
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
	newBatcher(rueidisEvaler{client: c}).exec(calls)
	replies, errs := make([][]int64, len(calls)), make([]error, len(calls))
	for i, c := range calls {
		replies[i], errs[i] = c.reply, c.err
	}
	return replies, errs
}

// DecisionArgs returns decide.lua's arguments for req at the time now (µs).
func DecisionArgs(req *store.Request, now int64) []string {
	return decideArgs(scriptMode(req), req, strconv.FormatInt(now, 10), firstChecks(len(req.Checks)))
}

// ParseResults reads decide.lua's reply for req into req.Results.
func ParseResults(req *store.Request, reply []int64) error {
	return parseResults(req, reply, nil, 5)
}

// ClusterSlot exposes clusterSlot to the external tests.
func ClusterSlot(tag string) uint16 { return clusterSlot([]byte(tag)) }

// ScriptSHAs returns the SHA-1 of every script Warm loads.
func ScriptSHAs() []string { return allSHAs }
