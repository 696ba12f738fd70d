// Package edgetest holds what the tests of sluice's edges (httplimit,
// grpclimit, the server's endpoints) share.
package edgetest

import (
	"context"
	"errors"

	"github.com/sluicerate/sluice/store"
)

// ErrStore is the error of every call of FailingStore. It names a Redis
// address, which an edge must log and never show a client.
var ErrStore = errors.New("redis: connection refused to 10.1.2.3:6379")

// FailingStore is a store whose every decision fails with ErrStore, as a
// store whose server is down. Its zero value is ready to use.
type FailingStore struct{}

// Decide returns ErrStore.
func (FailingStore) Decide(context.Context, *store.Request) error { return ErrStore }

// Close does nothing.
func (FailingStore) Close() error { return nil }

var _ store.Store = FailingStore{}
