// Package quotastore forwards the calls on credits balances and calendar
// quotas' usage (store.Crediter, store.Historian) to a store that keeps
// them, each call timed: the instrumented store of sluice serve (package
// front) embeds Calls, so that a Limiter over it reaches the balances.
package quotastore

import (
	"context"
	"errors"
	"time"

	"github.com/sluicerate/sluice/store"
)

// ErrNoQuotas reports a store that keeps no credits balances or usage.
var ErrNoQuotas = errors.New("server: the store keeps no credits balances or usage of calendar quotas")

// Calls forwards Credit and Usage to Store, telling Observe of each call
// (op "credit" or "usage") when it is done. Its zero value forwards
// nothing: each call is ErrNoQuotas.
type Calls struct {
	Store   store.Store
	Observe func(op string, start time.Time, err error)
}

// Credit implements store.Crediter when Store does.
func (c Calls) Credit(ctx context.Context, req *store.CreditRequest) error {
	cr, ok := c.Store.(store.Crediter)
	if !ok {
		return ErrNoQuotas
	}
	start := time.Now()
	err := cr.Credit(ctx, req)
	c.Observe("credit", start, err)
	return err
}

// Usage implements store.Historian when Store does.
func (c Calls) Usage(ctx context.Context, req *store.UsageRequest) error {
	h, ok := c.Store.(store.Historian)
	if !ok {
		return ErrNoQuotas
	}
	start := time.Now()
	err := h.Usage(ctx, req)
	c.Observe("usage", start, err)
	return err
}

var (
	_ store.Crediter  = Calls{}
	_ store.Historian = Calls{}
)
