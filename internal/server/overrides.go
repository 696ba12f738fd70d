package server

import (
	"context"
	"time"

	"github.com/sluicerate/sluice/internal/adminauth"
	"github.com/sluicerate/sluice/internal/envoy"
	"github.com/sluicerate/sluice/internal/overrides"
	"github.com/sluicerate/sluice/store"
)

// newOverrides returns the server's runtime overrides over the store's
// (opts.OverrideStore, else st when it keeps them), told of the Envoy
// model's rules whenever a configuration is put in use.
func (s *Server) newOverrides(st store.Store, opts Options) {
	os := opts.OverrideStore
	if os == nil {
		os, _ = st.(store.OverrideStore)
	}
	s.overrides = overrides.New(overrides.Options{Store: os, Now: s.view.Clock().Now, Logger: s.front.Log,
		Max: opts.MaxOverrides, Poll: opts.OverridePoll})
	s.hasOverrides = os != nil
	s.envoy.OnConfig(func(c *envoy.Config) { s.overrides.SetTargets("envoy", overrides.EnvoyTargets(c)) })
}

// FollowOverrides reads the store's runtime overrides once, within wait,
// so that the first requests apply them, then follows their changes until
// ctx ends (Options.OverridePoll). It returns at once when the store keeps
// none. A first read that fails is logged; the changes are followed all
// the same.
func (s *Server) FollowOverrides(ctx context.Context, wait time.Duration) {
	if !s.hasOverrides {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, wait)
	_ = s.overrides.Poll(rctx)
	cancel()
	go s.overrides.Run(ctx)
}

// Overrides returns the server's runtime overrides.
func (s *Server) Overrides() *overrides.Manager { return s.overrides }

// tokens are the admin listener's tokens: opts.Tokens, and opts.Token as
// a write token named "admin".
func (opts AdminOptions) tokens() adminauth.Tokens {
	ts := append(adminauth.Tokens(nil), opts.Tokens...)
	if opts.Token != "" {
		ts = append(ts, adminauth.Token{Name: "admin", Secret: opts.Token, Access: adminauth.Write})
	}
	return ts
}
