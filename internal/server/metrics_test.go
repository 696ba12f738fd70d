package server

import (
	"testing"

	"github.com/sluicerate/sluice/internal/front"
	"github.com/sluicerate/sluice/store"
)

// The instrumented store keeps a memory store a store.Local for the
// Limiter, which then gives its calls no deadline and no circuit breaker,
// as it would the memory store alone; a store that is not local stays so.
func TestInstrumentedStoreLocal(t *testing.T) {
	ts := newTestServer(t, testConfig)
	if st := ts.srv.front.Store.ForLimiter(); !isLocal(st) {
		t.Errorf("the Limiter's store over a memory store is %T, not a store.Local", st)
	}
	if _, ok := (&front.Store{Store: brokenStore{}}).ForLimiter().(store.Local); ok {
		t.Error("a store that is not local became a store.Local")
	}
}

func isLocal(s store.Store) bool { _, ok := s.(store.Local); return ok }

// shardedBroken is a brokenStore that names shards.
type shardedBroken struct{ brokenStore }

func (shardedBroken) Shard(req *store.Request) string { return "m-" + req.Policy }
func (shardedBroken) QueueShard(q store.Queue) string { return "m-" + q.Schedule }

// The instrumented store keeps a store.Sharded (a Redis Cluster's) one for
// the Limiter, which then keeps a circuit breaker per shard.
func TestInstrumentedStoreSharded(t *testing.T) {
	sh, ok := (&front.Store{Store: shardedBroken{}}).ForLimiter().(store.Sharded)
	if !ok {
		t.Fatal("the instrumented store over a store.Sharded is not one")
	}
	if got := sh.Shard(&store.Request{Policy: "p"}); got != "m-p" {
		t.Errorf("Shard = %q, want the wrapped store's m-p", got)
	}
	if got := sh.QueueShard(store.Queue{Schedule: "s"}); got != "m-s" {
		t.Errorf("QueueShard = %q, want the wrapped store's m-s", got)
	}
	if _, ok := sh.(store.Scheduler); !ok {
		t.Error("the sharded instrumented store lost store.Scheduler")
	}
}
