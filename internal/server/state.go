package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"time"

	"github.com/sluicerate/sluice"
	"github.com/sluicerate/sluice/httplimit"
	"github.com/sluicerate/sluice/internal/config"
	"github.com/sluicerate/sluice/internal/edge"
	"github.com/sluicerate/sluice/internal/front"
	"github.com/sluicerate/sluice/internal/hooks"
	"github.com/sluicerate/sluice/internal/httpapi"
	"github.com/sluicerate/sluice/internal/overrides"
	"github.com/sluicerate/sluice/memstore"
	"github.com/sluicerate/sluice/store"
)

// Swap makes cfg the configuration of every request that starts after it
// returns. Requests in flight finish under the configuration they started
// with. The store is not changed: a change to the file's store section needs
// a restart, and Swap logs a warning when it sees one.
func (s *Server) Swap(cfg *config.Config) error {
	if cfg == nil {
		return errors.New("server: config is nil")
	}
	st, err := s.newState(cfg)
	if err != nil {
		return err
	}
	s.overrides.SetTargets("policies", overrides.PolicyTargets(cfg.Policies))
	if old := s.front.State(); old != nil && storeChanged(old.Config.Store, cfg.Store) {
		s.front.Log.Warn("the store section changed; restart sluice to use the new store (the other changes are applied)",
			slog.String("file", cfg.File))
	}
	old := s.front.State()
	s.front.Publish(st)
	if old != nil {
		s.closing.Add(1)
		go func() {
			defer s.closing.Done()
			s.closeLimiter(old.Limiter, "a reload")
		}()
	}
	return nil
}

// Close gives back the unused units of the slices of budgeted rules that
// the server's Limiters hold, the current one's and those of the
// configurations a reload swapped out, so that the store counts only what
// was admitted from them. Later decisions of budgeted rules go to the store
// one by one. Call it once the requests in flight are done, before the
// store is closed: sluice serve does on a graceful shutdown. A slice whose
// return fails is left to end in the store; the errors are logged.
func (s *Server) Close() {
	s.closing.Wait()
	if st := s.front.State(); st != nil {
		s.closeLimiter(st.Limiter, "shutdown")
	}
}

// closeLimiter closes l, which a reload swapped out or the server is
// shutting down (why), logging what it could not give back.
func (s *Server) closeLimiter(l *sluice.Limiter, why string) {
	if err := s.front.CloseLimiter(l); err != nil {
		s.front.Log.Warn("giving back the slices of budgeted rules on "+why+"; the store counts their units until each slice ends",
			slog.Any("err", err))
	}
}

// newState builds the state of cfg: its Limiter over the instrumented
// store, and the edge's road for its policies and schedules, with
// forward-auth's keys.
func (s *Server) newState(cfg *config.Config) (*front.State, error) {
	lc := sluice.Config{Timeout: s.timeout, DenyCache: front.CacheDenials(cfg, s.denyCache),
		Overrides: s.overrides}
	hooks.Set(&lc, hooks.Hooks{OnCacheHit: s.front.Store.CacheHit, OnOverLimit: s.front.Over.Observe})
	if cfg.Store != nil {
		lc.OnError = cfg.Store.OnError
		if cfg.Store.Timeout > 0 {
			lc.Timeout = cfg.Store.Timeout
		}
		if cfg.Store.Fallback {
			lc.Fallback, lc.FallbackShare = s.fallbackStore(), cfg.Store.FallbackShare
		}
	}
	ip, err := httplimit.NewIPResolver(httplimit.IPConfig{TrustedProxies: cfg.ForwardAuth.TrustedProxies})
	if err != nil {
		return nil, fmt.Errorf("server: forward_auth: %w", err)
	}
	st := &front.State{Config: cfg, Limiter: sluice.NewLimiter(s.front.Store.ForLimiter(), lc), Loaded: time.Now()}
	policies := make([]*sluice.Policy, len(cfg.Policies))
	for i := range cfg.Policies {
		policies[i] = &cfg.Policies[i]
	}
	schedules := make([]*sluice.Schedule, len(cfg.Schedules))
	for i := range cfg.Schedules {
		schedules[i] = &cfg.Schedules[i]
	}
	st.Policies, err = edge.NewSet(edge.Config[*http.Request]{
		Limiter:      st.Limiter,
		Policies:     policies,
		Schedules:    schedules,
		Keys:         httpapi.ForwardKeys(&cfg.ForwardAuth, ip),
		KeysOptional: true,
		Absent:       httpapi.ErrNoHeader,
		Log: edge.Log{
			Logger:             s.front.Log,
			Outage:             s.front.Outage,
			StoreFailed:        "store failed; decided by on_error",
			Shadow:             "shadow policy would have denied",
			Failed:             "deciding a request",
			ReserveStoreFailed: "store failed; reservation decided by on_error",
			CancelStoreFailed:  "store failed; reservation not cancelled",
			ReserveFailed:      "reserving",
		},
	})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	return st, nil
}

// storeChanged reports whether two store sections differ.
func storeChanged(a, b *config.Store) bool {
	if (a == nil) != (b == nil) {
		return true
	}
	return !reflect.DeepEqual(a, b)
}

// fallbackStore is the memory store that decides while the store fails
// under on_error: fallback: one for the server's life, so that a reload
// keeps what it counted. The leases it grants count in the server's lease
// metrics as the store's do.
func (s *Server) fallbackStore() store.Store {
	s.fallbackOnce.Do(func() { s.fallback = countedFallback{memstore.New(memstore.Config{}), s.front.Metrics} })
	return s.fallback
}

// countedFallback is the fallback memory store with the leases it grants
// and ends counted in the server's metrics (sluice_leases_in_flight,
// sluice_leases_expired_total). Its other calls are not store calls, and
// are not timed as those are.
type countedFallback struct {
	*memstore.Store
	m *front.Metrics
}

// Acquire implements store.Leaser.
func (f countedFallback) Acquire(ctx context.Context, req *store.Request, lease *store.LeaseGrant) error {
	err := f.Store.Acquire(ctx, req, lease)
	f.m.LeaseAcquired(req, lease, err)
	return err
}

// Finish implements store.Leaser.
func (f countedFallback) Finish(ctx context.Context, req *store.FinishRequest) (store.LeaseState, error) {
	st, err := f.Store.Finish(ctx, req)
	f.m.LeaseFinished(req, st, err)
	return st, err
}
