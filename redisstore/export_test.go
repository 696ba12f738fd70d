package redisstore

import (
	"context"
	"time"

	"github.com/redis/rueidis"
	"github.com/sluicerate/sluice/store"
)

// NewRueidisEvaler exposes the rueidis Evaler to the external tests.
func NewRueidisEvaler(c rueidis.Client) Evaler { return rueidisEvaler{client: c} }

// DecideBatch decides reqs, whose keys are keys[i] each, as one batch of
// decide.lua at the time now (µs), and sets each request's Results, or
// returns its error.
func DecideBatch(c rueidis.Client, keys [][]string, reqs []*store.Request, now int64) []error {
	return decideBatch(newBatcher(rueidisEvaler{client: c}), keys, reqs, now)
}

// DecideAcrossSlots is DecideBatch through a Cluster master's batcher,
// which sends a batch of several slots to the master of the first
// request's slot, whichever master serves the others' (through functions
// where the server has them).
func DecideAcrossSlots(c rueidis.Client, keys [][]string, reqs []*store.Request, now int64) []error {
	return decideBatch(&batcher{ev: rueidisEvaler{client: c, fns: &functions{}}, slots: true}, keys, reqs, now)
}

// FrozenSlotsBatch returns a decider of batches like DecideAcrossSlots
// whose calls are routed by a slot map read once now and again only when a
// call is redirected or refused (no poll each second, so that a test can
// send by a map a failover made stale), and a func that stops it.
func FrozenSlotsBatch(c rueidis.Client) (decide func(keys [][]string, reqs []*store.Request, now int64) []error, stop func()) {
	r := &slotReader{client: c}
	r.poll()
	r.poller = startPoller(time.Hour, r.poll)
	ev := rueidisEvaler{client: c, fns: &functions{}, slots: r}
	return func(keys [][]string, reqs []*store.Request, now int64) []error {
		return decideBatch(&batcher{ev: ev, slots: true}, keys, reqs, now)
	}, r.close
}

func decideBatch(b *batcher, keys [][]string, reqs []*store.Request, now int64) []error {
	calls := make([]*batchCall, len(keys))
	for i := range calls {
		calls[i] = &batchCall{ctx: context.Background(), keys: keys[i],
			shape: shapeOf(modeOf(reqs[i]), reqs[i], now, firstChecks(len(reqs[i].Checks)))}
	}
	b.exec(calls)
	errs := make([]error, len(calls))
	for i, c := range calls {
		if errs[i] = c.err; errs[i] == nil {
			errs[i] = parseResults(reqs[i], c.reply, nil, ruleWidth, now)
		}
	}
	return errs
}

// ClusterSlot exposes clusterSlot to the external tests.
func ClusterSlot(tag string) uint16 { return clusterSlot([]byte(tag)) }

// ScriptSHAs returns the SHA-1 of every script Warm loads.
func ScriptSHAs() []string { return allSHAs }

// UseScripts makes s run decide.lua, lease.lua and finish.lua as scripts,
// as over a server without functions.
func UseScripts(s *Store) {
	if ev, ok := s.ev.(rueidisEvaler); ok && ev.fns != nil {
		ev.fns.off.Store(true)
	}
}

// Library returns the name of the function library (decide.lua, lease.lua, finish.lua).
func Library() string { return sluiceLibrary.name }

// KeySlot exposes keySlot to the external tests.
func KeySlot(key string) uint16 { return keySlot(key) }
