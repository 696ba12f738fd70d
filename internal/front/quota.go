package front

import (
	"context"
	"errors"
	"time"

	"github.com/sluicerate/sluice/store"
)

// Credit implements store.Crediter when the wrapped store does: a change
// to, or a read of, a Credits rule's balance, timed as op "credit".
func (s *Store) Credit(ctx context.Context, req *store.CreditRequest) error {
	cr, ok := s.Store.(store.Crediter)
	if !ok {
		return ErrNoCredits
	}
	start := time.Now()
	err := cr.Credit(ctx, req)
	s.Observe("credit", start, err)
	return err
}

// Usage implements store.Historian when the wrapped store does: the
// totals of a calendar quota's periods, timed as op "usage".
func (s *Store) Usage(ctx context.Context, req *store.UsageRequest) error {
	h, ok := s.Store.(store.Historian)
	if !ok {
		return ErrNoUsage
	}
	start := time.Now()
	err := h.Usage(ctx, req)
	s.Observe("usage", start, err)
	return err
}

var (
	_ store.Crediter  = (*Store)(nil)
	_ store.Historian = (*Store)(nil)
)

// ErrNoCredits and ErrNoUsage report a store that keeps no credits
// balances, or no usage of calendar quotas.
var (
	ErrNoCredits = errors.New("server: the store keeps no credits balances")
	ErrNoUsage   = errors.New("server: the store keeps no usage of calendar quotas")
)
