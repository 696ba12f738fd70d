package server

import (
	"testing"

	"github.com/sluicerate/sluice/store"
)

// The instrumented store keeps a memory store a store.Local for the
// Limiter, which then gives its calls no deadline and no circuit breaker,
// as it would the memory store alone; a store that is not local stays so.
func TestInstrumentedStoreLocal(t *testing.T) {
	ts := newTestServer(t, testConfig)
	if _, ok := ts.srv.state.Load().lim.Store().(store.Local); !ok {
		t.Errorf("the Limiter's store over a memory store is %T, not a store.Local", ts.srv.state.Load().lim.Store())
	}
	if _, ok := (&instrumentedStore{Store: brokenStore{}}).forLimiter().(store.Local); ok {
		t.Error("a store that is not local became a store.Local")
	}
}
